/**
 * KV events from NATS into the index: a publisher thread floods pre-encoded envelopes (msgpack
 * RouterEvents, 32-block Stored events plus Removed runs, 16 workers with contiguous ids) into a
 * real nats-server; the router side (NatsEventPlane -> KvEventSubscriber -> RadixIndexer) is timed
 * from the first event received to the last one applied. Also the two halves alone: decoding
 * (envelope + RouterEvent) and applying, so the end-to-end figure can be read against them.
 *
 * The publisher runs in a child process so it never shares the router's event loop. It keeps at
 * most WINDOW_MSGS messages ahead of what the router reports received (over IPC): the router always
 * has a backlog, so the figure is its sustained rate, and nats-server never holds so much for the
 * router's connection that it would cut it off as a slow consumer.
 */
import { fork } from 'node:child_process';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { decodeEnvelope, decodeRouterEvent, encodeRouterEvent, type RouterEvent } from '@kvrouter/protocols';
import { RadixIndexer, type KvIndexer } from '@kvrouter/radix-indexer';
import {
  EnvelopeBuilder,
  KvEventPublisher,
  KvEventSubscriber,
  NatsEventPlane,
  kvEventsTopic,
  planeSink,
  requestPlaneQueryClient,
  serveLocalIndexer,
  type RouterEventSink,
} from '@kvrouter/kv-events';
import { TcpRequestClient, TcpRequestServer, connectNats } from '@kvrouter/runtime';
import { Rng, startNats } from '@kvrouter/testkit';
import { stats, type Row, type Suite } from '../harness.js';

const WORKERS = 16;
const CHAIN = 512;
const EVENT_BLOCKS = 32;
/** Chains each worker keeps cached; older ones are evicted (Removed), so the index stays this size. */
const WINDOW = 32;
const REMOVE_BATCH = 128;
const TOPIC = kvEventsTopic('bench', 'backend');
/** Messages the publisher may run ahead of the router (~ 8 MB). */
const WINDOW_MSGS = 8192;

interface Workload {
  events: RouterEvent[];
  blockEvents: number;
  /** Blocks the index holds at the end. */
  held: number;
}

/**
 * Steady-state engine traffic per worker: chains of 512 blocks in 32-block Stored events; once
 * more than WINDOW chains are cached, the oldest is evicted in 128-hash Removed events. The index
 * levels off at 16 workers x 32 chains x 512 = 262,144 blocks, the size of a small fleet's caches.
 */
function buildWorkload(chainsPerWorker: number, seed: number): Workload {
  const rng = new Rng(seed);
  const events: RouterEvent[] = [];
  const ids = new Array<bigint>(WORKERS).fill(0n);
  const live: bigint[][][] = Array.from({ length: WORKERS }, () => []);
  let blockEvents = 0;
  let ext = 1n;
  for (let c = 0; c < chainsPerWorker; c++) {
    for (let w = 0; w < WORKERS; w++) {
      const worker = 1000n + BigInt(w);
      let parent: bigint | null = null;
      const chain: bigint[] = [];
      for (let s = 0; s < CHAIN; s += EVENT_BLOCKS) {
        const blocks = [];
        for (let i = 0; i < EVENT_BLOCKS; i++)
          blocks.push({ block_hash: ext++, tokens_hash: rng.u64(), mm_extra_info: null });
        events.push(
          ev(worker, (ids[w] += 1n), { stored: { parent_hash: parent, start_position: null, blocks } }),
        );
        parent = blocks[blocks.length - 1].block_hash;
        for (const b of blocks) chain.push(b.block_hash);
        blockEvents += EVENT_BLOCKS;
      }
      live[w].push(chain);
      if (live[w].length > WINDOW) {
        const old = live[w].shift()!;
        for (let s = 0; s < old.length; s += REMOVE_BATCH) {
          events.push(
            ev(worker, (ids[w] += 1n), { removed: { block_hashes: old.slice(s, s + REMOVE_BATCH) } }),
          );
          blockEvents += Math.min(REMOVE_BATCH, old.length - s);
        }
      }
    }
  }
  return { events, blockEvents, held: WORKERS * Math.min(WINDOW, chainsPerWorker) * CHAIN };
}

function ev(worker: bigint, id: bigint, data: unknown): RouterEvent {
  return {
    worker_id: worker,
    storage_tier: 'device',
    event: { event_id: id, dp_rank: 0, data },
  } as unknown as RouterEvent;
}

// ---- publisher process ---------------------------------------------------------------------------

const CHILD_ENV = 'KVR_KV_EVENTS_BENCH_PUBLISHER';

async function publisherProcess(): Promise<void> {
  const { url, chainsPerWorker } = JSON.parse(process.env[CHILD_ENV]!) as {
    url: string;
    chainsPerWorker: number;
  };
  const { events } = buildWorkload(chainsPerWorker, 11);
  const env = new EnvelopeBuilder({ publisherId: 1n });
  const frames = events.map((e) => env.encode(TOPIC.subject, encodeRouterEvent(e)));
  const nc = await connectNats(url);
  let received = 0;
  let wake: (() => void) | null = null;
  process.on('message', (m: { received?: number }) => {
    if (typeof m.received === 'number') received = m.received;
    wake?.();
    wake = null;
  });
  process.send!({ ready: frames.length, bytes: frames.reduce((n, f) => n + f.length, 0) });
  await new Promise<void>((r) => (wake = r));
  for (let i = 0; i < frames.length; i++) {
    while (i - received > WINDOW_MSGS) await new Promise<void>((r) => (wake = r));
    nc.publish(TOPIC.subject, frames[i]);
    if ((i & 1023) === 1023) await nc.flush();
  }
  await nc.flush();
  await nc.close();
  process.exit(0);
}

if (process.env[CHILD_ENV] && process.send) void publisherProcess();

// ---- suite ---------------------------------------------------------------------------------------

type AnyIndexer = Pick<
  KvIndexer,
  'applyEvent' | 'removeWorker' | 'removeWorkerDpRank' | 'flush' | 'treeSizes' | 'close'
>;

/** One end-to-end run: a fresh publisher process floods nats-server; the router is timed from first event to last applied. */
async function endToEnd(
  url: string,
  chainsPerWorker: number,
  wl: Workload,
  index: AnyIndexer,
  progress: (done: number, total: number) => void,
): Promise<{ rate: number; extra: Record<string, number | string> }> {
  const nc = await connectNats(url);
  const plane = new NatsEventPlane({ publisherId: 2n, nc });
  // No query client: the publisher process has no local indexer to recover from, and this measures
  // the live path (envelope + RouterEvent decode, cursor check, apply) a healthy router runs.
  const sub = new KvEventSubscriber({ index, query: null });
  sub.start(() => plane.subscribe(TOPIC, { onDecodeFailure: (e) => sub.decodeFailure(e) }));
  await nc.flush();
  const child = fork(fileURLToPath(import.meta.url), [], {
    env: { ...process.env, [CHILD_ENV]: JSON.stringify({ url, chainsPerWorker }) },
    execArgv: import.meta.url.endsWith('.ts') ? ['--conditions=source', '--import', 'tsx'] : [],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = new Promise((r) => child.once('exit', r));
  const ready = await new Promise<{ ready: number; bytes: number }>((r) =>
    child.once('message', (m) => r(m as never)),
  );
  child.send({ received: 0 });
  let t0 = 0;
  const total = wl.events.length;
  await new Promise<void>((resolve, reject) => {
    const deadline = performance.now() + 180_000;
    const poll = () => {
      const st = sub.stats;
      if (t0 === 0 && st.received > 0) t0 = performance.now();
      if (st.received + st.decodeFailures >= total) return resolve();
      if (performance.now() > deadline)
        return reject(new Error(`kv-events bench: ${st.received}/${total} events after 180 s`));
      progress(st.received, total);
      if (child.connected) child.send({ received: st.received }, () => undefined);
      setTimeout(poll, 2);
    };
    poll();
  });
  await index.flush();
  const s = (performance.now() - t0) / 1000;
  const st = sub.stats;
  const held = [...index.treeSizes().values()].reduce((a, b) => a + b, 0);
  if (held !== wl.held)
    throw new Error(
      `kv-events bench: index holds ${held} blocks, expected ${wl.held} (${JSON.stringify(st)})`,
    );
  await exited;
  await sub.close();
  await plane.close();
  await nc.close();
  return {
    rate: wl.blockEvents / s,
    extra: {
      'msgs/s': Math.round(st.received / s),
      gaps: st.gaps,
      stale: st.stale,
      decodeFailures: st.decodeFailures,
      MB: Math.round(ready.bytes / 2 ** 20),
      'index blocks': held,
    },
  };
}

/**
 * Time to reconverge after a gap: one worker publishes over NATS, its local indexer is queried over
 * the tcp request plane. Each round loses `lost` events, then publishes one more; the clock runs
 * from that publish until the router's cursor has caught up (gap seen, query, reply applied).
 */
async function recoveryLatency(
  url: string,
  rounds: number,
  lost: number,
  blocksPerEvent: number,
): Promise<{ ms: number[]; treeBlocks: number }> {
  const ncW = await connectNats(url);
  const ncR = await connectNats(url);
  const server = await TcpRequestServer.listen({ host: '127.0.0.1' });
  const client = new TcpRequestClient();
  let drop = false;
  const inner = planeSink(new NatsEventPlane({ publisherId: 77n, nc: ncW }), TOPIC);
  const sink: RouterEventSink = { publishEvent: (e) => (drop ? undefined : inner.publishEvent(e)) };
  const pub = new KvEventPublisher({ workerId: 77n, sink });
  serveLocalIndexer(server, pub);
  const index = new RadixIndexer({ maxSlots: 32 });
  const plane = new NatsEventPlane({ publisherId: 78n, nc: ncR });
  const sub = new KvEventSubscriber({
    index,
    query: requestPlaneQueryClient(client, { resolve: () => server.transport }),
  });
  sub.start(() => plane.subscribe(TOPIC));
  sub.addWorker(77n);
  const rng = new Rng(5);
  let parent: bigint | null = null;
  let ext = 1n;
  // Chains of 64 blocks: the tree grows by `blocksPerEvent` per event, restarting every 64 blocks.
  const next = () => {
    const blocks = [];
    for (let i = 0; i < blocksPerEvent; i++)
      blocks.push({ block_hash: ext++ as never, tokens_hash: rng.u64() as never, mm_extra_info: null });
    pub.engineEvent({ data: { stored: { parent_hash: parent as never, start_position: null, blocks } } });
    parent = ext % 64n < BigInt(blocksPerEvent) ? null : blocks[blocks.length - 1].block_hash;
  };
  const caughtUp = async () => {
    while (sub.cursor(77n)?.last !== pub.lastEventId(0) || sub.pendingRecoveries > 0)
      await new Promise<void>((r) => setImmediate(r));
  };
  await new Promise((r) => setTimeout(r, 150));
  next();
  await caughtUp();
  const ms: number[] = [];
  for (let r = 0; r < rounds; r++) {
    drop = true;
    for (let i = 0; i < lost; i++) next();
    drop = false;
    const t0 = performance.now();
    next();
    await caughtUp();
    ms.push(performance.now() - t0);
  }
  const treeBlocks = [...index.treeSizes().values()].reduce((a, b) => a + b, 0);
  await sub.close();
  await plane.close();
  await client.close();
  await server.close();
  await ncW.close();
  await ncR.close();
  return { ms, treeBlocks };
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

export const suite: Suite = {
  name: 'kv-events',
  description:
    'KV events from nats-server into the index: block-events/s sustained, and the decode/apply halves',
  async run(ctx) {
    const rows: Row[] = [];
    const chainsPerWorker = ctx.quick ? 48 : 128;
    ctx.progress('building workload', 0, 1);
    const wl = buildWorkload(chainsPerWorker, 11);
    ctx.progress('building workload', 1, 1);
    const env = new EnvelopeBuilder({ publisherId: 1n });
    const frames = wl.events.map((e) => env.encode(TOPIC.subject, encodeRouterEvent(e)));
    // A router that has run a while has a table sized for its fleet's caches and does not grow any
    // more; growth (a full rehash each doubling) would otherwise dominate a run this short.
    const steadyCapacity = 2 * wl.held;

    // The halves alone, second of two passes (the first warms the JIT, as a running router is).
    let decodeRate = 0;
    let applyRate = 0;
    for (let pass = 0; pass < 2; pass++) {
      let t0 = performance.now();
      for (const f of frames) decodeRouterEvent(decodeEnvelope(f).payload);
      decodeRate = wl.blockEvents / ((performance.now() - t0) / 1000);
      const index = new RadixIndexer({ maxSlots: 32, initialCapacity: steadyCapacity });
      t0 = performance.now();
      for (const e of wl.events) index.applyEvent(e);
      applyRate = wl.blockEvents / ((performance.now() - t0) / 1000);
      ctx.progress('decode and apply alone', pass + 1, 2);
    }
    rows.push({
      name: 'decode only (envelope + RouterEvent msgpack)',
      value: decodeRate,
      unit: 'block-events/s',
      extra: { 'msgs/s': Math.round((decodeRate / wl.blockEvents) * frames.length) },
    });
    rows.push({
      name: 'apply only (RadixIndexer at its steady-state size)',
      value: applyRate,
      unit: 'block-events/s',
    });

    const nats = await startNats({ jetstream: false });
    try {
      const reps = ctx.quick ? 1 : 3;
      // The pool (`--router-event-threads` > 1) is left out: at the time of writing its flush()
      // resolves before every submitted event is applied, so the end of a run cannot be timed.
      const variants: Array<[string, () => AnyIndexer]> = [
        ['RadixIndexer', () => new RadixIndexer({ maxSlots: 32, initialCapacity: steadyCapacity })],
      ];
      for (const [label, make] of variants) {
        const rates: number[] = [];
        let extra: Record<string, number | string> = {};
        for (let rep = 0; rep < reps; rep++) {
          const index = make();
          try {
            const r = await endToEnd(nats.url, chainsPerWorker, wl, index, (d, t) =>
              ctx.progress(`nats -> ${label}, rep ${rep + 1}`, d, t),
            );
            rates.push(r.rate);
            extra = r.extra;
          } finally {
            await index.close();
          }
        }
        const rate = median(rates);
        rows.push({
          name: `nats-server -> NatsEventPlane -> KvEventSubscriber -> ${label} (${WORKERS} workers, ${EVENT_BLOCKS}-block Stored, ${REMOVE_BATCH}-hash Removed)`,
          value: rate,
          unit: 'block-events/s',
          extra: {
            ...extra,
            'target 500k': rate >= 500_000 ? 'met' : 'missed',
            'load avg': Number(loadavg()[0].toFixed(1)),
          },
        });
      }
      for (const [label, lost, rounds] of [
        ['gap inside the ring -> Events', 1, ctx.quick ? 50 : 200],
        ['gap past the 1024-event ring -> TreeDump', 1100, ctx.quick ? 5 : 20],
      ] as const) {
        const r = await recoveryLatency(nats.url, rounds, lost, 4);
        const st = stats(r.ms);
        rows.push({
          name: `reconverge after a ${label} (tcp query, NATS live path)`,
          value: st.p50,
          unit: 'ms p50',
          extra: {
            p90: Number(st.p90.toFixed(2)),
            max: Number(st.max.toFixed(2)),
            rounds,
            'tree blocks': r.treeBlocks,
          },
        });
        ctx.progress('recovery latency', rounds, rounds);
      }
    } finally {
      await nats.stop();
    }
    return rows;
  },
};
