/**
 * One conformance suite for every request plane: tcp, nats (against a real nats-server) and inproc.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { KvrError } from '@kvrouter/protocols';
import { startNats, type ServiceHandle } from '@kvrouter/testkit';
import { connectNats, type NatsConnection } from '../nats-connection.js';
import {
  InprocHub,
  InprocRequestClient,
  NatsRequestClient,
  NatsRequestServer,
  TcpRequestClient,
  TcpRequestServer,
  type RequestClient,
  type RequestServer,
  type ServerCoreOptions,
} from './index.js';

interface Plane {
  name: string;
  /** Largest message the plane carries; null = no serialisation, no limit. */
  maxBytes: number | null;
  setup(): Promise<void>;
  teardown(): Promise<void>;
  server(opts?: ServerCoreOptions): Promise<RequestServer>;
  client(): RequestClient;
  /** Connections the client holds (tcp only). */
  connections?(c: RequestClient): number;
}

let nats: ServiceHandle | null = null;
const ncs: NatsConnection[] = [];
let subjectSeq = 0;

const planes: Plane[] = [
  {
    name: 'tcp',
    maxBytes: 32 * 1024 * 1024,
    setup: async () => undefined,
    teardown: async () => undefined,
    server: (o) => TcpRequestServer.listen({ ...o, host: '127.0.0.1', port: 0 }),
    client: () => new TcpRequestClient(),
    connections: (c) => (c as TcpRequestClient).connectionCount(),
  },
  (() => {
    let sNc: NatsConnection;
    let cNc: NatsConnection;
    return {
      name: 'nats',
      maxBytes: 16 * 1024 * 1024,
      setup: async () => {
        nats ??= await startNats({ jetstream: false });
        // Server and client on separate connections, as in two processes.
        sNc = await connectNats(nats.url, { name: 'test-server' });
        cNc = await connectNats(nats.url, { name: 'test-client' });
        ncs.push(sNc, cNc);
      },
      teardown: async () => undefined,
      server: (o) =>
        NatsRequestServer.start(sNc, { ...o, subject: `kvr.test.rpc.${++subjectSeq}`, heartbeatMs: 100 }),
      client: () => new NatsRequestClient(cNc, { livenessMs: 2000 }),
    };
  })(),
  (() => {
    let hub = new InprocHub();
    return {
      name: 'inproc',
      maxBytes: null,
      setup: async () => {
        hub = new InprocHub();
      },
      teardown: async () => undefined,
      server: async (o) => hub.listen(o),
      client: () => new InprocRequestClient(hub),
    };
  })(),
];

afterAll(async () => {
  await Promise.all(ncs.map((nc) => nc.close()));
  await nats?.stop();
});

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, rej) => {
        timer = setTimeout(() => rej(new Error(`${what}: not within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Collects a stream; returns the items and the error code it ended with (null = clean end). */
async function drain<T>(it: AsyncIterable<T>): Promise<{ items: T[]; code: string | null; err?: KvrError }> {
  const items: T[] = [];
  try {
    for await (const x of it) items.push(x);
    return { items, code: null };
  } catch (e) {
    if (!(e instanceof KvrError)) throw e;
    return { items, code: e.code, err: e };
  }
}

function syncCode(f: () => unknown): { code?: string; field?: unknown } {
  try {
    f();
  } catch (e) {
    if (e instanceof KvrError) return { code: e.code, field: e.detail?.field };
    throw e;
  }
  return {};
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/** Resolves when `signal` aborts. */
const aborted = (signal: AbortSignal): Promise<void> =>
  new Promise((r) => (signal.aborted ? r() : signal.addEventListener('abort', () => r(), { once: true })));

describe.each(planes)('request plane conformance: $name', (plane) => {
  const servers: RequestServer[] = [];
  const clients: RequestClient[] = [];
  const server = async (o?: ServerCoreOptions): Promise<RequestServer> => {
    const s = await plane.server(o);
    servers.push(s);
    return s;
  };
  const client = (): RequestClient => {
    const c = plane.client();
    clients.push(c);
    return c;
  };

  beforeAll(() => plane.setup());
  afterAll(() => plane.teardown());
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close()));
    await Promise.all(servers.splice(0).map((s) => s.close()));
  });

  it('unary: a value tree with exact 64-bit integers, binary and nesting comes back unchanged', async () => {
    const s = await server();
    s.serve('echo', async (p: unknown) => ({ got: p, max: (1n << 64n) - 1n, neg: -5, f: 1.5 }));
    const c = client();
    const payload = {
      ids: [1, 2, 3],
      id: 7587872800778374919n,
      bin: new Uint8Array([0, 255, 7]),
      s: 'é',
      n: null,
    };
    const r = await c.unary(s.transport, 'echo', payload);
    expect(r).toEqual({ got: payload, max: 18446744073709551615n, neg: -5, f: 1.5 });
  });

  it('streaming keeps order and ends cleanly', async () => {
    const s = await server();
    s.serve('count', async function* (p: unknown) {
      const n = p as number;
      for (let i = 0; i < n; i++) {
        if (i % 100 === 0) await sleep(0);
        yield { i, token_ids: [i, i + 1] };
      }
    });
    const c = client();
    const r = await drain(c.stream<{ i: number }>(s.transport, 'count', 1000));
    expect(r.code).toBeNull();
    expect(r.items.map((x) => x.i)).toEqual(Array.from({ length: 1000 }, (_, i) => i));
    await vi.waitFor(() => expect(s.activeStreams).toBe(0), { timeout: 3000 });
  });

  it('200 concurrent streams on one connection, each with its own items', async () => {
    const s = await server();
    const all = deferred();
    let active = 0;
    let peak = 0;
    s.serve('conc', async function* (p: unknown) {
      const k = p as number;
      active++;
      peak = Math.max(peak, active);
      if (active === 200) all.resolve();
      // A barrier: no stream proceeds until all 200 are open at once.
      await all.promise;
      try {
        for (let i = 0; i < 5; i++) {
          await sleep(1);
          yield k * 10 + i;
        }
      } finally {
        active--;
      }
    });
    const c = client();
    const results = await within(
      Promise.all(Array.from({ length: 200 }, (_, k) => drain(c.stream<number>(s.transport, 'conc', k)))),
      20_000,
      '200 streams',
    );
    expect(peak).toBe(200);
    results.forEach((r, k) => {
      expect(r.code).toBeNull();
      expect(r.items).toEqual([0, 1, 2, 3, 4].map((i) => k * 10 + i));
    });
    if (plane.connections) expect(plane.connections(c)).toBe(1);
  });

  it('breaking out of the loop cancels: the server generator stops and its finally runs', async () => {
    const s = await server();
    const stopped = deferred();
    let produced = 0;
    s.serve('inf', async function* (_p: unknown, ctx) {
      try {
        for (;;) {
          produced++;
          yield produced;
          await sleep(5);
          if (ctx.signal.aborted) return;
        }
      } finally {
        stopped.resolve();
      }
    });
    const c = client();
    const got: number[] = [];
    for await (const x of c.stream<number>(s.transport, 'inf', null)) {
      got.push(x);
      if (got.length === 3) break;
    }
    expect(got).toEqual([1, 2, 3]);
    await within(stopped.promise, 3000, 'generator finally');
    const at = produced;
    await sleep(100);
    expect(produced).toBe(at);
    await vi.waitFor(() => expect(s.activeStreams).toBe(0), { timeout: 3000 });
  });

  it('an abort signal cancels: the caller gets `cancelled`, the handler sees its signal abort', async () => {
    const s = await server();
    const handlerAborted = deferred();
    s.serve('wait', async function* (_p: unknown, ctx) {
      yield 'first';
      await aborted(ctx.signal);
      handlerAborted.resolve();
    });
    const c = client();
    const ac = new AbortController();
    const it = c.stream<string>(s.transport, 'wait', null, { signal: ac.signal });
    expect(await it.next()).toEqual({ value: 'first', done: false });
    ac.abort();
    const r = await drain(it);
    expect(r).toMatchObject({ items: [], code: 'cancelled' });
    expect(r.err!.status).toBe(499);
    await within(handlerAborted.promise, 3000, 'handler signal');
    // An already-aborted signal never reaches the server.
    const r2 = await drain(c.stream(s.transport, 'wait', null, { signal: ac.signal }));
    expect(r2.code).toBe('cancelled');
  });

  it('a server error arrives typed, after the items before it; non-KvrErrors become `internal`', async () => {
    const s = await server();
    s.serve('fail', async function* (p: unknown) {
      yield 1;
      yield 2;
      if (p === 'kvr') throw new KvrError('resource_exhausted', 'kv cache full', 429, { field: 'x' });
      throw new Error('boom');
    });
    s.serve('failUnary', async () => {
      throw new KvrError('engine_shutdown', 'going away', 503);
    });
    const c = client();
    const a = await drain(c.stream<number>(s.transport, 'fail', 'kvr'));
    expect(a.items).toEqual([1, 2]);
    expect(a.code).toBe('resource_exhausted');
    expect(a.err!.message).toBe('kv cache full');
    expect(a.err!.status).toBe(429);
    const b = await drain(c.stream<number>(s.transport, 'fail', 'plain'));
    expect(b.items).toEqual([1, 2]);
    expect(b.code).toBe('internal');
    expect(b.err!.message).toBe('boom');
    await expect(c.unary(s.transport, 'failUnary', null)).rejects.toMatchObject({
      code: 'engine_shutdown',
      status: 503,
    });
  });

  it('peer death mid-stream fails the stream with `disconnected` after the items already received', async () => {
    const s = await server();
    s.serve('hang', async function* (_p: unknown, ctx) {
      yield 'a';
      await aborted(ctx.signal);
    });
    const c = client();
    const it = c.stream<string>(s.transport, 'hang', null);
    expect(await it.next()).toEqual({ value: 'a', done: false });
    s.abort();
    const r = await within(drain(it), 5000, 'disconnected');
    expect(r).toMatchObject({ items: [], code: 'disconnected' });
  });

  it('unknown endpoint and unknown target are typed errors', async () => {
    const s = await server();
    s.serve('x', async () => 1);
    const c = client();
    await expect(c.unary(s.transport, 'nope', null)).rejects.toMatchObject({
      code: 'unknown_endpoint',
      status: 404,
    });
    const gone = await server();
    const target = gone.transport;
    await gone.close();
    const r = await within(drain(c.stream(target, 'x', null)), 5000, 'cannot_connect');
    expect(r.code).toBe('cannot_connect');
  });

  it('oversize payloads are refused before sending; an oversize item ends the stream with payload_too_large', async () => {
    if (plane.maxBytes === null) return; // nothing is serialised in process
    const s = await server();
    s.serve('big', async (p: unknown) => new Uint8Array((p as number) + 1));
    s.serve('len', async (p: unknown) => (p as Uint8Array).length);
    const c = client();
    const huge = new Uint8Array(plane.maxBytes);
    expect(syncCode(() => c.stream(s.transport, 'len', huge))).toEqual({
      code: 'payload_too_large',
      field: 'payload',
    });
    // Just under the limit passes, in fragments where the transport needs them.
    const near = new Uint8Array(plane.maxBytes - 64);
    near[near.length - 1] = 9;
    expect(await c.unary(s.transport, 'len', near)).toBe(plane.maxBytes - 64);
    await expect(c.unary(s.transport, 'big', plane.maxBytes)).rejects.toMatchObject({
      code: 'payload_too_large',
    });
    await vi.waitFor(() => expect(s.activeStreams).toBe(0), { timeout: 3000 });
  });

  it('close(): new requests get engine_shutdown, in-flight ones finish within the grace period or get engine_shutdown', async () => {
    const s = await server();
    const release = deferred();
    s.serve('slow', async function* (p: unknown, ctx) {
      yield 'started';
      if (p === 'quick') await release.promise;
      else await aborted(ctx.signal);
      yield 'done';
    });
    const c = client();
    const quick = c.stream<string>(s.transport, 'slow', 'quick');
    const stuck = c.stream<string>(s.transport, 'slow', 'stuck');
    expect((await quick.next()).value).toBe('started');
    expect((await stuck.next()).value).toBe('started');
    const closing = s.close({ graceMs: 300 });
    release.resolve();
    const q = await drain(quick);
    const st = await drain(stuck);
    await closing;
    expect(q).toMatchObject({ items: ['done'], code: null });
    expect(st).toMatchObject({ items: [], code: 'engine_shutdown' });
  });

  it('maxConcurrentStreams: the request over the limit gets resource_exhausted', async () => {
    const s = await server({ maxConcurrentStreams: 2 });
    const release = deferred();
    s.serve('hold', async function* () {
      yield 'in';
      await release.promise;
    });
    const c = client();
    const a = c.stream(s.transport, 'hold', null);
    const b = c.stream(s.transport, 'hold', null);
    await a.next();
    await b.next();
    const r = await drain(c.stream(s.transport, 'hold', null));
    expect(r.code).toBe('resource_exhausted');
    expect(r.err!.status).toBe(429);
    release.resolve();
    expect((await drain(a)).code).toBeNull();
    expect((await drain(b)).code).toBeNull();
  });

  it('unary times out with request_timeout and cancels the handler', async () => {
    const s = await server();
    const handlerAborted = deferred();
    s.serve('never', async (_p: unknown, ctx) => {
      await aborted(ctx.signal);
      handlerAborted.resolve();
      return 0;
    });
    const c = client();
    await expect(c.unary(s.transport, 'never', null, { timeoutMs: 100 })).rejects.toMatchObject({
      code: 'request_timeout',
    });
    await within(handlerAborted.promise, 3000, 'handler cancelled');
  });

  it('bad arguments throw invalid_argument naming the field', async () => {
    const s = await server();
    const c = client();
    expect(syncCode(() => c.stream({ http: 'http://x' }, 'e', null))).toEqual({
      code: 'invalid_argument',
      field: 'target',
    });
    expect(syncCode(() => c.stream({} as never, 'e', null))).toEqual({
      code: 'invalid_argument',
      field: 'target',
    });
    expect(syncCode(() => c.stream(s.transport, '', null))).toEqual({
      code: 'invalid_argument',
      field: 'endpoint',
    });
    expect(syncCode(() => c.stream(s.transport, 'e', null, { signal: {} as AbortSignal }))).toEqual({
      code: 'invalid_argument',
      field: 'signal',
    });
    expect(syncCode(() => s.serve('', async () => 1))).toEqual({
      code: 'invalid_argument',
      field: 'endpoint',
    });
    s.serve('dup', async () => 1);
    expect(syncCode(() => s.serve('dup', async () => 2))).toEqual({
      code: 'invalid_argument',
      field: 'endpoint',
    });
  });
});
