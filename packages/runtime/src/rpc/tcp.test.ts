import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { KvrError } from '@kvrouter/protocols';
import { Rng } from '@kvrouter/testkit';
import { TcpRequestClient, TcpRequestServer, tcpPortFromEnv } from './tcp.js';
import { FrameDecoder, encodeFrame, parseMsg } from './wire.js';

const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

async function pair(
  clientOpts: ConstructorParameters<typeof TcpRequestClient>[0] = {},
): Promise<{ s: TcpRequestServer; c: TcpRequestClient }> {
  const s = await TcpRequestServer.listen({ host: '127.0.0.1', port: 0 });
  const c = new TcpRequestClient(clientOpts);
  cleanup.push(
    () => s.close(),
    () => c.close(),
  );
  return { s, c };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('FrameDecoder', () => {
  const frames = (msgs: object[]): Buffer =>
    Buffer.concat(msgs.flatMap((m) => encodeFrame(m as never, 1 << 20, 'x')).map((b) => Buffer.from(b)));

  it('splits frames at any chunk boundary, several per chunk or one over many', () => {
    const msgs = [
      { t: 'data', id: 1, payload: 'a' },
      { t: 'data', id: 2, payload: new Uint8Array(300).fill(7) },
      { t: 'end', id: 1 },
    ];
    const bytes = frames(msgs);
    // {t:"end", id:1} is a 2-entry fixmap: 0x82, 0xa1 't', 0xa3 'end', 0xa2 'id', 0x01 = 11 bytes,
    // so its frame is 4 + 11 = 15 bytes, the last 15 of the stream.
    expect(bytes.subarray(bytes.length - 15, bytes.length - 11)).toEqual(Buffer.from([0, 0, 0, 11]));
    for (const step of [1, 3, 4, 5, 17, bytes.length]) {
      const got: unknown[] = [];
      const d = new FrameDecoder(1 << 20, (b) => got.push(parseMsg(b, 1 << 20)));
      for (let i = 0; i < bytes.length; i += step) d.push(bytes.subarray(i, i + step));
      expect(got).toEqual(msgs);
    }
  });

  it('random messages split at random points decode to the same messages (seeded)', () => {
    const rng = new Rng(42);
    for (let round = 0; round < 50; round++) {
      const msgs = Array.from({ length: rng.int(1, 20) }, (_, i) => ({
        t: 'data',
        id: i,
        payload: rng.int(0, 2) === 0 ? rng.bytes(rng.int(0, 5000)) : 'x'.repeat(rng.int(0, 40)),
      }));
      const bytes = frames(msgs);
      const got: unknown[] = [];
      const d = new FrameDecoder(1 << 20, (b) => got.push(parseMsg(b, 1 << 20)));
      for (let i = 0; i < bytes.length;) {
        const n = rng.int(1, 700);
        d.push(bytes.subarray(i, i + n));
        i += n;
      }
      expect(got).toEqual(msgs);
    }
  });

  it('rejects a header above the limit before buffering the body', () => {
    const d = new FrameDecoder(100, () => undefined);
    const head = Buffer.alloc(4);
    head.writeUInt32BE(101, 0);
    expect(() => d.push(head)).toThrow(/exceeds the limit of 100/);
    const ok = new FrameDecoder(100, () => undefined);
    head.writeUInt32BE(100, 0);
    expect(() => ok.push(head)).not.toThrow();
  });

  it('parseMsg names what is wrong', () => {
    const bad = (v: object): string => {
      const [f] = encodeFrame(v as never, 1 << 20, 'x');
      try {
        parseMsg(f!.subarray(4), 1 << 20);
      } catch (e) {
        return `${(e as KvrError).code}: ${(e as KvrError).message}`;
      }
      return 'accepted';
    };
    expect(bad({ t: 'data', id: -1 })).toBe('protocol_error: rpc message: id must be a u32');
    expect(bad({ t: 'data', id: 2 ** 32 })).toBe('protocol_error: rpc message: id must be a u32');
    expect(bad({ t: 'nope', id: 1 })).toBe('protocol_error: rpc message: unknown t "nope"');
    expect(bad({ t: 'req', id: 1 })).toBe('protocol_error: rpc message: req.endpoint must be a string');
    expect(bad({ t: 'cancel', id: 4294967295 })).toBe('accepted');
  });
});

describe('tcp request plane', () => {
  it('a peer announcing an oversize frame is disconnected; other connections are unaffected', async () => {
    const { s, c } = await pair();
    s.serve('ping', async () => 'pong');
    const port = Number(s.transport.tcp.split(':')[1]);
    const raw = connect(port, '127.0.0.1');
    const closed = new Promise<void>((r) => raw.on('close', () => r()));
    raw.on('error', () => undefined);
    const head = Buffer.alloc(4);
    head.writeUInt32BE(32 * 1024 * 1024 + 1, 0);
    raw.write(head);
    await closed;
    expect(await c.unary(s.transport, 'ping', null)).toBe('pong');
  });

  it('pools: streams share a connection until each carries its share, then new ones open', async () => {
    const { s, c } = await pair({ streamsPerConnection: 2, maxConnectionsPerPeer: 2 });
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    s.serve('hold', async function* () {
      yield 1;
      await gate;
    });
    const its = Array.from({ length: 5 }, () => c.stream(s.transport, 'hold', null));
    for (const it of its) await it.next();
    // 2 per connection until the pool is full (2), then the least-loaded takes the rest: 3 + 2.
    expect(c.connectionCount(s.transport.tcp)).toBe(2);
    release();
    for (const it of its) expect(await it.next()).toEqual({ value: undefined, done: true });
  });

  it('closes idle connections and reconnects transparently', async () => {
    const { s, c } = await pair({ idleTimeoutMs: 50 });
    s.serve('ping', async () => 'pong');
    expect(await c.unary(s.transport, 'ping', null)).toBe('pong');
    expect(c.connectionCount()).toBe(1);
    await sleep(200);
    expect(c.connectionCount()).toBe(0);
    expect(await c.unary(s.transport, 'ping', null)).toBe('pong');
  });

  it('refused connection is cannot_connect; a client-side closed connection is disconnected', async () => {
    const { s, c } = await pair();
    s.serve('hang', async function* (_p: unknown, ctx) {
      yield 0;
      await new Promise((r) => ctx.signal.addEventListener('abort', r));
    });
    const dead = await TcpRequestServer.listen({ host: '127.0.0.1', port: 0 });
    await dead.close();
    await expect(c.unary(dead.transport, 'x', null)).rejects.toMatchObject({
      code: 'cannot_connect',
      status: 503,
    });
    const it = c.stream(s.transport, 'hang', null);
    await it.next();
    await c.close();
    await expect(it.next()).rejects.toMatchObject({ code: 'disconnected' });
  });

  it('advertises the bind host, or for a wildcard bind a concrete address; validates DYN_TCP_RPC_PORT', async () => {
    const s = await TcpRequestServer.listen({ host: '0.0.0.0', port: 0 });
    cleanup.push(() => s.close());
    expect(s.transport.tcp).toMatch(/^\d+\.\d+\.\d+\.\d+:\d+$/);
    expect(s.transport.tcp.startsWith('0.0.0.0')).toBe(false);
    expect(s.transport.tcp.endsWith(`:${s.port}`)).toBe(true);
    expect(tcpPortFromEnv({})).toBe(0);
    expect(tcpPortFromEnv({ DYN_TCP_RPC_PORT: '41231' })).toBe(41231);
    for (const bad of ['65536', '-1', 'x', '1.5'])
      expect(() => tcpPortFromEnv({ DYN_TCP_RPC_PORT: bad })).toThrow(
        expect.objectContaining({ code: 'invalid_argument' }),
      );
    const c = new TcpRequestClient();
    expect(() => c.stream({ tcp: 'nohost' }, 'e', null)).toThrow(
      expect.objectContaining({ code: 'invalid_argument' }),
    );
    expect(() => c.stream({ tcp: 'h:0' }, 'e', null)).toThrow(
      expect.objectContaining({ code: 'invalid_argument' }),
    );
    await c.close();
  });
});
