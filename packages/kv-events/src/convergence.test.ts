/**
 * End to end under faults (real nats-server, tcp request plane): SimEngine workers publish through
 * KvEventPublisher -> NATS core -> KvEventSubscriber -> RadixIndexer. During the fault phase every
 * k-th event is dropped, some are duplicated or swapped with their successor, and nats-server is
 * killed and restarted on the same port. After the fault ends, the router's index must hold exactly
 * the blocks each engine has cached (compared block by block through a dump) within 2 s.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeEnvelope, type RouterEvent } from '@kvrouter/protocols';
import { RadixIndexer } from '@kvrouter/radix-indexer';
import { SimEngine } from '@kvrouter/engine-sim';
import {
  TcpRequestClient,
  TcpRequestServer,
  connectNats,
  type NatsConnection,
  type Transport,
} from '@kvrouter/runtime';
import { Rng, startNats, type ServiceHandle } from '@kvrouter/testkit';
import { NatsEventPlane } from './plane/nats.js';
import { kvEventsTopic } from './plane/types.js';
import { KvEventPublisher, planeSink, type RouterEventSink } from './publisher/publisher.js';
import { requestPlaneQueryClient, serveLocalIndexer } from './query.js';
import { KvEventSubscriber } from './subscriber/subscriber.js';

const TOPIC = kvEventsTopic('conv', 'backend');
const BS = 16;

/** Drops every `dropEvery`-th event, duplicates every `dupEvery`-th, swaps every `swapEvery`-th with the next. */
class FaultySink implements RouterEventSink {
  faults = false;
  private n = 0;
  private held: RouterEvent | null = null;
  readonly injected = { dropped: 0, duplicated: 0, swapped: 0 };

  constructor(
    private readonly inner: RouterEventSink,
    private readonly dropEvery: number,
    private readonly dupEvery: number,
    private readonly swapEvery: number,
  ) {}

  publishEvent(ev: RouterEvent): void {
    if (!this.faults) {
      this.release();
      this.inner.publishEvent(ev);
      return;
    }
    this.n++;
    if (this.n % this.dropEvery === 0) {
      this.injected.dropped++;
      return;
    }
    if (this.held === null && this.n % this.swapEvery === 0) {
      this.held = ev;
      this.injected.swapped++;
      return;
    }
    this.inner.publishEvent(ev);
    if (this.n % this.dupEvery === 0) {
      this.inner.publishEvent(ev);
      this.injected.duplicated++;
    }
    this.release();
  }

  release(): void {
    const h = this.held;
    this.held = null;
    if (h) this.inner.publishEvent(h);
  }

  flush(): Promise<void> {
    return this.inner.flush?.() ?? Promise.resolve();
  }
}

class SimWorker {
  readonly eng = new SimEngine({ numGpuBlocks: 96, blockSize: BS, maxNumSeqs: 8, maxNumBatchedTokens: 1024 });
  readonly sink: FaultySink;
  readonly pub: KvEventPublisher;
  private now = 0;
  private rid = 0;

  constructor(
    readonly id: bigint,
    plane: NatsEventPlane,
  ) {
    this.sink = new FaultySink(planeSink(plane, TOPIC), 5, 7, 11);
    this.pub = new KvEventPublisher({ workerId: id, sink: this.sink });
  }

  /** Serves a batch of prompts to completion, publishing every KV event the engine emits. */
  run(prompts: Uint32Array[]): void {
    for (const p of prompts) this.eng.enqueue({ id: `r${this.rid++}`, tokenIds: p, maxTokens: 6 }, this.now);
    while (this.eng.hasWork(0)) {
      const r = this.eng.step(this.now, 0);
      this.now += r.durationMs;
      for (const ev of r.kvEvents) this.pub.engineEvent({ dp_rank: ev.dp_rank, data: ev.data }, ev.event_id);
    }
  }
}

function prompts(rng: Rng, prefixes: Uint32Array[], n: number): Uint32Array[] {
  const out: Uint32Array[] = [];
  for (let i = 0; i < n; i++) {
    const pre = rng.pick(prefixes);
    const p = new Uint32Array(pre.length + rng.int(8, 72));
    p.set(pre);
    for (let j = pre.length; j < p.length; j++) p[j] = rng.int(1, 31999);
    out.push(p);
  }
  return out;
}

describe('convergence under faults (nats-server)', () => {
  let nats: ServiceHandle;
  const conns: NatsConnection[] = [];
  const servers: TcpRequestServer[] = [];
  let client: TcpRequestClient;

  beforeAll(async () => {
    nats = await startNats({ jetstream: false });
  });
  afterAll(async () => {
    for (const c of conns) await c.close().catch(() => undefined);
    for (const s of servers) await s.close();
    await client?.close();
    await nats?.stop();
  });

  it("reconverges to the engines' cached blocks within 2 s after drops, duplicates, reordering and a NATS restart", async () => {
    const rng = new Rng(20240611);
    const prefixes = Array.from({ length: 6 }, () =>
      Uint32Array.from({ length: 3 * BS }, () => rng.int(1, 31999)),
    );
    const connect = async () => {
      const c = await connectNats(nats.url, { reconnectWaitMs: 50 });
      conns.push(c);
      return c;
    };
    const ncRouter = await connect();
    const ncWorkers = await connect();

    // Workers: one plane each on a shared connection, local indexer served over tcp.
    const transports = new Map<bigint, Transport>();
    const workers: SimWorker[] = [];
    for (const id of [0x1001n, 0x1002n, 0x1003n]) {
      const w = new SimWorker(id, new NatsEventPlane({ publisherId: id, nc: ncWorkers }));
      const server = await TcpRequestServer.listen({ host: '127.0.0.1' });
      servers.push(server);
      serveLocalIndexer(server, w.pub);
      transports.set(id, server.transport);
      workers.push(w);
    }

    // Router.
    client = new TcpRequestClient();
    const index = new RadixIndexer();
    const decodeFailures: string[] = [];
    const recoveries: number[] = [];
    const routerPlane = new NatsEventPlane({ publisherId: 0x9999n, nc: ncRouter });
    const sub = new KvEventSubscriber({
      index,
      query: requestPlaneQueryClient(client, { resolve: (w) => transports.get(w.worker_id) ?? null }),
      onDecodeFailure: (e) => decodeFailures.push(e.message),
      onRecovery: (r) => recoveries.push(r.durationMs),
    });
    sub.start(() => routerPlane.subscribe(TOPIC, { onDecodeFailure: (e) => sub.decodeFailure(e) }));
    for (const w of workers) sub.addWorker(w.id);

    const mismatch = async (): Promise<string | null> => {
      const dump = await index.dump();
      for (const w of workers) {
        const got = new Set<bigint>();
        for (const e of dump)
          if (e.worker_id === w.id && e.event.data !== 'cleared' && 'stored' in e.event.data)
            for (const b of e.event.data.stored.blocks) got.add(b.block_hash);
        const want = w.eng.cachedBlocks(0);
        const missing = [...want].filter((h) => !got.has(h)).length;
        const extra = [...got].filter((h) => !want.has(h)).length;
        if (missing || extra) return `worker ${w.id}: ${missing} missing, ${extra} extra of ${want.size}`;
      }
      return null;
    };
    const settle = async (limitMs: number): Promise<number> => {
      const t0 = performance.now();
      let last: string | null = 'never checked';
      while (performance.now() - t0 < limitMs) {
        last = await mismatch();
        if (last === null) return performance.now() - t0;
        await new Promise((r) => setTimeout(r, 10));
      }
      throw new Error(`no convergence within ${limitMs} ms: ${last}`);
    };

    // Phase A: clean warm-up.
    await new Promise((r) => setTimeout(r, 150));
    for (let b = 0; b < 4; b++) for (const w of workers) w.run(prompts(rng, prefixes, 5));
    await settle(5000);
    // The publisher's own index agrees with its engine too (batching/dedup/local indexer).
    for (const w of workers) {
      const local = new Set(
        w.pub
          .localIndexer(0)!
          .dump()
          .map(
            (e) =>
              (e.event.data as { stored: { blocks: { block_hash: bigint }[] } }).stored.blocks[0].block_hash,
          ),
      );
      expect(local).toEqual(w.eng.cachedBlocks(0));
    }

    // Phase B: faults, with nats-server killed and restarted half way.
    for (const w of workers) w.sink.faults = true;
    for (let b = 0; b < 6; b++) {
      for (const w of workers) w.run(prompts(rng, prefixes, 5));
      if (b === 2) {
        await nats.stop();
        for (const w of workers) w.run(prompts(rng, prefixes, 5)); // published while the server is down
        nats = await startNats({ port: nats.port, jetstream: false });
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    // The fault ends once injection stops and both connections are back.
    for (const w of workers) {
      w.sink.faults = false;
      w.sink.release();
    }
    await connected(ncWorkers);
    await connected(ncRouter);
    const injected = workers.map((w) => w.sink.injected);
    expect(injected.every((i) => i.dropped > 0 && i.duplicated > 0 && i.swapped > 0)).toBe(true);
    // The faults were seen (duplicates show up as stale, or as held back when they hit a recovery).
    expect(sub.stats.gaps).toBeGreaterThan(0);

    // Malformed traffic on the live subject: counted, dropped, the loop goes on.
    ncRouter.publish(TOPIC.subject, new Uint8Array([0xc1, 0x00]));
    ncRouter.publish(
      TOPIC.subject,
      encodeEnvelope({
        publisher_id: 1n,
        sequence: 1n,
        published_at: 0,
        topic: TOPIC.subject,
        payload: new Uint8Array([0x80]),
      }),
    );

    // Phase C: clean traffic reveals the remaining gaps; time from the end of the fault.
    const tEnd = performance.now();
    for (const w of workers) w.run(prompts(rng, prefixes, 3));
    await settle(2000);
    const reconvergeMs = performance.now() - tEnd;
    const s = sub.stats;
    console.log(
      `[kv-events convergence] reconverged ${reconvergeMs.toFixed(0)} ms after the fault ended; ` +
        `injected ${JSON.stringify(injected)}; gaps ${s.gaps}, stale ${s.stale}, recoveries ${s.recoveries} ` +
        `(events ${s.recoveredByEvents}, dumps ${s.recoveredByDump}), recovery p50 ${median(recoveries).toFixed(1)} ms`,
    );
    expect(reconvergeMs).toBeLessThan(2000);
    expect(s.stale + s.heldBack).toBeGreaterThan(0);
    expect(s.decodeFailures).toBe(2);
    expect(decodeFailures.length).toBe(2);
    await sub.close();
  });
});

/** Resolves once a round trip succeeds (a flush sent on the dead socket fails; the next one waits for the reconnect). */
async function connected(nc: NatsConnection): Promise<void> {
  for (let i = 0; i < 200; i++) {
    try {
      await nc.flush();
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 25));
    }
  }
  throw new Error('NATS did not reconnect within 5 s');
}

function median(xs: number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}
