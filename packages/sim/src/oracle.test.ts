import { describe, expect, it } from 'vitest';
import { oracleBounds } from './oracle.js';
import { generateSynthetic } from './synthetic.js';
import type { TraceRow } from './trace.js';

const row = (index: number, timestamp: number, hash_ids: number[], input_length: number): TraceRow => ({
  timestamp,
  input_length,
  output_length: 1,
  hash_ids,
  index,
});

// Trace blocks of 4 tokens and KV blocks of 4 tokens: one hash id = one KV block.
const opts = { blockSize: 4, traceBlockSize: 4, vocabSize: 32000 };

describe('oracleBounds', () => {
  it('counts the longest cached prefix, capped at floor((len − 1) / bs) blocks', () => {
    // A = [1,2,3] (12 tokens, 3 blocks, nothing cached); B = [1,2,3,4] (16 tokens): blocks 1..3 are
    // cached and the cap is floor(15/4) = 3, so 12 tokens hit. C = A again (12 tokens): cap
    // floor(11/4) = 2 blocks although all 3 are cached, 8 tokens.
    // Total prompt 12 + 16 + 12 = 40; cached 0 + 12 + 8 = 20 -> 0.5 with room for everything.
    const rows = [row(0, 0, [1, 2, 3], 12), row(1, 10, [1, 2, 3, 4], 16), row(2, 20, [1, 2, 3], 12)];
    const r = oracleBounds(rows, { ...opts, capacityBlocks: 100 });
    expect(r.promptTokens).toBe(40);
    expect(r.pooledCachedTokens).toBe(20);
    expect(r.infiniteCachedTokens).toBe(20);
    expect(r.pooledHitRate).toBe(0.5);
    expect(r.infiniteHitRate).toBe(0.5);
  });

  it('evicts least recently used blocks, deepest of a prompt first', () => {
    // Capacity 2. A = [1,2,3] is touched deepest first (3, 2, 1): inserting 1 evicts 3, leaving {1, 2}.
    // B = [1,2,3,4] then hits blocks 1 and 2 only: 8 tokens; the infinite cache hits 1, 2, 3: 12.
    const rows = [row(0, 0, [1, 2, 3], 12), row(1, 5, [1, 2, 3, 4], 16)];
    const r = oracleBounds(rows, { ...opts, capacityBlocks: 2 });
    expect(r.pooledCachedTokens).toBe(8);
    expect(r.infiniteCachedTokens).toBe(12);
    expect(r.pooledHitRate).toBeCloseTo(8 / 28, 12);
    expect(r.infiniteHitRate).toBeCloseTo(12 / 28, 12);
    expect(oracleBounds(rows, { ...opts, capacityBlocks: 0 }).pooledCachedTokens).toBe(0);
  });

  it('walks the trace in timestamp order and caches only full prompt blocks', () => {
    // Row 1 (t = 0) = [5, 6] but only 6 tokens: block 6 is partial and not cached. Row 0 (t = 9) =
    // [5, 6] with 9 tokens: block 5 hits (4 tokens); block 6 was never cached.
    const rows = [row(0, 9, [5, 6], 9), row(1, 0, [5, 6], 6)];
    const r = oracleBounds(rows, { ...opts, capacityBlocks: 10 });
    expect(r.pooledCachedTokens).toBe(4);
    expect(r.promptTokens).toBe(15);
  });

  it('keys blocks by hash ids exactly as by synthesized tokens', () => {
    const rows = generateSynthetic(
      {
        sessions: 40,
        turns: { kind: 'uniform', min: 1, max: 6 },
        systemPrompts: 3,
        systemPromptTokens: 700,
        userTokens: { kind: 'lognormal', median: 300, sigma: 0.8, min: 1, max: 3000 },
        outputTokens: { kind: 'uniform', min: 1, max: 300 },
        sessionRate: 5,
        traceBlockSize: 128,
      },
      5,
    );
    // Rows longer than their hash ids: the overflow is request-unique in both paths.
    rows.push({
      ...rows[3]!,
      input_length: rows[3]!.hash_ids.length * 128 + 200,
      index: rows.length,
      timestamp: 1e9,
    });
    for (const [bs, capacityBlocks] of [
      [16, 100_000],
      [32, 64],
      [128, 1000],
    ] as const) {
      const o = { blockSize: bs, traceBlockSize: 128, vocabSize: 32000, capacityBlocks };
      const ids = oracleBounds(rows, o);
      expect(ids).toEqual(oracleBounds(rows, { ...o, byTokens: true }));
      expect(ids.pooledCachedTokens).toBeGreaterThan(0);
      expect(ids.pooledCachedTokens).toBeLessThanOrEqual(ids.infiniteCachedTokens);
      // 64 blocks of 32 tokens cannot hold this working set; 100 000 blocks hold all of it.
      if (capacityBlocks === 64) expect(ids.pooledCachedTokens).toBeLessThan(ids.infiniteCachedTokens);
      if (capacityBlocks === 100_000) expect(ids.pooledCachedTokens).toBe(ids.infiniteCachedTokens);
    }
  });

  it('rejects bad options', () => {
    expect(() => oracleBounds([], { ...opts, blockSize: 0, capacityBlocks: 1 })).toThrow(/blockSize/);
    expect(() => oracleBounds([], { ...opts, capacityBlocks: -1 })).toThrow(/capacityBlocks/);
    expect(oracleBounds([], { ...opts, capacityBlocks: 1 }).pooledHitRate).toBe(0);
  });
});
