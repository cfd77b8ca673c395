/**
 * The workload Dynamo publishes indexer numbers on, Mooncake-shaped: a synthetic trace in the
 * Mooncake format (rows {timestamp, input_length, output_length, hash_ids}; each hash id is a
 * 512-token trace block expanded to 8 engine blocks of 64 tokens), K simulated engines each with an
 * LRU cache of 16384 blocks producing Stored/Removed events into the concurrent index, and one
 * findMatches per request on the main thread. Reports achieved vs offered ops/s (ops = block
 * events + queries) and query latency percentiles, for K = 8 and 64.
 *
 * Engine block local hashes are derived from (hash id, sub-block) with XXH3 instead of hashing
 * synthesized tokens: the index sees the same hash structure (equal hash ids -> equal blocks,
 * prefix-chained), and the benchmark measures the index, not the token hasher.
 */
import { chainHashInto, xxh3_64, type RouterEvent } from '@kvrouter/protocols';
import { RadixIndexer } from '@kvrouter/radix-indexer';
import { PoolIndexer } from '@kvrouter/radix-indexer/pool';
import { Rng } from '@kvrouter/testkit';
import { stats, type Row, type Suite } from '../harness.js';

const SUB = 8; // 512-token trace block / 64-token engine block
const CACHE_BLOCKS = 16384;

interface TraceRow {
  timestamp: number;
  input_length: number;
  output_length: number;
  hash_ids: number[];
}

/** Multi-turn sessions over shared system prompts, Poisson arrivals at `rate` req/s. */
export function syntheticMooncake(n: number, rate: number, seed: number): TraceRow[] {
  const rng = new Rng(seed);
  const rows: TraceRow[] = [];
  let nextId = 1000;
  const systems = Array.from({ length: 16 }, () => Array.from({ length: rng.int(2, 6) }, () => nextId++));
  const sessions: number[][] = [];
  let t = 0;
  for (let i = 0; i < n; i++) {
    t += (-Math.log(1 - rng.next()) / rate) * 1000;
    let ids: number[];
    if (sessions.length > 0 && rng.bool(0.6)) {
      // Next turn of a live session: its history plus 1-3 new blocks.
      const s = rng.int(0, sessions.length - 1);
      ids = [...sessions[s]!];
      for (let k = rng.int(1, 3); k > 0; k--) ids.push(nextId++);
      if (ids.length > 60) sessions.splice(s, 1);
      else sessions[s] = ids;
    } else {
      ids = [...rng.pick(systems)];
      for (let k = rng.int(2, 12); k > 0; k--) ids.push(nextId++);
      sessions.push(ids);
      if (sessions.length > 400) sessions.shift();
    }
    rows.push({
      timestamp: Math.round(t),
      input_length: ids.length * 512 - rng.int(0, 511),
      output_length: rng.int(20, 400),
      hash_ids: ids,
    });
  }
  return rows;
}

/** Local hashes of the engine blocks of a row (full blocks of input_length only). */
function localHashes(row: TraceRow, cache: Map<number, Uint32Array>): Uint32Array {
  const nBlocks = Math.floor(row.input_length / 64);
  const out = new Uint32Array(2 * nBlocks);
  const buf = new Uint8Array(12);
  const dv = new DataView(buf.buffer);
  for (let b = 0; b < nBlocks; b++) {
    const id = row.hash_ids[Math.floor(b / SUB)]!;
    let subs = cache.get(id);
    if (!subs) {
      subs = new Uint32Array(2 * SUB);
      for (let j = 0; j < SUB; j++) {
        dv.setBigUint64(0, BigInt(id), true);
        dv.setUint32(8, j, true);
        const h = xxh3_64(buf, 0n);
        subs[2 * j] = Number(h & 0xffffffffn);
        subs[2 * j + 1] = Number(h >> 32n);
      }
      cache.set(id, subs);
    }
    out[2 * b] = subs[2 * (b % SUB)]!;
    out[2 * b + 1] = subs[2 * (b % SUB) + 1]!;
  }
  return out;
}

/** An engine's prefix cache: LRU over sequence hashes, emitting Stored/Removed like the mocker. */
class LruEngine {
  private readonly lru = new Map<bigint, true>(); // insertion order = recency
  private eventId = 0n;
  constructor(readonly id: bigint) {}

  serve(seq: Uint32Array, local: Uint32Array, out: RouterEvent[]): number {
    const n = seq.length >> 1;
    let parent: bigint | null = null;
    let pending: { block_hash: bigint; tokens_hash: bigint; mm_extra_info: null }[] = [];
    let pendingParent: bigint | null = null;
    let blocks = 0;
    const flush = () => {
      if (pending.length === 0) return;
      out.push(this.ev({ stored: { parent_hash: pendingParent, start_position: null, blocks: pending } }));
      blocks += pending.length;
      pending = [];
    };
    for (let i = 0; i < n; i++) {
      const h = (BigInt(seq[2 * i + 1]!) << 32n) | BigInt(seq[2 * i]!);
      if (this.lru.has(h)) {
        flush();
        this.lru.delete(h);
        this.lru.set(h, true);
      } else {
        if (this.lru.size >= CACHE_BLOCKS) {
          const victim = this.lru.keys().next().value!;
          this.lru.delete(victim);
          flush();
          out.push(this.ev({ removed: { block_hashes: [victim] } }));
          blocks++;
        }
        if (pending.length === 0) pendingParent = parent;
        pending.push({
          block_hash: h,
          tokens_hash: (BigInt(local[2 * i + 1]!) << 32n) | BigInt(local[2 * i]!),
          mm_extra_info: null,
        });
        this.lru.set(h, true);
      }
      parent = h;
    }
    flush();
    return blocks;
  }

  private ev(data: unknown): RouterEvent {
    return {
      worker_id: this.id,
      storage_tier: 'device',
      event: { event_id: ++this.eventId, dp_rank: 0, data },
    } as unknown as RouterEvent;
  }
}

type Op = { q: Uint32Array } | { ev: RouterEvent };

/**
 * Phase 1: routes the trace closed-loop on the single-threaded index (prefill-style cost: blocks
 * not cached + decayed recent load), letting the LRU engines emit their events; records the
 * interleaved stream of queries and events. Phase 2 replays that stream into the pool.
 */
function record(K: number, seqs: Uint32Array[], locals: Uint32Array[], rng: Rng) {
  const ix = new RadixIndexer({ maxSlots: 64 });
  const engines = Array.from({ length: K }, (_, i) => new LruEngine(BigInt(i + 1)));
  const load = new Float64Array(K);
  const depth = new Int32Array(K);
  const ops: Op[] = [];
  let blockEvents = 0;
  let hitBlocks = 0;
  let totalBlocks = 0;
  for (let r = 0; r < seqs.length; r++) {
    const seq = seqs[r]!;
    const n = seq.length >> 1;
    ops.push({ q: seq });
    const m = ix.matchSeq(seq);
    depth.fill(0);
    for (let i = 0; i < m.count; i++)
      depth[Number(ix.slots.workers[m.slots[i]!]!.worker_id) - 1] = m.depths[i]!;
    let best = rng.int(0, K - 1);
    let bestCost = n - depth[best]! + load[best]!;
    for (let e = 0; e < K; e++) {
      const cost = n - depth[e]! + load[e]!;
      if (cost < bestCost) {
        bestCost = cost;
        best = e;
      }
    }
    hitBlocks += depth[best]!;
    totalBlocks += n;
    for (let e = 0; e < K; e++) load[e]! *= 0.99;
    load[best]! += n - depth[best]!;
    const evs: RouterEvent[] = [];
    blockEvents += engines[best]!.serve(seq, locals[r]!, evs);
    for (const ev of evs) {
      ix.applyEvent(ev);
      ops.push({ ev });
    }
  }
  return { ops, blockEvents, hitRate: hitBlocks / totalBlocks };
}

export const suite: Suite = {
  name: 'mooncake',
  description:
    'Mooncake-shaped replay into the concurrent index: achieved vs offered ops/s, query latency (K = 8, 64)',
  async run(ctx) {
    const rows: Row[] = [];
    const n = ctx.quick ? 3000 : 20000;
    const rate = 20; // offered requests/s of the synthetic trace
    const trace = syntheticMooncake(n, rate, 5);
    const hashCache = new Map<number, Uint32Array>();
    const locals = trace.map((r) => localHashes(r, hashCache));
    const seqs = locals.map((l) => {
      const s = new Uint32Array(l.length);
      for (let i = 0; i < l.length >> 1; i++) {
        if (i === 0) {
          s[0] = l[0]!;
          s[1] = l[1]!;
        } else chainHashInto(s[2 * i - 2]!, s[2 * i - 1]!, l[2 * i]!, l[2 * i + 1]!, s, 2 * i);
      }
      return s;
    });
    const traceSecs = trace[trace.length - 1]!.timestamp / 1000;
    for (const K of [8, 64]) {
      ctx.progress(`K=${K}: routing the trace (single-threaded index)`, 0, 1);
      const { ops, blockEvents, hitRate } = record(K, seqs, locals, new Rng(K));
      ctx.progress(`K=${K}: routing the trace (single-threaded index)`, 1, 1);
      const pool = PoolIndexer.create({ threads: 2, maxSlots: 64 });
      // Warm the writer threads on the first tenth, then measure a full replay on a fresh pool
      // would cost a second pool start; instead measure the remaining nine tenths.
      const warm = Math.floor(ops.length / 10);
      for (let i = 0; i < warm; i++) {
        const op = ops[i]!;
        if ('ev' in op) pool.applyEvent(op.ev);
        else pool.matchSeq(op.q);
      }
      await pool.flush();
      const lat: number[] = [];
      let measuredOps = 0;
      let measuredBlocks = 0;
      const t0 = performance.now();
      for (let i = warm; i < ops.length; i++) {
        const op = ops[i]!;
        if ('ev' in op) {
          pool.applyEvent(op.ev);
          const d = op.ev.event.data as {
            stored?: { blocks: unknown[] };
            removed?: { block_hashes: unknown[] };
          };
          measuredBlocks += d.stored ? d.stored.blocks.length : (d.removed?.block_hashes.length ?? 0);
        } else {
          const q0 = process.hrtime.bigint();
          pool.matchSeq(op.q);
          lat.push(Number(process.hrtime.bigint() - q0) / 1000);
          measuredOps++;
        }
        if ((i & 255) === 255) await new Promise<void>((res) => setImmediate(res));
        if ((i & 8191) === 0) ctx.progress(`K=${K}: replay into the pool`, i, ops.length);
      }
      await pool.flush();
      const secs = (performance.now() - t0) / 1000;
      const total = measuredBlocks + measuredOps;
      const offered = (blockEvents + n) / traceSecs;
      const s = stats(lat);
      rows.push({
        name: `Mooncake-shaped, K=${K} engines x ${CACHE_BLOCKS} blocks, ${n} requests`,
        value: total / secs,
        unit: 'ops/s achieved',
        extra: {
          'offered ops/s': offered,
          'x offered': total / secs / offered,
          'query p50 us': s.p50,
          'query p99 us': s.p99,
          'block events': blockEvents,
          'hit rate': hitRate,
        },
      });
      await pool.close();
    }
    return rows;
  },
};
