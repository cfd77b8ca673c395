/**
 * The concurrent index (radix-indexer/pool): apply throughput with 1, 2 and 4 writer threads
 * (median of several rounds), main-thread findMatches latency while writers ingest at half their
 * maximum rate, a wide deep query (256 workers, depth 2048), and memory per indexed (block,
 * worker) pair sampled while the index grows. Same workload shape as the `indexer` suite:
 * 64 workers, chains of 512 blocks in 16-block Stored events, the first 64 blocks of each chain
 * one of 8 shared prefixes (so ~1.04 holders per block); memory is also given without sharing.
 */
import {
  computeLocalBlockHashes,
  computeSequenceHashes,
  u64sToPairs,
  type RouterEvent,
} from '@kvrouter/protocols';
import { PoolIndexer } from '@kvrouter/radix-indexer/pool';
import { Rng } from '@kvrouter/testkit';
import { stats, type Row, type Suite } from '../harness.js';

const WORKERS = 64;
const CHAIN = 512;
const SHARED = 64;
const EVENT_BLOCKS = 16;

export function buildWorkload(chainsPerWorker: number, seed: number, extBase = 1n, shared = SHARED) {
  const rng = new Rng(seed);
  const prefixes = Array.from({ length: 8 }, () => Array.from({ length: shared }, () => rng.u64()));
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
        for (let i = s; i < s + EVENT_BLOCKS; i++)
          bl.push({ block_hash: ext++, tokens_hash: local[i]!, mm_extra_info: null });
        events.push({
          worker_id: 1000n + BigInt(w),
          storage_tier: 'device',
          event: {
            event_id: 1n,
            dp_rank: 0,
            data: { stored: { parent_hash: parent, start_position: null, blocks: bl } },
          },
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
  description:
    'concurrent index: apply throughput by writer threads, findMatches while ingesting, bytes per pair',
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
      { label: '100k', wl: small, reps: ctx.quick ? 1 : 5 },
      { label: ctx.quick ? '130k' : '1M', wl: { events, blocks }, reps: ctx.quick ? 1 : 3 },
    ];
    const spread = new Map<string, number[]>();
    let writerKind = '';
    for (const scale of scales) {
      // Rounds interleave the thread counts (1, 2, 4, 1, 2, 4, ...) so a burst of load on the
      // shared machine does not land on one configuration only; the median of each is reported.
      const samples = new Map<number, number[]>([
        [1, []],
        [2, []],
        [4, []],
      ]);
      for (let rep = 0; rep < scale.reps; rep++) {
        for (const threads of [1, 2, 4]) {
          const pool = PoolIndexer.create({
            threads,
            initialCapacity: 2 * scale.wl.blocks + 2 * warm.blocks,
            maxSlots: 64,
          });
          writerKind = pool.writerKind;
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
          samples.get(threads)!.push(scale.wl.blocks / (ms / 1000));
          ctx.progress(
            `apply ${scale.label}, round ${rep + 1}/${scale.reps}, ${threads} writer thread(s)`,
            rep * 3 + Math.log2(threads) + 1,
            scale.reps * 3,
          );
          await pool.close();
        }
      }
      for (const [threads, xs] of samples) {
        xs.sort((a, b) => a - b);
        rates.set(`${scale.label}/${threads}`, xs[Math.floor(xs.length / 2)]!);
        spread.set(`${scale.label}/${threads}`, xs);
      }
    }
    // Memory on pools that grew naturally from the default size (no pre-sizing), 2 writers,
    // sampled 16 times while filling: table and external maps grow by ~1.33x at different
    // moments, so one sample is a point in a cycle; min and max over the second half of the fill
    // bound it (the first samples are dominated by the minimum sizes of 64 per-slot maps).
    for (const mem of [
      { label: 'shared prefixes', wl: { events, blocks } },
      { label: 'no sharing', wl: buildWorkload(chainsPerWorker, 44, 1n << 46n, 0) },
    ]) {
      const pool = PoolIndexer.create({ threads: 2, maxSlots: 64 });
      const evs = mem.wl.events;
      const per: number[] = [];
      let last = { pairs: 0, table: 0, ext: 0, entries: 0 };
      for (let part = 1; part <= 16; part++) {
        for (
          let i = Math.floor(((part - 1) * evs.length) / 16);
          i < Math.floor((part * evs.length) / 16);
          i++
        )
          pool.applyEvent(evs[i]!);
        await pool.flush();
        const ext = await pool.writerBytes();
        last = { pairs: pool.totalPairs(), table: pool.bytes(), ext, entries: pool.reader.table.occupied };
        per.push((last.table + last.ext) / last.pairs);
        ctx.progress(`memory, ${mem.label}`, part, 16);
      }
      rows.push({
        name: `memory, ${(last.pairs / 1e6).toFixed(2)}M pairs, ${mem.label}, grown from default`,
        value: per[per.length - 1]!,
        unit: 'bytes/pair',
        extra: {
          'min, 2nd half of fill': Math.min(...per.slice(8)),
          'max, 2nd half of fill': Math.max(...per.slice(8)),
          'holders/block': last.pairs / last.entries,
          'table MiB': last.table / 2 ** 20,
          'table load': last.entries / pool.reader.table.capacity,
          'ext maps MiB': last.ext / 2 ** 20,
        },
      });
      await pool.close();
    }
    for (const [key, r] of rates) {
      const [label, threads] = key.split('/');
      const xs = spread.get(key)!;
      rows.push({
        name: `apply ${label} pairs, ${threads} writer thread(s), main idle`,
        value: r,
        unit: 'block-events/s',
        extra: {
          'x vs 1 thread': r / rates.get(`${label}/1`)!,
          min: xs[0]!,
          max: xs[xs.length - 1]!,
          rounds: xs.length,
          writer: writerKind,
        },
      });
    }

    // findMatches on the main thread while 2 writers ingest at half their maximum rate.
    const threads = 2;
    const pool = PoolIndexer.create({ threads, initialCapacity: capacity * 2, maxSlots: 64 });
    for (const ev of events) pool.applyEvent(ev);
    await pool.flush();
    // Ingest: other chains stored, then removed again, in a loop (both are block events), so the
    // writers stay busy for the whole run without the table growing.
    const more = buildWorkload(ctx.quick ? 2 : 8, 7, 1n << 40n);
    const ingest = [...more.events, ...more.events.map(removedOf)];
    const target = rates.get(`${scales[1]!.label}/${threads}`)! / 2; // block-events per second
    const perMs = target / 1000;
    let next = 0;
    for (const depth of [64, 512]) {
      const rng = new Rng(depth);
      const qs = Array.from({ length: 256 }, () =>
        computeSequenceHashes(u64sToPairs(rng.pick(chains).slice(0, depth))),
      );
      const lat: number[] = [];
      let applied = 0;
      const start = performance.now();
      const durationMs = ctx.quick ? 1500 : 6000;
      while (performance.now() - start < durationMs) {
        // Feed the writers to stay on the target rate, then query until the next millisecond.
        const due = ((performance.now() - start) * perMs) | 0;
        while (applied < due) {
          pool.applyEvent(ingest[next++ % ingest.length]!);
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
      await pool.flush();
      const elapsed = (performance.now() - start) / 1000;
      const s = stats(lat);
      // Three consecutive thirds of the run: a load burst on the shared machine shows as one
      // outlying third; the median of the three is the steadier figure.
      const third = Math.floor(lat.length / 3);
      const thirds = [0, 1, 2].map((k) => stats(lat.slice(k * third, (k + 1) * third)));
      const med = (xs: number[]) => xs.sort((a, b) => a - b)[1]!;
      rows.push({
        name: `findMatches depth=${depth}, 64 workers, ~1M pairs, while ingesting`,
        value: s.p99,
        unit: 'us p99',
        extra: {
          p50: s.p50,
          p99: s.p99,
          'p50 median of thirds': med(thirds.map((t) => t.p50)),
          'p99 median of thirds': med(thirds.map((t) => t.p99)),
          samples: s.n,
          'ingest block-events/s': applied / elapsed,
          'target/s': target,
        },
      });
      ctx.progress('findMatches while ingesting', depth, 512);
    }
    await pool.close();
    rows.push(await wideQuery(ctx.quick));
    return rows;
  },
};

function removedOf(ev: RouterEvent): RouterEvent {
  const st = (ev.event.data as { stored: { blocks: { block_hash: bigint }[] } }).stored;
  return {
    ...ev,
    event: { ...ev.event, data: { removed: { block_hashes: st.blocks.map((b) => b.block_hash) } } },
  } as unknown as RouterEvent;
}

/**
 * The router's widest case, idle: 256 workers, a 32k-token prompt at block size 16 (depth 2048).
 * As in the `router` suite: 16 prompt families; every worker holds a long prefix (50-100 %) of one
 * and a short one (up to 25 %) of another; queries are 3/4 of a family plus a fresh suffix.
 */
async function wideQuery(quick: boolean): Promise<Row> {
  const rng = new Rng(256);
  const workers = 256;
  const tokens = 32_768;
  const randomTokens = (n: number) => {
    const t = new Uint32Array(n);
    for (let i = 0; i < n; i++) t[i] = rng.u32() % 200_000;
    return t;
  };
  const families = Array.from({ length: 16 }, () => randomTokens(tokens));
  const familyLocal = families.map((t) => computeLocalBlockHashes(t, 16));
  const depth = familyLocal[0]!.length >> 1;
  const pool = PoolIndexer.create({ threads: 2, maxSlots: workers, initialCapacity: 1 << 18 });
  let ext = 1n;
  const store = (w: number, local: Uint32Array, n: number) => {
    const blocks = [];
    for (let i = 0; i < n; i++)
      blocks.push({
        block_hash: ext++,
        tokens_hash: (BigInt(local[2 * i + 1]!) << 32n) | BigInt(local[2 * i]!),
        mm_extra_info: null,
      });
    pool.applyEvent({
      worker_id: BigInt(1000 + w),
      storage_tier: 'device',
      event: {
        event_id: 1n,
        dp_rank: 0,
        data: { stored: { parent_hash: null, start_position: null, blocks } },
      },
    } as unknown as RouterEvent);
  };
  for (let w = 0; w < workers; w++) {
    store(w, familyLocal[w % 16]!, Math.max(1, Math.floor(depth * (0.5 + 0.5 * rng.next()))));
    store(w, familyLocal[(w * 7 + 3) % 16]!, Math.max(1, Math.floor(depth * 0.25 * rng.next())));
  }
  await pool.flush();
  const qs = Array.from({ length: 64 }, () => {
    const f = families[rng.int(0, 15)]!;
    const keep = Math.floor(tokens * 0.75);
    const q = new Uint32Array(tokens);
    q.set(f.subarray(0, keep));
    q.set(randomTokens(tokens - keep), keep);
    return computeSequenceHashes(computeLocalBlockHashes(q, 16));
  });
  const lat: number[] = [];
  const iters = quick ? 1000 : 5000;
  for (let i = -200; i < iters; i++) {
    const t0 = performance.now();
    pool.findMatchesBySeq(qs[(i + 200) & 63]!);
    if (i >= 0) lat.push((performance.now() - t0) * 1000);
  }
  await pool.close();
  const s = stats(lat);
  return {
    name: `findMatchesBySeq depth=${depth}, ${workers} workers, idle (router's widest case)`,
    value: s.p50,
    unit: 'us p50',
    extra: { p50: s.p50, p99: s.p99, samples: s.n },
  };
}
