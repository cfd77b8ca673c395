import { localBlockHashes, sequenceHashOf, sequenceHashes } from '@kvrouter/protocols';
import { Rng } from '@kvrouter/testkit';
import { describe, expect, it } from 'vitest';
import type { EngineConfig } from './config.js';
import { SimEngine } from './engine.js';
import type { EngineKvEvent } from './types.js';

/**
 * Minimal stand-in for the router's index: the set of sequence hashes a rank holds, with parent links.
 * It rejects what a correct engine never sends: a Stored whose parent is not held, a block stored twice,
 * a block_hash that is not the §2.2 chain of its parent and tokens_hash, a Removed of an unknown block
 * or of a block that still has held children (eviction must go leaves first).
 */
class RefIndex {
  private readonly held = new Map<bigint, { parent: bigint | null; children: number }>();
  private lastId = 0;

  apply(e: EngineKvEvent): void {
    if (e.event_id !== this.lastId + 1) throw new Error(`event id ${e.event_id} after ${this.lastId}`);
    this.lastId = e.event_id;
    if ('stored' in e.data) {
      let parent = e.data.stored.parent_hash;
      if (parent !== null && !this.held.has(parent)) throw new Error(`stored under missing parent ${parent}`);
      for (const b of e.data.stored.blocks) {
        const want = parent === null ? b.tokens_hash : sequenceHashOf(parent, b.tokens_hash);
        if (b.block_hash !== want)
          throw new Error(`block ${b.block_hash} is not the chain hash of its parent`);
        if (this.held.has(b.block_hash)) throw new Error(`block ${b.block_hash} stored twice`);
        this.held.set(b.block_hash, { parent, children: 0 });
        if (parent !== null) this.held.get(parent)!.children++;
        parent = b.block_hash;
      }
    } else {
      for (const h of e.data.removed.block_hashes) {
        const node = this.held.get(h);
        if (node === undefined) throw new Error(`removed unknown block ${h}`);
        if (node.children !== 0) throw new Error(`removed block ${h} with ${node.children} held children`);
        if (node.parent !== null) this.held.get(node.parent)!.children--;
        this.held.delete(h);
      }
    }
  }

  keys(): Set<bigint> {
    return new Set(this.held.keys());
  }
}

interface Live {
  prompt: Uint32Array;
  maxTokens: number;
  out: number[];
  rank: number;
  first: boolean;
  done: boolean;
}

function workload(partial: Partial<EngineConfig>, seed: number, ticks: number) {
  const eng = new SimEngine(partial);
  const cfg = eng.config;
  const rng = new Rng(seed);
  const dp = cfg.dataParallelSize;
  const refs = Array.from({ length: dp }, () => new RefIndex());
  const live = new Map<string, Live>();
  const all: Live[] = [];
  const storedSeen = new Set<bigint>();
  // A few shared prefixes so requests hit each other's blocks; tails are unique.
  const unit = Math.max(cfg.blockSize, 4);
  const prefixes = Array.from({ length: 4 }, (_, k) =>
    Uint32Array.from({ length: rng.int(0, 3 * unit) }, (_, i) => 1 + k * 1000 + i),
  );
  let nextId = 0;
  let tail = 100000;
  let now = 0;
  const maxKv = cfg.numGpuBlocks * cfg.blockSize;

  const check = (rank: number): void => {
    expect(eng.ranks[rank].audit()).toEqual([]);
    expect(refs[rank].keys()).toEqual(eng.cachedBlocks(rank));
  };

  const stepAll = (): void => {
    for (let rank = 0; rank < dp; rank++) {
      if (!eng.hasWork(rank)) continue;
      const r = eng.step(now, rank);
      expect(r.idle).toBe(false);
      expect(r.durationMs).toBeGreaterThan(0);
      for (const e of r.kvEvents) {
        expect(e.dp_rank).toBe(rank);
        refs[rank].apply(e);
        if ('stored' in e.data) for (const b of e.data.stored.blocks) storedSeen.add(b.block_hash);
      }
      for (const t of r.emitted) {
        const q = live.get(t.requestId)!;
        expect(q.done).toBe(false);
        expect(t.cachedTokens !== undefined).toBe(!q.first);
        if (!q.first) {
          // SGLang's radix cache hits at token granularity.
          if (cfg.engineType === 'vllm') expect(t.cachedTokens! % cfg.blockSize).toBe(0);
          expect(t.cachedTokens!).toBeLessThan(q.prompt.length);
        }
        q.first = true;
        q.out.push(...t.tokenIds);
        if (t.finishReason === 'length') {
          q.done = true;
          live.delete(t.requestId);
        }
        expect(q.out.length === q.maxTokens).toBe(q.done);
      }
      check(rank);
    }
  };

  for (let tick = 0; tick < ticks; tick++) {
    now += rng.int(0, 30);
    for (let k = rng.int(0, 2); k > 0; k--) {
      // Some requests repeat an earlier prompt verbatim (retries, identical calls).
      if (all.length > 0 && rng.bool(0.2)) {
        const prev = rng.pick(all);
        const q: Live = { ...prev, out: [], rank: rng.int(0, dp - 1), first: false, done: false };
        const id = `r${nextId++}`;
        eng.enqueue({ id, tokenIds: q.prompt, maxTokens: q.maxTokens, dpRank: q.rank }, now);
        live.set(id, q);
        all.push(q);
        continue;
      }
      const pre = rng.pick(prefixes);
      // Prompts stay under half the pool so every request can run alone.
      const n = Math.max(0, Math.min(rng.int(0, 3 * unit), (maxKv >> 1) - pre.length - 1));
      const prompt = new Uint32Array(pre.length + n + 1);
      prompt.set(pre);
      for (let i = pre.length; i < prompt.length; i++) prompt[i] = tail++;
      const maxTokens = Math.max(1, Math.min(rng.int(1, 3 * unit), maxKv - prompt.length));
      const q: Live = { prompt, maxTokens, out: [], rank: rng.int(0, dp - 1), first: false, done: false };
      const id = `r${nextId++}`;
      eng.enqueue({ id, tokenIds: prompt, maxTokens, dpRank: q.rank }, now);
      live.set(id, q);
      all.push(q);
    }
    if (live.size > 0 && rng.bool(0.05)) {
      const id = rng.pick([...live.keys()]);
      expect(eng.cancel(id)).toBe(true);
      live.get(id)!.done = true;
      live.delete(id);
      for (let rank = 0; rank < dp; rank++) check(rank);
    }
    stepAll();
  }
  // Drain: everything finishes (liveness) and every block returns (no leak).
  for (let guard = 0; live.size > 0; guard++) {
    expect(guard).toBeLessThan(20000);
    now += 10;
    stepAll();
  }
  for (let rank = 0; rank < dp; rank++) {
    const pools = eng.ranks[rank].pools();
    expect(pools.active).toBe(0);
    // vLLM pools count blocks, SGLang's count tokens.
    expect(pools.inactive + pools.free).toBe(
      cfg.numGpuBlocks * (cfg.engineType === 'sglang' ? cfg.blockSize : 1),
    );
    expect(eng.load(rank).kv_used_blocks).toBe(0);
    check(rank);
  }
  // Every stored hash is the sequence hash of some request's real content (prompt + generated tokens).
  if (cfg.enablePrefixCaching) {
    const real = new Set<bigint>();
    for (const q of all) {
      const seq = Uint32Array.from([...q.prompt, ...q.out]);
      for (const h of sequenceHashes(localBlockHashes(seq, cfg.blockSize))) real.add(h);
    }
    for (const h of storedSeen) expect(real.has(h)).toBe(true);
  }
  const stats = eng.ranks.map((c) => c.stats());
  const sum = (k: 'preemptions' | 'evictedBlocks' | 'storedBlocks' | 'cachedTokens'): number =>
    stats.reduce((a, s) => a + s[k], 0);
  return {
    preemptions: sum('preemptions'),
    evictions: sum('evictedBlocks'),
    stored: sum('storedBlocks'),
    cachedTokens: sum('cachedTokens'),
  };
}

describe('random workloads: block accounting and event replay', () => {
  const tight = { blockSize: 4, numGpuBlocks: 30, maxNumSeqs: 8, maxNumBatchedTokens: 24 };
  const cases: [string, Partial<EngineConfig>][] = [
    ['caching, chunked, lifo', { ...tight }],
    ['caching, chunked, fifo', { ...tight, preemptionMode: 'fifo' }],
    [
      'caching, unchunked, lifo',
      { ...tight, enableChunkedPrefill: false, maxNumBatchedTokens: 64, numGpuBlocks: 30 },
    ],
    ['caching, bs 1', { ...tight, blockSize: 1, numGpuBlocks: 24, maxNumBatchedTokens: 16 }],
    ['no caching, chunked, fifo', { ...tight, enablePrefixCaching: false, preemptionMode: 'fifo' }],
    // One possible output token: equal prompts give equal outputs, so filled partial blocks dedup at promotion.
    ['caching, vocab 2', { ...tight, vocabSize: 2 }],
    ['caching, 2 dp ranks', { ...tight, dataParallelSize: 2, numGpuBlocks: 24 }],
    ['sglang: caching, chunked', { ...tight, engineType: 'sglang', sglangMaxPrefillTokens: 40 }],
    [
      'sglang: caching, unchunked',
      { ...tight, engineType: 'sglang', enableChunkedPrefill: false, sglangMaxPrefillTokens: 64 },
    ],
    [
      'sglang: caching, bs 1',
      { ...tight, engineType: 'sglang', blockSize: 1, numGpuBlocks: 24, maxNumBatchedTokens: 16 },
    ],
    ['sglang: no caching', { ...tight, engineType: 'sglang', enablePrefixCaching: false }],
    ['sglang: vocab 2', { ...tight, engineType: 'sglang', vocabSize: 2 }],
    ['sglang: 2 dp ranks', { ...tight, engineType: 'sglang', dataParallelSize: 2, numGpuBlocks: 24 }],
  ];
  it.each(cases)('%s', (_name, partial) => {
    for (const seed of [42, 1234]) {
      const r = workload(partial, seed, 300);
      // The sizes above are chosen so pressure is real; a run without it would prove nothing.
      expect(r.preemptions).toBeGreaterThan(0);
      if (partial.enablePrefixCaching !== false) {
        expect(r.evictions).toBeGreaterThan(0);
        expect(r.stored).toBeGreaterThan(0);
        expect(r.cachedTokens).toBeGreaterThan(0);
      }
    }
  });

  it('a roomy engine never preempts', () => {
    const r = workload({ blockSize: 4, numGpuBlocks: 4096, maxNumSeqs: 64 }, 7, 300);
    expect(r.preemptions).toBe(0);
    expect(r.evictions).toBe(0);
  });

  it('a roomy sglang engine never retracts', () => {
    const r = workload({ blockSize: 4, numGpuBlocks: 4096, maxNumSeqs: 64, engineType: 'sglang' }, 7, 300);
    expect(r.preemptions).toBe(0);
    expect(r.evictions).toBe(0);
  });
});
