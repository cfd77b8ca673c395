import { describe, expect, it } from 'vitest';
import { CandidateBatch, CostBreakdown, DEFAULT_COST_PARAMS, computeCosts } from './cost.js';
import { selectPowerOfTwo } from './modes.js';
import { DEFAULT_TTFT_PARAMS, PrefillRate, computeTtftCosts, pickTtft } from './ttft.js';

const noRand = () => {
  throw new Error('no sample expected');
};
const BS = 16;

describe('computeTtftCosts (worked by hand, bs 16, isl 64, κ 0.25, λ 0.5)', () => {
  it('queued + uncached over the rate, decode pressure, work weight, in-flight prefix counts as cached', () => {
    const b = CandidateBatch.of([
      // A: 2 cached blocks (32 tokens), 100 queued, half the KV decoding, 10 tok/ms:
      //    ttft = (100 + 32) / 10 · (1 + 0.25 · 0.5) = 14.85; cost = 14.85 + 0.5 · 32 / 10 = 16.45
      {
        deviceBlocks: 2,
        activePrefillTokens: 100,
        activeDecodeBlocks: 50,
        capacityBlocks: 100,
        prefillRate: 10,
      },
      // B: idle, nothing cached, 8 tok/ms: ttft = 64 / 8 = 8; cost = 8 + 0.5 · 64 / 8 = 12
      { prefillRate: 8, capacityBlocks: 100 },
      // C: a sibling booked all 4 blocks and is still prefilling them (64 queued): cached 64, uncached 0,
      //    ttft = 64 / 8 · (1 + 0.25 · 4/100) = 8.08; cost 8.08
      {
        activePrefixDepth: 4,
        activePrefillTokens: 64,
        activeDecodeBlocks: 4,
        capacityBlocks: 100,
        prefillRate: 8,
      },
    ]);
    const out = computeTtftCosts(
      b,
      { isl: 64, blockSize: BS },
      DEFAULT_TTFT_PARAMS,
      true,
      0.75,
      0.25,
      new CostBreakdown(),
    );
    expect(out.prefillTerm[0]).toBeCloseTo(14.85, 10);
    expect(out.cost[0]).toBeCloseTo(16.45, 10);
    expect(out.cost[1]).toBe(12);
    expect(out.cost[2]).toBeCloseTo(8.08, 10);
    expect([...out.cachedTokens.subarray(0, 3)]).toEqual([32, 0, 64]);
    expect(pickTtft(out.cost, out.cachedTokens, 3, noRand)).toBe(2);
  });

  it('an unknown rate uses the default; no capacity means no decode pressure; untracked prefill is not queued', () => {
    const b = CandidateBatch.of([{ activePrefillTokens: 40, activeDecodeBlocks: 1000 }]);
    const tp = { ...DEFAULT_TTFT_PARAMS, defaultRate: 20, workWeight: 0 };
    // (40 + 64) / 20 = 5.2 with prefill tracked, 64 / 20 = 3.2 without.
    expect(
      computeTtftCosts(b, { isl: 64, blockSize: BS }, tp, true, 0, 0, new CostBreakdown()).cost[0],
    ).toBeCloseTo(5.2, 12);
    expect(
      computeTtftCosts(b, { isl: 64, blockSize: BS }, tp, false, 0, 0, new CostBreakdown()).cost[0],
    ).toBeCloseTo(3.2, 12);
  });

  it('exact ties go to the longer cached prefix without drawing a sample', () => {
    const b = CandidateBatch.of([
      { prefillRate: 8 }, // 64 / 8 = 8
      { deviceBlocks: 4, activePrefillTokens: 80, prefillRate: 10 }, // (80 + 0) / 10 = 8
    ]);
    const tp = { ...DEFAULT_TTFT_PARAMS, workWeight: 0 };
    const out = computeTtftCosts(b, { isl: 64, blockSize: BS }, tp, true, 0, 0, new CostBreakdown());
    expect([out.cost[0], out.cost[1]]).toEqual([8, 8]);
    expect(pickTtft(out.cost, out.cachedTokens, 2, noRand)).toBe(1);
    // Equal cost and equal cache: one sample decides (reservoir: u < 1/2 takes the second).
    expect(pickTtft([3, 3], [0, 0], 2, () => 0.4)).toBe(1);
    expect(pickTtft([3, 3], [0, 0], 2, () => 0.6)).toBe(0);
  });

  it('rejects a negative rate naming the candidate', () => {
    const b = CandidateBatch.of([{ prefillRate: -1 }]);
    expect(() =>
      computeTtftCosts(b, { isl: 1, blockSize: BS }, DEFAULT_TTFT_PARAMS, true, 0, 0, new CostBreakdown()),
    ).toThrow(/candidates\[0\]/);
  });
});

describe('PrefillRate', () => {
  it('learns tokens per ms from completions timed from the later of booking and the previous completion', () => {
    // Seed 10 tok/ms carried as 1000 tokens (100 ms); keep 0.5.
    const r = new PrefillRate(10, 1000, 0.5);
    expect(r.rate).toBe(10);
    r.observe(2000, 0, 100); // 2000 tokens in 100 ms: tok 0.5·1000 + 2000 = 2500, ms 0.5·100 + 100 = 150
    expect(r.rate).toBeCloseTo(2500 / 150, 12);
    r.observe(1000, 50, 200, 1.5); // starts at 100 (previous completion): 1000·1.5 in 100 ms
    expect(r.rate).toBeCloseTo((1250 + 1500) / (75 + 100), 12);
    r.observe(0, 150, 260); // a full cache hit teaches nothing
    expect(r.samples).toBe(2);
    expect(r.rate).toBeCloseTo(2750 / 175, 12);
  });
});

describe('sibling sharing in the dynamo cost (predict-on-route)', () => {
  // bs 16, isl 64 (4 blocks). A holds the first sibling's booking: 4 predicted blocks, 64 tokens still
  // to prefill, 4 decode blocks, prefix depth 4. B is idle.
  const batch = () =>
    CandidateBatch.of([
      {
        deviceBlocks: 4,
        activePrefillTokens: 64,
        activeDecodeBlocks: 4,
        activePrefixDepth: 4,
        sharedPendingTokens: 64,
      },
      {},
    ]);
  it('without sharing the booked load cancels the credit: a tie (8 / 8)', () => {
    // A: raw (64+64)/16 = 8, credit 4 → prefill 4, decode 4, new blocks 0 → 8. B: 4 + 0 + 4 = 8.
    const out = computeCosts(batch(), { isl: 64, blockSize: BS }, DEFAULT_COST_PARAMS);
    expect([out.cost[0], out.cost[1]]).toEqual([8, 8]);
  });
  it('with sharing the sibling lands together: 4 vs 8', () => {
    // A: booked prefill of its own predicted blocks not held against it: raw 64/16 = 4, credit 4 → 0, decode 4 → 4.
    const out = computeCosts(
      batch(),
      { isl: 64, blockSize: BS },
      { ...DEFAULT_COST_PARAMS, siblingShare: true },
    );
    expect([out.cost[0], out.cost[1]]).toEqual([4, 8]);
  });
});

describe('selectPowerOfTwo', () => {
  const inst = [
    { id: 1n, inflight: 5 },
    { id: 2n, inflight: 1, busy: true },
    { id: 3n, inflight: 2 },
    { id: 4n, inflight: 2 },
  ];
  it('two distinct free draws, fewer in-flight wins, a tie keeps the first', () => {
    // free = [1, 3, 4]; u1 0.1 → 1 (index 0); rest [3, 4], u2 0.2 → 3 (index 2): 2 < 5.
    expect(selectPowerOfTwo(inst, 0.1, 0.2)).toBe(2);
    // u1 0.5 → 3; rest [1, 4], u2 0.9 → 4: 2 = 2, keep 3.
    expect(selectPowerOfTwo(inst, 0.5, 0.9)).toBe(2);
    expect(selectPowerOfTwo([{ id: 9n }], 0.3, 0.7)).toBe(0);
  });
});
