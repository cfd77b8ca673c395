import { describe, expect, it } from 'vitest';
import { InprocHub, InprocRequestClient } from './inproc.js';

describe('inproc request plane', () => {
  it('passes payloads and items by reference (no serialisation)', async () => {
    const hub = new InprocHub();
    const s = hub.listen({ name: 'w1' });
    const payload = { tokens: new Uint32Array([1, 2, 3]) };
    let seen: unknown = null;
    s.serve('same', async (p: unknown) => {
      seen = p;
      return p;
    });
    const c = new InprocRequestClient(hub);
    const r = await c.unary(s.transport, 'same', payload);
    expect(seen).toBe(payload);
    expect(r).toBe(payload);
    expect(() => hub.listen({ name: 'w1' })).toThrow(expect.objectContaining({ code: 'invalid_argument' }));
    await s.close();
  });

  it('a fast generator waits for a slow consumer instead of buffering without bound', async () => {
    const hub = new InprocHub();
    const s = hub.listen();
    let produced = 0;
    s.serve('flood', async function* () {
      for (let i = 0; i < 10_000; i++) {
        produced++;
        yield i;
      }
    });
    const c = new InprocRequestClient(hub);
    const it = c.stream<number>(s.transport, 'flood', null);
    expect((await it.next()).value).toBe(0);
    await new Promise((r) => setTimeout(r, 50));
    // At most the 64-item buffer plus the item in flight, never the whole 10 000.
    expect(produced).toBeLessThanOrEqual(66);
    let n = 1;
    for await (const x of it) expect(x).toBe(n++);
    expect(n).toBe(10_000);
    await s.close();
  });
});
