import { describe, expect, it } from 'vitest';
import { KvrError } from '@kvrouter/protocols';
import {
  applyOverrides,
  CandidateBatch,
  computeCosts,
  CostBreakdown,
  DEFAULT_COST_PARAMS,
  legacyWeightMapping,
  loadAwarePreset,
  validateCostParams,
  type CostParams,
} from './cost.js';
import { pickIndex, preferredTaintMultiplier, softmaxProbabilities, softmaxSample } from './select.js';

const D = DEFAULT_COST_PARAMS;
const req = { isl: 160, blockSize: 16 };

/** docs/protocol.md §8.9: bs 16, isl 160 (10 blocks). */
function example(): CandidateBatch {
  return CandidateBatch.of([
    { deviceBlocks: 8, activePrefillTokens: 96, activeDecodeBlocks: 12, activePrefixDepth: 8 }, // W1
    { deviceBlocks: 0, activePrefillTokens: 0, activeDecodeBlocks: 4, activePrefixDepth: 0 }, // W2
    { deviceBlocks: 4, activePrefillTokens: 32, activeDecodeBlocks: 9, activePrefixDepth: 0 }, // W3
  ]);
}

function thrownBy(fn: () => unknown): KvrError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(KvrError);
    return e as KvrError;
  }
  throw new Error('expected a KvrError');
}

describe('§8.9 worked example', () => {
  it('defaults: every term, logits 22/24/27, W1 wins', () => {
    const r = computeCosts(example(), req, D);
    // raw_prefill = (apt + 160)/16: W1 256/16 = 16, W2 10, W3 192/16 = 12
    expect([...r.rawPrefill.subarray(0, 3)]).toEqual([16, 10, 12]);
    // credit_blocks = 1 · 1 · device: 8, 0, 4
    expect([...r.creditBlocks.subarray(0, 3)]).toEqual([8, 0, 4]);
    // prefill term = max(0, raw − credit): 8, 10, 8
    expect([...r.prefillTerm.subarray(0, 3)]).toEqual([8, 10, 8]);
    // additional = floor(160/16) − depth: 10 − 8 = 2, 10, 10
    expect([...r.additional.subarray(0, 3)]).toEqual([2, 10, 10]);
    expect([...r.decode.subarray(0, 3)]).toEqual([12, 4, 9]);
    // logit: 8+12+2 = 22, 10+4+10 = 24, 8+9+10 = 27
    expect([...r.logit.subarray(0, 3)]).toEqual([22, 24, 27]);
    expect([...r.cost.subarray(0, 3)]).toEqual([22, 24, 27]);
    expect([...r.decay.subarray(0, 3)]).toEqual([1, 1, 1]);
    // effective overlap = device; cached tokens = round(overlap · 16): 128, 0, 64
    expect([...r.cachedTokens.subarray(0, 3)]).toEqual([128, 0, 64]);
    expect(r.requestBlocks).toBe(10);
    expect(r.minActivePrefill).toBe(0);
    expect(pickIndex(r.cost, 3, 0, () => 0.5)).toBe(0);
  });

  it('T = 1: p ≈ 0.491 / 0.329 / 0.180 and the fixed samples they imply', () => {
    const r = computeCosts(example(), req, D);
    // range = 27 − 22 = 5; exponents −(c − 22)/5 = 0, −0.4, −1
    // e^−0.4 = 0.670320, e^−1 = 0.367879, sum = 2.038199
    // p = 1/2.038199 = 0.49063, 0.670320/2.038199 = 0.32888, 0.367879/2.038199 = 0.18049
    const p = softmaxProbabilities(r.cost, 3, 1);
    expect(p[0]).toBeCloseTo(0.491, 3);
    expect(p[1]).toBeCloseTo(0.329, 3);
    expect(p[2]).toBeCloseTo(0.18, 3);
    // Cumulative bounds: W1 [0, 0.49063), W2 [0.49063, 0.81951), W3 [0.81951, 1)
    const at = (u: number) => softmaxSample(r.cost, 3, 1, u);
    expect(at(0)).toBe(0);
    expect(at(0.49)).toBe(0);
    expect(at(0.491)).toBe(1);
    expect(at(0.8194)).toBe(1);
    expect(at(0.8196)).toBe(2);
    expect(at(0.999999)).toBe(2);
    expect(pickIndex(r.cost, 3, 1, () => 0.6)).toBe(1);
  });

  it('credit_decay 1: W1 decay 0.625, credit 5, logit 25 → W2 wins', () => {
    const r = computeCosts(example(), req, { ...D, creditDecay: 1 });
    // min_active_prefill = 0 (W2). W1: 1/(1 + 1·((96 − 0)/16)/10) = 1/1.6 = 0.625
    expect(r.decay[0]).toBe(0.625);
    // credit = 0.625 · 8 = 5; prefill = 16 − 5 = 11; logit = 11 + 12 + 2 = 25
    expect(r.creditBlocks[0]).toBe(5);
    expect(r.logit[0]).toBe(25);
    // W2: decay 1, logit 24 unchanged
    expect(r.logit[1]).toBe(24);
    // W3: 1/(1 + (32/16)/10) = 1/1.2; credit 4/1.2 = 3.333; 12 − 3.333 + 9 + 10 = 27.667
    expect(r.decay[2]).toBeCloseTo(1 / 1.2, 12);
    expect(r.logit[2]).toBeCloseTo(27 + 2 / 3, 12);
    expect(pickIndex(r.cost, 3, 0, () => 0.5)).toBe(1);
  });

  it('legacy weight 2 → scale 2: 30 / 34 / 35', () => {
    const p = applyOverrides(D, { overlap_score_weight: 2 });
    expect(p.prefillLoadScale).toBe(2);
    expect(p.credit).toBe(1);
    const r = computeCosts(example(), req, p);
    // 2·8 + 12 + 2 = 30; 2·10 + 4 + 10 = 34; 2·8 + 9 + 10 = 35
    expect([...r.logit.subarray(0, 3)]).toEqual([30, 34, 35]);
  });

  it('preferred taint 0.85 on W2: m ≈ 0.501, cost ≈ 12.02 → W2 wins', () => {
    // tanh(0.85) = (e^1.7 − 1)/(e^1.7 + 1) = 4.473947/6.473947 = 0.691069
    // m = e^−0.691069 = 0.5 · e^(0.693147 − 0.691069) = 0.5 · 1.002080 = 0.501040
    const m = preferredTaintMultiplier([0.85]);
    expect(m).toBeCloseTo(0.50104, 5);
    const c = example();
    c.taintMultiplier[1] = m;
    const r = computeCosts(c, req, D);
    // 24 · 0.501040 = 12.0250 → 12.02 at two decimals
    expect(Math.round(r.cost[1] * 100) / 100).toBe(12.02);
    expect(r.logit[1]).toBe(24);
    expect(r.taintMultiplier[1]).toBe(m);
    expect(pickIndex(r.cost, 3, 0, () => 0.5)).toBe(1);
  });
});

describe('cost terms', () => {
  it('host and disk tiers add to the overlap and to the credit', () => {
    const c = CandidateBatch.of([{ deviceBlocks: 4, hostExtBlocks: 2, diskExtBlocks: 4 }]);
    const r = computeCosts(c, req, D);
    // effective = 4 + 0.75·2 + 0.25·4 = 6.5; cached = round(6.5·16) = 104
    expect(r.effectiveOverlap[0]).toBe(6.5);
    expect(r.cachedTokens[0]).toBe(104);
    // credit = 1·1·4 + 1.5 + 1 = 6.5; prefill = 10 − 6.5 = 3.5; additional 10 → 13.5
    expect(r.creditBlocks[0]).toBe(6.5);
    expect(r.logit[0]).toBe(13.5);
    // The credit factor applies to device blocks only: credit 0.5 → 2 + 1.5 + 1 = 4.5; 10 − 4.5 + 10 = 15.5
    const half = computeCosts(c, req, { ...D, credit: 0.5 });
    expect(half.creditBlocks[0]).toBe(4.5);
    expect(half.logit[0]).toBe(15.5);
    // Effective overlap (and cached tokens) do not depend on the credit
    expect(half.cachedTokens[0]).toBe(104);
  });

  it('cached_tokens rounds the fractional tier overlap', () => {
    // bs 3: host 1 → 0.75·3 = 2.25 → 2; disk 2 → 0.25·2·3 = 1.5 → 2
    const c = CandidateBatch.of([{ hostExtBlocks: 1 }, { diskExtBlocks: 2 }]);
    const r = computeCosts(c, { isl: 30, blockSize: 3 }, D);
    expect([r.cachedTokens[0], r.cachedTokens[1]]).toEqual([2, 2]);
  });

  it('shared-cache hits credit with the shared multiplier only', () => {
    const c = CandidateBatch.of([{ sharedBeyondBlocks: 4 }]);
    // credit = 0.5·4 = 2; prefill 10 − 2 = 8; additional 10 → 18; overlap unchanged (0)
    const r = computeCosts(c, req, { ...D, sharedMultiplier: 0.5 });
    expect(r.creditBlocks[0]).toBe(2);
    expect(r.logit[0]).toBe(18);
    expect(r.effectiveOverlap[0]).toBe(0);
    // Default multiplier 0: no credit → 10 + 10 = 20
    expect(computeCosts(c, req, D).logit[0]).toBe(20);
  });

  it('decode_active_request_weight adds weight × active requests', () => {
    const c = CandidateBatch.of([
      { activeRequests: 3, activeDecodeBlocks: 5 },
      { activeRequests: 0, activeDecodeBlocks: 9 },
    ]);
    // weight 0: 10 + 5 + 10 = 25 vs 10 + 9 + 10 = 29 → first wins
    const r0 = computeCosts(c, req, D);
    expect([r0.logit[0], r0.logit[1]]).toEqual([25, 29]);
    // weight 2: first gets 2·3 = 6 → 31 vs 29 → second wins
    const r2 = computeCosts(c, req, { ...D, decodeActiveRequestWeight: 2 });
    expect(r2.activeRequestTerm[0]).toBe(6);
    expect([r2.logit[0], r2.logit[1]]).toEqual([31, 29]);
    expect(pickIndex(r2.cost, 2, 0, () => 0)).toBe(1);
  });

  it('prefill tracking off zeroes the prefill side and disables decay', () => {
    const r = computeCosts(example(), req, { ...D, trackPrefillTokens: false, creditDecay: 1 });
    // raw 0 → prefill term max(0, 0 − credit) = 0; logits = decode + additional: 14, 14, 19
    expect([...r.prefillTerm.subarray(0, 3)]).toEqual([0, 0, 0]);
    expect([...r.decay.subarray(0, 3)]).toEqual([1, 1, 1]);
    expect([...r.logit.subarray(0, 3)]).toEqual([14, 14, 19]);
  });

  it('active-block tracking off drops additional blocks', () => {
    const r = computeCosts(example(), req, { ...D, trackActiveBlocks: false });
    // 8 + 12 = 20, 10 + 4 = 14, 8 + 9 = 17
    expect([...r.logit.subarray(0, 3)]).toEqual([20, 14, 17]);
  });

  it('partial last block: request_blocks = ceil, additional uses floor', () => {
    // isl 170, bs 16: ceil = 11, floor = 10; raw = 170/16 = 10.625; 10.625 + 10 = 20.625
    const r = computeCosts(CandidateBatch.of([{}]), { isl: 170, blockSize: 16 }, D);
    expect(r.requestBlocks).toBe(11);
    expect(r.additional[0]).toBe(10);
    expect(r.logit[0]).toBe(20.625);
  });

  it('reuses the output and grows batches past their capacity', () => {
    const out = new CostBreakdown();
    const b = new CandidateBatch(2).reset(300);
    for (let i = 0; i < 300; i++) b.activeDecodeBlocks[i] = i;
    computeCosts(b, req, D, out);
    const costArray = out.cost;
    // 10 + i + 10
    expect(out.cost[299]).toBe(319);
    computeCosts(b.reset(3), req, D, out);
    expect(out.cost).toBe(costArray);
    expect(out.n).toBe(3);
    expect(out.cost[0]).toBe(20);
  });

  it('rejects bad inputs naming the field', () => {
    const c = CandidateBatch.of([{}, { activePrefillTokens: -1 }]);
    const e = thrownBy(() => computeCosts(c, req, D));
    expect(e.code).toBe('invalid_argument');
    expect(e.detail?.field).toBe('candidates[1].activePrefillTokens');
    const nan = CandidateBatch.of([{ deviceBlocks: NaN }]);
    expect(thrownBy(() => computeCosts(nan, req, D)).detail?.field).toBe('candidates[0].deviceBlocks');
    const taint = CandidateBatch.of([{ taintMultiplier: 0 }]);
    expect(thrownBy(() => computeCosts(taint, req, D)).detail?.field).toBe('candidates[0].taintMultiplier');
    expect(thrownBy(() => computeCosts(c, { isl: 1.5, blockSize: 16 }, D)).detail?.field).toBe('isl');
    expect(thrownBy(() => computeCosts(c, { isl: 10, blockSize: 0 }, D)).detail?.field).toBe('blockSize');
  });
});

describe('overrides, legacy weight, preset', () => {
  it('legacy mapping table (§8.4)', () => {
    const cur = { credit: 0.8, prefillLoadScale: 1.5 };
    // w ≠ 0 → scale = w, credit unchanged
    expect(legacyWeightMapping(2, cur)).toEqual({ credit: 0.8, prefillLoadScale: 2 });
    expect(legacyWeightMapping(0.5, cur)).toEqual({ credit: 0.8, prefillLoadScale: 0.5 });
    // w = 0 → scale 0 and credit 0
    expect(legacyWeightMapping(0, cur)).toEqual({ credit: 0, prefillLoadScale: 0 });
    expect(thrownBy(() => legacyWeightMapping(-1, cur)).detail?.field).toBe('overlap_score_weight');
  });

  it('each override field replaces the global value', () => {
    const p = applyOverrides(D, {
      overlap_score_credit: 0.25,
      prefill_load_scale: 3,
      router_temperature: 0.5,
      assume_kv_reuse: false,
      track_prefill_tokens: false,
      shared_cache_multiplier: 0.5,
    });
    expect(p).toEqual({
      ...D,
      credit: 0.25,
      prefillLoadScale: 3,
      temperature: 0.5,
      assumeKvReuse: false,
      trackPrefillTokens: false,
      sharedMultiplier: 0.5,
    });
    expect(D.credit).toBe(1);
  });

  it('absent or null fields keep the base object', () => {
    expect(applyOverrides(D, undefined)).toBe(D);
    expect(applyOverrides(D, {})).toBe(D);
    expect(applyOverrides(D, { overlap_score_credit: null, router_temperature: null })).toBe(D);
  });

  it('the legacy weight wins over prefill_load_scale; a legacy 0 also over the credit', () => {
    const a = applyOverrides(D, { prefill_load_scale: 3, overlap_score_weight: 2 });
    expect([a.prefillLoadScale, a.credit]).toEqual([2, 1]);
    const b = applyOverrides(D, { overlap_score_credit: 0.7, overlap_score_weight: 0 });
    expect([b.prefillLoadScale, b.credit]).toEqual([0, 0]);
    // a non-zero legacy weight leaves an overridden credit alone
    const c = applyOverrides(D, { overlap_score_credit: 0.7, overlap_score_weight: 4 });
    expect([c.prefillLoadScale, c.credit]).toEqual([4, 0.7]);
  });

  it('legacy 0 gives pure decode-load routing', () => {
    const r = computeCosts(example(), req, applyOverrides(D, { overlap_score_weight: 0 }));
    // prefill term 0; logits = decode + additional: 12 + 2, 4 + 10, 9 + 10
    expect([...r.logit.subarray(0, 3)]).toEqual([14, 14, 19]);
  });

  it('a bad override throws naming the field and changes nothing', () => {
    const base: CostParams = { ...D };
    const cases: [Record<string, unknown>, string][] = [
      [{ overlap_score_credit: 1.5 }, 'overlap_score_credit'],
      [{ prefill_load_scale: -1 }, 'prefill_load_scale'],
      [{ router_temperature: Infinity }, 'router_temperature'],
      [{ assume_kv_reuse: 'yes' }, 'assume_kv_reuse'],
      [{ track_prefill_tokens: 1 }, 'track_prefill_tokens'],
      [{ shared_cache_multiplier: 2 }, 'shared_cache_multiplier'],
      [{ overlap_score_weight: NaN }, 'overlap_score_weight'],
      // valid fields before an invalid one are not applied either
      [{ prefill_load_scale: 2, overlap_score_credit: -0.1 }, 'overlap_score_credit'],
    ];
    for (const [ov, field] of cases) {
      const e = thrownBy(() => applyOverrides(base, ov));
      expect(e.code).toBe('invalid_argument');
      expect(e.status).toBe(400);
      expect(e.detail?.field).toBe(field);
      expect(e.message).toContain(field);
    }
    expect(base).toEqual(D);
  });

  it('--load-aware preset: credit 0, no reuse, tracking on, keeps scale and tier weights', () => {
    const custom = {
      ...D,
      prefillLoadScale: 2,
      hostWeight: 0.5,
      trackPrefillTokens: false,
      trackActiveBlocks: false,
    };
    const p = loadAwarePreset(custom);
    expect(p).toEqual({
      ...custom,
      credit: 0,
      assumeKvReuse: false,
      trackPrefillTokens: true,
      trackActiveBlocks: true,
    });
    // Cost = scale·(apt + isl)/bs + decode + floor(isl/bs) + arw·requests
    // = 2·(32 + 160)/16 + 5 + 10 + 1·2 = 24 + 5 + 10 + 2 = 41 (device overlap earns nothing at credit 0)
    const c = CandidateBatch.of([
      { deviceBlocks: 6, activePrefillTokens: 32, activeDecodeBlocks: 5, activeRequests: 2 },
    ]);
    const r = computeCosts(c, req, { ...p, decodeActiveRequestWeight: 1 });
    expect(r.logit[0]).toBe(41);
  });

  it('validateCostParams names the field', () => {
    expect(validateCostParams({ ...D })).toEqual(D);
    expect(thrownBy(() => validateCostParams({ ...D, hostWeight: 1.1 })).detail?.field).toBe('hostWeight');
    expect(thrownBy(() => validateCostParams({ ...D, creditDecay: -1 })).detail?.field).toBe('creditDecay');
  });
});
