import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { KvrError } from '@kvrouter/protocols';
import { Rng, startNats, type ServiceHandle } from '@kvrouter/testkit';
import { connectNats, type NatsConnection } from '../nats-connection.js';
import { NatsRequestClient, NatsRequestServer } from './nats.js';

let nats: ServiceHandle;
const conns: NatsConnection[] = [];
const conn = async (url = nats.url): Promise<NatsConnection> => {
  const nc = await connectNats(url, { reconnectWaitMs: 100 });
  conns.push(nc);
  return nc;
};

beforeAll(async () => {
  nats = await startNats({ jetstream: false });
});
afterAll(async () => {
  await Promise.all(conns.filter((c) => !c.isClosed()).map((c) => c.close()));
  await nats.stop();
});

const aborted = (signal: AbortSignal): Promise<void> =>
  new Promise((r) => (signal.aborted ? r() : signal.addEventListener('abort', () => r(), { once: true })));

async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>(
        (_, rej) => (timer = setTimeout(() => rej(new Error(`${what}: not within ${ms} ms`)), ms)),
      ),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

describe('nats request plane', () => {
  it('items above the server max_payload (1 MiB) arrive whole, in fragments, both ways', async () => {
    const s = await NatsRequestServer.start(await conn(), { subject: 'kvr.t.frag' });
    s.serve('rev', async function* (p: unknown) {
      const b = p as Uint8Array;
      yield b.slice().reverse();
      yield b.length;
    });
    const c = new NatsRequestClient(await conn());
    const big = new Rng(7).bytes(3 * 1024 * 1024 + 5);
    const got: unknown[] = [];
    for await (const x of c.stream(s.transport, 'rev', big)) got.push(x);
    expect(got[1]).toBe(big.length);
    expect(Buffer.from(got[0] as Uint8Array).equals(Buffer.from(big.slice().reverse()))).toBe(true);
    await c.close();
    await s.close();
  });

  it('a caller that vanishes (its connection closed) is noticed: the handler is cancelled', async () => {
    const s = await NatsRequestServer.start(await conn(), { subject: 'kvr.t.gone', heartbeatMs: 50 });
    let cancelled!: () => void;
    const wasCancelled = new Promise<void>((r) => (cancelled = r));
    s.serve('hang', async function* (_p: unknown, ctx) {
      yield 'hello';
      await aborted(ctx.signal);
      cancelled();
    });
    const cnc = await conn();
    const c = new NatsRequestClient(cnc);
    const it = c.stream(s.transport, 'hang', null);
    expect((await it.next()).value).toBe('hello');
    await cnc.close();
    // The next heartbeat's reply subject comes back as no-responders.
    await within(wasCancelled, 3000, 'server-side cancel');
    await vi.waitFor(() => expect(s.activeStreams).toBe(0), { timeout: 3000 });
    await s.close();
  });

  it('a server that dies before answering anything gives connection_timeout', async () => {
    const s = await NatsRequestServer.start(await conn(), { subject: 'kvr.t.mute', heartbeatMs: 50 });
    s.serve('die', async (_p: unknown, ctx) => {
      s.abort();
      await aborted(ctx.signal);
      return 1;
    });
    const c = new NatsRequestClient(await conn(), { livenessMs: 300 });
    const t0 = Date.now();
    await expect(c.unary(s.transport, 'die', null)).rejects.toMatchObject({
      code: 'connection_timeout',
      status: 504,
    });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(300);
    await c.close();
  });

  it('losing the NATS server fails open streams with disconnected', async () => {
    const own = await startNats({ jetstream: false });
    try {
      const s = await NatsRequestServer.start(await conn(own.url), { subject: 'kvr.t.lost' });
      s.serve('hang', async function* (_p: unknown, ctx) {
        yield 1;
        await aborted(ctx.signal);
      });
      const c = new NatsRequestClient(await conn(own.url), { livenessMs: 60_000 });
      const it = c.stream(s.transport, 'hang', null);
      await it.next();
      await own.stop();
      await expect(within(it.next(), 5000, 'disconnect')).rejects.toMatchObject({ code: 'disconnected' });
    } finally {
      await own.stop();
    }
  });

  it('connectNats: bad URL is invalid_argument, nobody listening is cannot_connect', async () => {
    await expect(connectNats('http://x:1')).rejects.toMatchObject({ code: 'invalid_argument' });
    const e = await connectNats('nats://127.0.0.1:1', { timeoutMs: 500 }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(KvrError);
    expect((e as KvrError).code).toBe('cannot_connect');
    expect((e as KvrError).detail?.field).toBe('NATS_SERVER');
  });

  it('subjects with wildcards or empty tokens are refused', async () => {
    const nc = await conn();
    await expect(NatsRequestServer.start(nc, { subject: 'a.*' })).rejects.toMatchObject({
      code: 'invalid_argument',
    });
    const c = new NatsRequestClient(nc);
    expect(() => c.stream({ nats_tcp: 'a..b' }, 'e', null)).toThrow(
      expect.objectContaining({ code: 'invalid_argument' }),
    );
    await c.close();
  });
});
