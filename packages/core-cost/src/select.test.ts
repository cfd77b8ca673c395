import { describe, expect, it } from 'vitest';
import { KvrError, type WorkerWithDpRank } from '@kvrouter/protocols';
import { Rng } from '@kvrouter/testkit';
import {
  ALL_WORKERS_BUSY_MESSAGE,
  argminReservoir,
  pickIndex,
  pinnedShortcut,
  preferredTaintMultiplier,
  softmaxProbabilities,
  softmaxSample,
} from './select.js';

/** A sample source that replays fixed values and counts draws. */
function samples(...us: number[]) {
  let i = 0;
  const f = () => {
    if (i >= us.length) throw new Error('drew more samples than expected');
    return us[i++];
  };
  return Object.assign(f, { used: () => i });
}

const w = (id: number, dp = 0) => ({ worker_id: BigInt(id), dp_rank: dp }) as WorkerWithDpRank;

describe('argmin with reservoir tie-break', () => {
  // costs: ties for the minimum 3 at indices 1, 2, 4
  const costs = [5, 3, 3, 7, 3];

  it('k-th tie replaces the pick when u·k < 1; one sample per extra tie', () => {
    // idx 2 is tie 2: u=0.6 → 1.2 ≥ 1 keep 1; idx 4 is tie 3: u=0.2 → 0.6 < 1 take 4
    let s = samples(0.6, 0.2);
    expect(argminReservoir(costs, 5, s)).toBe(4);
    expect(s.used()).toBe(2);
    // 0.4·2 = 0.8 < 1 take 2; 0.5·3 = 1.5 keep 2
    s = samples(0.4, 0.5);
    expect(argminReservoir(costs, 5, s)).toBe(2);
    // neither replaces: 1.8, 2.7
    expect(argminReservoir(costs, 5, samples(0.9, 0.9))).toBe(1);
  });

  it('a unique minimum draws no sample', () => {
    const s = samples();
    expect(argminReservoir([4, 2, 9], 3, s)).toBe(1);
    expect(s.used()).toBe(0);
  });

  it('a later smaller value resets the tie count', () => {
    // 3,3 tie (one draw, 0.9 keeps idx 0), then 1 at idx 2 wins outright, then 1 ties at idx 3
    // as tie 2 (not 3): u = 0.45 → 0.9 < 1 replaces
    expect(argminReservoir([3, 3, 1, 1], 4, samples(0.9, 0.45))).toBe(3);
  });

  it('is uniform over ties (seeded, 30 000 picks)', () => {
    const rng = new Rng(7);
    const hits = [0, 0, 0, 0, 0];
    for (let t = 0; t < 30_000; t++) hits[argminReservoir(costs, 5, () => rng.next())]++;
    expect(hits[0]).toBe(0);
    expect(hits[3]).toBe(0);
    // each of the 3 ties ≈ 10 000; ±5 % is > 8 standard deviations (σ ≈ 82)
    for (const i of [1, 2, 4]) expect(Math.abs(hits[i] - 10_000)).toBeLessThan(500);
  });

  it('skips masked candidates; −1 when nothing is left', () => {
    expect(argminReservoir([1, 2, 3], 3, samples(), [1, 0, 0])).toBe(1);
    expect(argminReservoir([1, 2], 2, samples(), [true, true])).toBe(-1);
  });

  it('rejects a sample outside [0, 1)', () => {
    expect(() => argminReservoir([1, 1], 2, () => 1)).toThrow(KvrError);
  });
});

describe('softmax', () => {
  it('equal costs → uniform floor(u·n) with one sample', () => {
    const c = [4, 4, 4, 4];
    expect(softmaxSample(c, 4, 1, 0)).toBe(0);
    expect(softmaxSample(c, 4, 1, 0.5)).toBe(2);
    expect(softmaxSample(c, 4, 1, 0.99)).toBe(3);
    expect([...softmaxProbabilities(c, 4, 1)]).toEqual([0.25, 0.25, 0.25, 0.25]);
  });

  it('temperature sharpens or flattens around the range-normalised costs', () => {
    // costs 0, 10: range 10 → exponent −(c−0)/(10·T)
    // T = 0.5: weights 1, e^−2 = 0.135335 → p0 = 1/1.135335 = 0.880797
    expect(softmaxProbabilities([0, 10], 2, 0.5)[0]).toBeCloseTo(0.880797, 6);
    // T = 2: weights 1, e^−0.5 = 0.606531 → p0 = 1/1.606531 = 0.622459
    expect(softmaxProbabilities([0, 10], 2, 2)[0]).toBeCloseTo(0.622459, 6);
    // Scale invariance: costs 100, 200 give the same as 0, 10
    expect(softmaxProbabilities([100, 200], 2, 2)[0]).toBeCloseTo(0.622459, 6);
  });

  it('non-finite range → divide by the largest |cost|; NaN weights count 0', () => {
    // [1, ∞, 2]: range ∞ → scale = max|c| = ∞; finite costs weigh e^0 = 1, the infinite one NaN → 0
    const c = [1, Infinity, 2];
    expect(softmaxSample(c, 3, 1, 0.4)).toBe(0); // target 0.8 of total 2
    expect(softmaxSample(c, 3, 1, 0.6)).toBe(2); // target 1.2: cum 1, 1, 2
    const p = softmaxProbabilities(c, 3, 1);
    expect([...p]).toEqual([0.5, 0, 0.5]);
  });

  it('falls back to the last candidate when no weight is usable', () => {
    // [−∞, ∞]: range and max|c| are ∞; (−∞ − −∞)/∞ and (∞ − −∞)/∞ are NaN → weights 0, total 0,
    // so no cumulative sum exceeds the target
    expect(softmaxSample([-Infinity, Infinity], 2, 1, 0.3)).toBe(1);
    // all NaN: no min/max, scale 0 → every weight NaN → 0
    expect(softmaxSample([NaN, NaN, NaN], 3, 1, 0.3)).toBe(2);
  });

  it('pickIndex: T > 0 draws exactly one sample', () => {
    const s = samples(0.95);
    // [0, 10] at T=2: p0 = 0.622459 → 0.95 falls in the second
    expect(pickIndex([0, 10], 2, 2, s)).toBe(1);
    expect(s.used()).toBe(1);
    expect(pickIndex([], 0, 0, samples())).toBe(-1);
    expect(() => pickIndex([1], 1, -1, samples())).toThrow(KvrError);
  });
});

describe('pin shortcut', () => {
  const ws = [w(7, 1), w(3, 0), w(7, 0), w(9, 2)];

  it('finds the pinned rank, or the worker lowest rank when dp_rank is absent', () => {
    expect(pinnedShortcut(ws, 4, { worker_id: 7n, dp_rank: 1 })).toBe(0);
    expect(pinnedShortcut(ws, 4, { worker_id: 7n })).toBe(2);
    expect(pinnedShortcut(ws, 4, { worker_id: 7n, dp_rank: null })).toBe(2);
    expect(pinnedShortcut(ws, 4, { worker_id: 9n })).toBe(3);
  });

  it('−1 when the pin is not a candidate (sent direct without booking)', () => {
    expect(pinnedShortcut(ws, 4, { worker_id: 5n })).toBe(-1);
    expect(pinnedShortcut(ws, 4, { worker_id: 3n, dp_rank: 1 })).toBe(-1);
    // only the first n candidates count
    expect(pinnedShortcut(ws, 3, { worker_id: 9n })).toBe(-1);
  });

  it('a busy pinned rank → 503, no reroute', () => {
    let err: unknown;
    try {
      pinnedShortcut(ws, 4, { worker_id: 3n }, [false, true, false, false]);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(KvrError);
    expect((err as KvrError).status).toBe(503);
    expect((err as KvrError).code).toBe('pinned_worker_busy');
    // a different busy rank does not matter
    expect(pinnedShortcut(ws, 4, { worker_id: 3n }, [true, false, true, true])).toBe(1);
  });
});

describe('preferred taint multiplier', () => {
  it('exp(−tanh Σ)', () => {
    expect(preferredTaintMultiplier([])).toBe(1);
    expect(preferredTaintMultiplier(0)).toBe(1);
    // Σ = 0.3 + 0.55 = 0.85 → same as the single 0.85 (≈ 0.501040)
    expect(preferredTaintMultiplier([0.3, 0.55])).toBeCloseTo(0.50104, 5);
    // Large sums saturate at e^−1 = 0.367879
    expect(preferredTaintMultiplier(50)).toBeCloseTo(Math.E ** -1, 12);
    expect(() => preferredTaintMultiplier([NaN])).toThrow(KvrError);
  });

  it('all-busy message is the docs/configuration.md one', () => {
    expect(ALL_WORKERS_BUSY_MESSAGE).toBe('All workers are busy, please retry later');
  });
});
