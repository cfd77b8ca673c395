import { describe, expect, it } from 'vitest';
import { CandidateBatch, CostBreakdown, DEFAULT_COST_PARAMS, computeCosts } from './cost.js';
import { selectPowerOfTwo } from './modes.js';
import { DEFAULT_TTFT_PARAMS, PrefillRate, computeTtftCosts, decodeStepMs, pickTtft } from './ttft.js';

const noRand = () => {
  throw new Error('no sample expected');
};
const BS = 16;

describe('computeTtftCosts (worked by hand, bs 16, isl 64, κ 0.25, λ 1)', () => {
  it('queued + uncached over the rate, decode pressure, work weight, in-flight prefix counts as cached', () => {
    const b = CandidateBatch.of([
      // A and C have queued prefill: busy share b = 2/3 of n = 3, λ_eff = 1 · (2/3) / (1 − 2/3 + 1/3) = 1.
      // A: 2 cached blocks (32 tokens), 100 queued, half the KV decoding, 10 tok/ms, no pass time:
      //    ttft = (100 + 32) / 10 · (1 + 0.25 · 0.5) = 14.85; cost = 14.85 + 1 · 32 / 10 = 18.05
      {
        deviceBlocks: 2,
        activePrefillTokens: 100,
        activeDecodeBlocks: 50,
        capacityBlocks: 100,
        prefillRate: 10,
      },
      // B: idle, nothing cached, 8 tok/ms: ttft = 64 / 8 = 8; cost = 8 + 1 · 64 / 8 = 16
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
    expect(out.cost[0]).toBeCloseTo(18.05, 10);
    expect(out.cost[1]).toBe(16);
    expect(out.cost[2]).toBeCloseTo(8.08, 10);
    expect([...out.cachedTokens.subarray(0, 3)]).toEqual([32, 0, 64]);
    expect(pickTtft(out.cost, out.cachedTokens, 3, noRand)).toBe(2);
  });

  it('pass time per pass (the queue and this prompt in separate passes); λ scaled by the busy share', () => {
    // 50 tokens per pass, 2 ms per pass, 10 tok/ms; λ 3 with one of three candidates busy:
    // λ_eff = 3 · (1/3) / (1 − 1/3 + 1/3) = 1.
    const rank = { passTokens: 50, prefillPassMs: 2, prefillRate: 10 };
    const b = CandidateBatch.of([
      // P: 60 queued, nothing cached: passes ceil(60/50) + ceil(64/50) = 4 → 8 + 124 / 10 = 20.4;
      //    own = 2 · 2 + 6.4 = 10.4; cost 30.8
      { ...rank, activePrefillTokens: 60 },
      // Q: idle, 32 cached: 1 pass → 2 + 3.2 = 5.2; own 5.2; cost 10.4
      { ...rank, deviceBlocks: 2 },
      // R: idle, nothing cached: 2 passes → 4 + 6.4 = 10.4; own 10.4; cost 20.8
      { ...rank },
    ]);
    const tp = { ...DEFAULT_TTFT_PARAMS, workWeight: 3, duplicateWeight: 0 };
    const out = computeTtftCosts(b, { isl: 64, blockSize: BS }, tp, true, 0, 0, new CostBreakdown());
    expect([...out.prefillTerm.subarray(0, 3)].map((x) => +x.toFixed(10))).toEqual([20.4, 5.2, 10.4]);
    expect([...out.cost.subarray(0, 3)].map((x) => +x.toFixed(10))).toEqual([30.8, 10.4, 20.8]);
    // Nobody queued: λ_eff = 0 and the cost is the predicted TTFT alone.
    b.activePrefillTokens[0] = 0;
    computeTtftCosts(b, { isl: 64, blockSize: BS }, tp, true, 0, 0, out);
    expect([...out.cost.subarray(0, 3)].map((x) => +x.toFixed(10))).toEqual([10.4, 5.2, 10.4]);
  });

  it('decode step per pass on a rank with running requests (engine model: 5.74 ms empty, 26.31 at half, 34.01 full)', () => {
    // −25.74·u² + 54.01·u + 5.74: u 0 → 5.74; u 0.5 → −6.435 + 27.005 + 5.74 = 26.31; u 1 → 34.01.
    expect(decodeStepMs(0)).toBeCloseTo(5.74, 12);
    expect(decodeStepMs(0.5)).toBeCloseTo(26.31, 12);
    expect(decodeStepMs(1)).toBeCloseTo(34.01, 12);
    expect(decodeStepMs(3)).toBeCloseTo(34.01, 12);
    // 50 tokens per pass, 2 ms per pass, 10 tok/ms; κ 0, λ 0 (cost = predicted TTFT).
    const rank = { passTokens: 50, prefillPassMs: 2, prefillRate: 10, capacityBlocks: 100 };
    const b = CandidateBatch.of([
      // D: no running request: 2 passes, no step: 4 + 6.4 = 10.4
      { ...rank },
      // E: 3 running, half the KV: step 26.31; no queued prefill: waits half a step (13.155), then
      //    2 passes of 2 + 26.31 and 6.4 ms of tokens: 13.155 + 56.62 + 6.4 = 76.175
      { ...rank, activeRequests: 3, activeDecodeBlocks: 50 },
      // F: 2 running, 60 queued, empty KV: step 5.74; queue 2 passes (2 · 7.74 + 6) = 21.48, no
      //    half step behind a queue; own 2 · 7.74 + 6.4 = 21.88; 43.36
      { ...rank, activeRequests: 2, activePrefillTokens: 60 },
      // G: a running request but no known capacity: no step, 10.4
      { ...rank, activeRequests: 1, capacityBlocks: 0 },
    ]);
    const tp = { ...DEFAULT_TTFT_PARAMS, decodePressure: 0, workWeight: 0 };
    const out = computeTtftCosts(b, { isl: 64, blockSize: BS }, tp, true, 0, 0, new CostBreakdown());
    expect([...out.cost.subarray(0, 4)].map((x) => +x.toFixed(10))).toEqual([10.4, 76.175, 43.36, 10.4]);
    // Scale 0.5: E = 6.5775 + 2 · (2 + 13.155) + 6.4 = 43.2875; scale 0 is the step-free prediction.
    computeTtftCosts(b, { isl: 64, blockSize: BS }, { ...tp, decodeStep: 0.5 }, true, 0, 0, out);
    expect(out.cost[1]).toBeCloseTo(43.2875, 10);
    computeTtftCosts(b, { isl: 64, blockSize: BS }, { ...tp, decodeStep: 0 }, true, 0, 0, out);
    expect([...out.cost.subarray(0, 4)].map((x) => +x.toFixed(10))).toEqual([10.4, 10.4, 20.4, 10.4]); // F: 4 + 6 + 4 + 6.4
  });

  it('recomputing a cold prefix another rank holds is charged duplicateWeight × λ_eff more; an in-flight prefix is not', () => {
    // 10 tok/ms, no pass time, κ 0, no decode step, λ 1, duplicate weight 3. H and J have queued
    // prefill: b = 2/3, λ_eff = 1 · (2/3) / (1/3 + 1/3) = 1. Longest cached prefix M = 48 (H).
    const b = CandidateBatch.of([
      // H: 48 cached, 100 queued: ttft (100 + 16) / 10 = 11.6, own 1.6, nothing duplicated: 13.2
      { deviceBlocks: 3, activePrefillTokens: 100, prefillRate: 10 },
      // I: idle, nothing cached: ttft 6.4, own 6.4, duplicates 48 → 3 · 4.8 = 14.4: 27.2
      { prefillRate: 10 },
      // J: 16 cached, 20 queued: ttft (20 + 48) / 10 = 6.8, own 4.8, duplicates 32 → 3 · 3.2 = 9.6: 21.2
      { deviceBlocks: 1, activePrefillTokens: 20, prefillRate: 10 },
    ]);
    const tp = {
      ...DEFAULT_TTFT_PARAMS,
      decodePressure: 0,
      decodeStep: 0,
      workWeight: 1,
      duplicateWeight: 3,
    };
    const costs = () => {
      computeTtftCosts(b, { isl: 64, blockSize: BS }, tp, true, 0, 0, out);
      return [...out.cost.subarray(0, 3)].map((x) => +x.toFixed(10));
    };
    const out = new CostBreakdown();
    expect(costs()).toEqual([13.2, 27.2, 21.2]);
    // One block of it in flight on H (a request running with the same prefix): H = 16 is shared,
    // I duplicates 48 − 16 = 32 (9.6: 22.4), J still 48 − 16 = 32 (21.2).
    b.activePrefixDepth[0] = 1;
    expect(costs()).toEqual([13.2, 22.4, 21.2]);
    // All three blocks in flight: copying a prefix that running requests share is not charged.
    b.activePrefixDepth[0] = 3;
    expect(costs()).toEqual([13.2, 12.8, 11.6]);
  });

  it("a hot prefix's busy holder weighs its added work at λ, not the busy-share-scaled λ_eff", () => {
    // 10 tok/ms, no pass time, κ 0, no decode step, no duplicate charge, λ 1. One of 4 candidates
    // has queued prefill: b = 1/4, λ_eff = 1 · (1/4) / (3/4 + 1/4) = 0.25.
    const b = CandidateBatch.of([
      // K: 32 cached and in flight (2 blocks of this prompt booked by running requests), 50 queued:
      //    ttft (50 + 32) / 10 = 8.2, own 3.2 at λ 1: 11.4
      { deviceBlocks: 2, activePrefixDepth: 2, activePrefillTokens: 50, prefillRate: 10 },
      // L, M, N idle: ttft 6.4, own 6.4 at λ_eff 0.25: 8
      { prefillRate: 10 },
      { prefillRate: 10 },
      { prefillRate: 10 },
    ]);
    const tp = {
      ...DEFAULT_TTFT_PARAMS,
      decodePressure: 0,
      decodeStep: 0,
      workWeight: 1,
      duplicateWeight: 0,
    };
    const out = computeTtftCosts(b, { isl: 64, blockSize: BS }, tp, true, 0, 0, new CostBreakdown());
    expect([...out.cost.subarray(0, 4)].map((x) => +x.toFixed(10))).toEqual([11.4, 8, 8, 8]);
    // Nothing of this prompt in flight there (a cold holder): λ_eff, 8.2 + 0.25 · 3.2 = 9.
    b.activePrefixDepth[0] = 0;
    computeTtftCosts(b, { isl: 64, blockSize: BS }, tp, true, 0, 0, out);
    expect(out.cost[0]).toBeCloseTo(9, 10);
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

  it('near ties (cost and predicted TTFT within the tolerance): the longer cached prefix, then the least recent inflow, then one draw', () => {
    // min 10, tolerance 0.1: ties are costs <= 11. Index 3 (cost 12) holds more cache but is no tie.
    // Among 0..2 (all uncached) the least inflow (3) leaves 1 and 2; one draw: u·2 < 1 takes 2.
    expect(pickTtft([10, 10.5, 10.9, 12], [0, 0, 0, 64], 4, () => 0.4, 0.1, [5, 3, 3, 0])).toBe(2);
    expect(pickTtft([10, 10.5, 10.9, 12], [0, 0, 0, 64], 4, () => 0.6, 0.1, [5, 3, 3, 0])).toBe(1);
    // A tie with a longer cached prefix wins outright, without a draw.
    expect(pickTtft([10, 10.9, 12], [0, 32, 64], 3, noRand, 0.1)).toBe(1);
    // With the predicted TTFTs: index 1 costs within 10 % but its TTFT (60) is not within 10 % of
    // the cheapest one's (40): no tie, the cheapest wins although it caches less.
    expect(pickTtft([10, 10.9, 12], [0, 32, 64], 3, noRand, 0.1, undefined, [40, 60, 12])).toBe(0);
    expect(pickTtft([10, 10.9, 12], [0, 32, 64], 3, noRand, 0.1, undefined, [40, 44, 12])).toBe(1);
    // Without a tolerance only exact ties count: the minimum wins.
    expect(pickTtft([10, 10.9, 12], [0, 32, 64], 3, noRand)).toBe(0);
  });

  it('rejects a negative rate naming the candidate', () => {
    const b = CandidateBatch.of([{ prefillRate: -1 }]);
    expect(() =>
      computeTtftCosts(b, { isl: 1, blockSize: BS }, DEFAULT_TTFT_PARAMS, true, 0, 0, new CostBreakdown()),
    ).toThrow(/candidates\[0\]/);
  });
});

describe('PrefillRate', () => {
  it('fits pass time and rate by least squares over decayed completions and the seed (worked by hand)', () => {
    // Seed 10 tok/ms, no pass time, 1000 tokens per pass, keep 0.5: pseudo-completions
    // (n 1, x 1000, t 100) and (n 1, x 125, t 12.5).
    const r = new PrefillRate(10, 1000, 0.5);
    expect([r.rate, r.passMs]).toEqual([10, 0]);
    r.observe(2000, 0, 100); // 2 passes, 2000 tokens, 100 ms; the seed decays to 0.5
    // Snn = 0.5·2 + 4 = 5; Snx = 0.5·1125 + 4000 = 4562.5; Sxx = 0.5·1015625 + 4e6 = 4507812.5;
    // Snt = 0.5·112.5 + 200 = 256.25; Sxt = 0.5·101562.5 + 200000 = 250781.25;
    // det = 5·Sxx − Snx² = 1722656.25; o = (Snt·Sxx − Snx·Sxt) / det = 10937500 / det;
    // s = (Snn·Sxt − Snx·Snt) / det = 84765.625 / det.
    expect(r.passMs).toBeCloseTo(10937500 / 1722656.25, 9);
    expect(r.rate).toBeCloseTo(1722656.25 / 84765.625, 9);
    expect(r.ms(2500)).toBeCloseTo(3 * r.passMs + 2500 / r.rate, 9);
    expect(r.samples).toBe(1);
    r.observe(0, 150, 260); // a full cache hit teaches nothing
    expect(r.samples).toBe(1);
  });

  it('times a completion from the later of booking and the previous one, divided by the decode pressure', () => {
    // Seeded on the true model (20 ms per pass + 10 tok/ms): completions on it change nothing.
    const r = new PrefillRate(10, 1000, 0.5, 20);
    r.observe(1000, 0, 120); // 1 pass: 20 + 100 = 120 ms
    // Booked at 50 but the previous completion was at 120: 105 ms, over pressure 1.5 = 70 = 20 + 50.
    // (Timed from the booking it would be 175 ms and move the fit.)
    r.observe(500, 50, 225, 1.5);
    expect(r.samples).toBe(2);
    expect(r.passMs).toBeCloseTo(20, 9);
    expect(r.rate).toBeCloseTo(10, 9);
    expect(r.passRate).toBeCloseTo(1000 / 120, 9);
  });

  it('takes the decode steps its passes carried out of the observed time', () => {
    // True model 20 ms per pass + 10 tok/ms, 1000 tokens per pass, decode step 8 ms.
    const r = new PrefillRate(10, 1000, 0.5, 20);
    r.observe(1000, 0, 120); // idle rank: 120 ms, no step
    // Booked at 200, after the previous completion: waited half a step, then 1 pass with a step:
    // 4 + 20 + 50 + 8 = 82 ms → 282; bare (82 − 1.5 · 8) = 70 = 20 + 500 / 10.
    r.observe(500, 200, 282, 1, 8);
    // Booked at 250 behind it: timed from 282, 1 pass with a step: 20 + 100 + 8 = 128 → 410.
    r.observe(1000, 250, 410, 1, 8);
    expect(r.samples).toBe(3);
    expect(r.passMs).toBeCloseTo(20, 9);
    expect(r.rate).toBeCloseTo(10, 9);
  });

  it('converges to the model its completions follow', () => {
    const r = new PrefillRate(40, 1000, 0.5);
    // 40 completions on t = 5 ms per pass + x / 20 (short and long prompts alternating).
    for (let k = 0; k < 40; k++) {
      const x = k % 2 === 0 ? 300 : 2600;
      r.observe(x, 1000 * k, 1000 * k + 5 * Math.ceil(x / 1000) + x / 20);
    }
    expect(r.passMs).toBeCloseTo(5, 6);
    expect(r.rate).toBeCloseTo(20, 6);
  });

  it("a rank that has served nothing predicts like the fleet's pool; its completions teach the pool too", () => {
    const pool = new PrefillRate(10, 1000, 0.5, 20);
    const rank = new PrefillRate(40, 1000, 0.9, 0, pool);
    expect([rank.rate, rank.passMs]).toEqual([10, 20]);
    rank.observe(1000, 0, 120); // on the pool's model: the pool stays, the rank weighs its own fit 1 : 4
    expect(pool.samples).toBe(1);
    expect(pool.passMs).toBeCloseTo(20, 9);
    // Inflow decays with a half-life of a minute.
    rank.booked(1000, 0);
    expect(rank.inflow(60_000)).toBeCloseTo(500, 9);
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
