/**
 * The concurrent index (radix-indexer/pool): apply throughput with 1, 2 and 4 writer threads,
 * main-thread findMatches latency while writers ingest at half their maximum rate, and memory per
 * indexed (block, worker) pair. Same workload shape as the `indexer` suite: 64 workers, chains of
 * 512 blocks in 16-block Stored events, the first 64 blocks of each chain shared by all workers.
 */
import { computeSequenceHashes, u64sToPairs, type RouterEvent } from '@kvrouter/protocols';
import { PoolIndexer } from '@kvrouter/radix-indexer/pool';
import { Rng } from '@kvrouter/testkit';
import { stats, type Row, type Suite } from '../harness.js';

const WORKERS = 64;
const CHAIN = 512;
const SHARED = 64;
const EVENT_BLOCKS = 16;

export function buildWorkload(chainsPerWorker: number, seed: number, extBase = 1n) {
  const rng = new Rng(seed);
  const prefixes = Array.from({ length: 8 }, () => Array.from({ length: SHARED }, () => rng.u64()));
  const events: RouterEvent[] = [];
  const chains: bigint[][] = [];
  let blocks = 0;
  let ext = extBase;
  for (let c = 0; c < chainsPerWorker; c++) {
    // Interleave workers so every writer thread gets work from the start.
    for (let w = 0; w < WORKERS; w++) {
      const local = [...prefixes[(w + c) % 8]!];
      while (local.length < CHAIN) local.push(rng.u64());
      chains.push(local);
      let parent: bigint | null = null;
      for (let s = 0; s < CHAIN; s += EVENT_BLOCKS) {
        const bl = [];
        for (let i = s; i < s + EVENT_BLOCKS; i++) bl.push({ block_hash: ext++, tokens_hash: local[i]!, mm_extra_info: null });
        events.push({
          worker_id: 1000n + BigInt(w),
          storage_tier: 'device',
          event: { event_id: 1n, dp_rank: 0, data: { stored: { parent_hash: parent, start_position: null, blocks: bl } } },
        } as unknown as RouterEvent);
        parent = bl[bl.length - 1]!.block_hash;
        blocks += bl.length;
      }
    }
  }
  return { events, blocks, chains };
}


export const suite: Suite = {
  name: 'pool',
  description: 'concurrent index: apply throughput by writer threads, findMatches while ingesting, bytes per pair',
  async run(ctx) {
    const rows: Row[] = [];
    const chainsPerWorker = ctx.quick ? 4 : 32; // 32 -> 1,048,576 (block, worker) pairs
    ctx.progress('building workload', 0, 1);
    const { events, blocks, chains } = buildWorkload(chainsPerWorker, 42);
    ctx.progress('building workload', 1, 1);
    const capacity = 2 * blocks;
    const rates = new Map<string, number>();
    // Warm-up data: other workers and content, applied and dropped before each measurement so the
    // writer threads run optimised code (a router runs for days; its first second is not the figure).
    const warm = buildWorkload(ctx.quick ? 2 : 8, 99, 1n << 50n);
    const small = buildWorkload(3, 43, 1n << 45n); // ~100k pairs: the table stays cache-friendly
    const scales = [
      { label: '100k', wl: small, reps: 3 },
      { label: ctx.quick ? '130k' : '1M', wl: { events, blocks }, reps: ctx.quick ? 1 : 2 },
    ];
    for (const scale of scales) {
      for (const threads of [1, 2, 4]) {
        const samples: number[] = [];
        for (let rep = 0; rep < scale.reps; rep++) {
          const pool = PoolIndexer.create({ threads, initialCapacity: 2 * scale.wl.blocks + 2 * warm.blocks, maxSlots: 64 });
          for (const ev of warm.events) pool.applyEvent(ev);
          await pool.flush();
          for (let w = 0; w < WORKERS; w++) pool.removeWorker(1000n + BigInt(w));
          await pool.flush();
          const t0 = performance.now();
          const evs = scale.wl.events;
          for (let i = 0; i < evs.length; i++) {
            pool.applyEvent(evs[i]!);
            // Yield now and then so dispatch overlaps with encoding, as it does in a live router.
            if ((i & 1023) === 1023) await new Promise<void>((r) => setImmediate(r));
          }
          await pool.flush();
          const ms = performance.now() - t0;
          samples.push(scale.wl.blocks / (ms / 1000));
          ctx.progress(`apply ${scale.label}, ${threads} writer thread(s)`, rep + 1, scale.reps);
          await pool.close();
        }
        samples.sort((a, b) => a - b);
        rates.set(`${scale.label}/${threads}`, samples[Math.floor(samples.length / 2)]!);
      }
    }
    // Memory on a pool that grew naturally from the default size (no pre-sizing), 2 writers.
    {
      const pool = PoolIndexer.create({ threads: 2, maxSlots: 64 });
      for (const ev of events) pool.applyEvent(ev);
      await pool.flush();
      const ext = await pool.writerBytes();
      const pairs = pool.totalPairs();
      rows.push({
        name: `memory, ${(pairs / 1e6).toFixed(2)}M pairs (64 workers), grown from default`,
        value: (pool.bytes() + ext) / pairs,
        unit: 'bytes/pair',
        extra: { 'table MiB': Math.round(pool.bytes() / 2 ** 20), 'ext maps MiB': Math.round(ext / 2 ** 20) },
      });
      await pool.close();
    }
    for (const [key, r] of rates) {
      const [label, threads] = key.split('/');
      rows.push({
        name: `apply ${label} pairs, ${threads} writer thread(s), main idle`,
        value: r,
        unit: 'block-events/s',
        extra: { 'x vs 1 thread': r / rates.get(`${label}/1`)! },
      });
    }

    // findMatches on the main thread while 2 writers ingest at half their maximum rate.
    const threads = 2;
    const pool = PoolIndexer.create({ threads, initialCapacity: capacity * 2, maxSlots: 64 });
    for (const ev of events) pool.applyEvent(ev);
    await pool.flush();
    const more = buildWorkload(ctx.quick ? 2 : 8, 7, 1n << 40n);
    const target = rates.get(`${scales[1]!.label}/${threads}`)! / 2; // block-events per second
    const perMs = target / 1000;
    for (const depth of [64, 512]) {
      const rng = new Rng(depth);
      const qs = Array.from({ length: 256 }, () => computeSequenceHashes(u64sToPairs(rng.pick(chains).slice(0, depth))));
      const lat: number[] = [];
      let next = 0;
      let applied = 0;
      const start = performance.now();
      const durationMs = ctx.quick ? 1500 : 4000;
      while (performance.now() - start < durationMs && next < more.events.length) {
        // Feed the writers to stay on the target rate, then query until the next millisecond.
        const due = ((performance.now() - start) * perMs) | 0;
        while (applied < due && next < more.events.length) {
          const ev = more.events[next++]!;
          pool.applyEvent(ev);
          applied += EVENT_BLOCKS;
        }
        await new Promise<void>((r) => setImmediate(r));
        const until = performance.now() + 1;
        let i = 0;
        while (performance.now() < until) {
          const q = qs[i++ & 255]!;
          const t0 = process.hrtime.bigint();
          pool.matchSeq(q);
          lat.push(Number(process.hrtime.bigint() - t0) / 1000);
        }
      }
      const elapsed = (performance.now() - start) / 1000;
      const s = stats(lat);
      rows.push({
        name: `findMatches depth=${depth}, 64 workers, ~1M pairs, while ingesting`,
        value: s.p99,
        unit: 'us p99',
        extra: { p50: s.p50, p99: s.p99, samples: s.n, 'ingest block-events/s': applied / elapsed, 'target/s': target },
      });
      ctx.progress('findMatches while ingesting', depth, 512);
    }
    await pool.close();
    return rows;
  },
};
