/**
 * The KV cost model (docs/protocol.md §8.3–§8.5, §8.7): parameters, per-request overrides, the legacy
 * weight mapping, the `--load-aware` preset and the per-candidate cost terms.
 *
 * Candidates travel as a struct of typed arrays (`CandidateBatch`) and results land in a reusable
 * `CostBreakdown`, so scoring up to 256 candidates per request allocates nothing once warm.
 */
import type { WorkerWithDpRank } from '@kvrouter/protocols';
import { bool, finiteNonNeg, invalid, nonNegInt, posInt, unitInterval } from './validate.js';

/** `--router-policy`: `dynamo` = the §8.3 cost; `ttft` = predicted time to first token (`ttft.ts`). */
export const COST_POLICIES = ['dynamo', 'ttft'] as const;
export type CostPolicy = (typeof COST_POLICIES)[number];

export interface CostParams {
  /**
   * Credit per device-cached prefix block (`--router-kv-overlap-score-credit`, 0..1 on the flag;
   * the `--agentic` preset sets 2, so the cost model accepts any finite value >= 0).
   */
  credit: number;
  /** ≥ 0; shrinks device credit on candidates busier in prefill than the least-loaded one. */
  creditDecay: number;
  /** ≥ 0; multiplies the credit-adjusted prompt-side load. */
  prefillLoadScale: number;
  /** 0..1; credit per host-tier block beyond the device prefix. */
  hostWeight: number;
  /** 0..1; credit per disk/external-tier block beyond the host prefix. */
  diskWeight: number;
  /** 0..1; credit per shared-cache hit beyond the device prefix. */
  sharedMultiplier: number;
  /** ≥ 0; block-equivalent cost per active request. */
  decodeActiveRequestWeight: number;
  /** ≥ 0; 0 = deterministic argmin (§8.6). */
  temperature: number;
  trackPrefillTokens: boolean;
  trackActiveBlocks: boolean;
  /**
   * Not a cost term: consumed when booking (§9.2). Kept here because `RouterConfigOverride`
   * overrides it per request together with the cost fields.
   */
  assumeKvReuse: boolean;
  /** `--router-policy` (default `dynamo`). */
  policy?: CostPolicy;
  /** ttft policy: κ (`--router-ttft-decode-pressure`). */
  ttftDecodePressure?: number;
  /** ttft policy: λ (`--router-ttft-work-weight`). */
  ttftWorkWeight?: number;
  /** ttft policy: scale of the per-pass decode step (`--router-ttft-decode-step`). */
  ttftDecodeStep?: number;
  /** ttft policy: weight of recomputing a cold prefix held elsewhere (`--router-ttft-duplicate-weight`). */
  ttftDuplicateWeight?: number;
  /**
   * dynamo policy with predict-on-route (§7.6): the part of a rank's booked prefill that computes
   * this request's own predicted prefix blocks is not counted against it (bursts of siblings share).
   */
  siblingShare?: boolean;
}

/** §8.4 defaults (no shared cache configured). */
export const DEFAULT_COST_PARAMS: Readonly<CostParams> = Object.freeze({
  credit: 1,
  creditDecay: 0,
  prefillLoadScale: 1,
  hostWeight: 0.75,
  diskWeight: 0.25,
  sharedMultiplier: 0,
  decodeActiveRequestWeight: 0,
  temperature: 0,
  trackPrefillTokens: true,
  trackActiveBlocks: true,
  assumeKvReuse: true,
});

/** Throws a KvrError naming the first out-of-range field. */
export function validateCostParams(p: CostParams): CostParams {
  finiteNonNeg('credit', p.credit);
  finiteNonNeg('creditDecay', p.creditDecay);
  finiteNonNeg('prefillLoadScale', p.prefillLoadScale);
  unitInterval('hostWeight', p.hostWeight);
  unitInterval('diskWeight', p.diskWeight);
  unitInterval('sharedMultiplier', p.sharedMultiplier);
  finiteNonNeg('decodeActiveRequestWeight', p.decodeActiveRequestWeight);
  finiteNonNeg('temperature', p.temperature);
  bool('trackPrefillTokens', p.trackPrefillTokens);
  bool('trackActiveBlocks', p.trackActiveBlocks);
  bool('assumeKvReuse', p.assumeKvReuse);
  if (p.policy !== undefined && !COST_POLICIES.includes(p.policy))
    throw invalid('policy', `must be one of ${COST_POLICIES.join(', ')}`, p.policy);
  if (p.ttftDecodePressure !== undefined) finiteNonNeg('ttftDecodePressure', p.ttftDecodePressure);
  if (p.ttftWorkWeight !== undefined) finiteNonNeg('ttftWorkWeight', p.ttftWorkWeight);
  if (p.ttftDecodeStep !== undefined) finiteNonNeg('ttftDecodeStep', p.ttftDecodeStep);
  if (p.ttftDuplicateWeight !== undefined) finiteNonNeg('ttftDuplicateWeight', p.ttftDuplicateWeight);
  if (p.siblingShare !== undefined) bool('siblingShare', p.siblingShare);
  return p;
}

/** §8.7, JSON field names. `null` and absent both mean "keep the global value". */
export interface RouterConfigOverride {
  overlap_score_credit?: number | null;
  prefill_load_scale?: number | null;
  router_temperature?: number | null;
  assume_kv_reuse?: boolean | null;
  track_prefill_tokens?: boolean | null;
  shared_cache_multiplier?: number | null;
  /** Legacy; mapped per §8.4 and wins over `prefill_load_scale` (and, when 0, over the credit). */
  overlap_score_weight?: number | null;
}

/**
 * §8.4: legacy `overlap_score_weight` → (credit, prefill_load_scale). A non-zero weight becomes the
 * scale and leaves the credit alone; 0 zeroes both (pure decode-load routing, no index).
 */
export function legacyWeightMapping(
  weight: number,
  current: { credit: number; prefillLoadScale: number },
): { credit: number; prefillLoadScale: number } {
  finiteNonNeg('overlap_score_weight', weight);
  return weight === 0
    ? { credit: 0, prefillLoadScale: 0 }
    : { credit: current.credit, prefillLoadScale: weight };
}

const has = <T>(v: T | null | undefined): v is T => v !== undefined && v !== null;

/**
 * Returns `base` with the override applied (a new object; `base` when nothing is overridden).
 * Every field is checked before anything is built, so a bad override changes nothing.
 */
export function applyOverrides(
  base: Readonly<CostParams>,
  ov: RouterConfigOverride | null | undefined,
): CostParams {
  if (!ov) return base;
  if (has(ov.overlap_score_credit)) unitInterval('overlap_score_credit', ov.overlap_score_credit);
  if (has(ov.prefill_load_scale)) finiteNonNeg('prefill_load_scale', ov.prefill_load_scale);
  if (has(ov.router_temperature)) finiteNonNeg('router_temperature', ov.router_temperature);
  if (has(ov.assume_kv_reuse)) bool('assume_kv_reuse', ov.assume_kv_reuse);
  if (has(ov.track_prefill_tokens)) bool('track_prefill_tokens', ov.track_prefill_tokens);
  if (has(ov.shared_cache_multiplier)) unitInterval('shared_cache_multiplier', ov.shared_cache_multiplier);
  if (has(ov.overlap_score_weight)) finiteNonNeg('overlap_score_weight', ov.overlap_score_weight);

  if (!Object.values(ov).some(has)) return base;
  const p: CostParams = { ...base };
  if (has(ov.overlap_score_credit)) p.credit = ov.overlap_score_credit;
  if (has(ov.prefill_load_scale)) p.prefillLoadScale = ov.prefill_load_scale;
  if (has(ov.router_temperature)) p.temperature = ov.router_temperature;
  if (has(ov.assume_kv_reuse)) p.assumeKvReuse = ov.assume_kv_reuse;
  if (has(ov.track_prefill_tokens)) p.trackPrefillTokens = ov.track_prefill_tokens;
  if (has(ov.shared_cache_multiplier)) p.sharedMultiplier = ov.shared_cache_multiplier;
  // Applied last: the legacy weight wins over the new fields given in the same override (§8.4).
  if (has(ov.overlap_score_weight)) {
    const m = legacyWeightMapping(ov.overlap_score_weight, p);
    p.credit = m.credit;
    p.prefillLoadScale = m.prefillLoadScale;
  }
  return p;
}

/**
 * §8.5 on the cost-relevant fields: credit 0, no KV reuse, active-block and prefill tracking on;
 * scale and tier weights are kept. The non-cost parts of the preset (mode kv, KV events off,
 * durable/remote/shared/side indexes off) belong to the config resolver.
 */
export function loadAwarePreset(p: Readonly<CostParams>): CostParams {
  return { ...p, credit: 0, assumeKvReuse: false, trackActiveBlocks: true, trackPrefillTokens: true };
}

/**
 * Scoring inputs, one slot per eligible (worker, dp_rank). A candidate without load data is passed
 * with zero load inputs: it scores exactly like an idle rank.
 */
export class CandidateBatch {
  n = 0;
  workers: WorkerWithDpRank[] = [];
  /** §8.2 `device_blocks`: index score (max'ed with the side index by the caller). */
  deviceBlocks!: Float64Array;
  hostExtBlocks!: Float64Array;
  diskExtBlocks!: Float64Array;
  sharedBeyondBlocks!: Float64Array;
  activePrefillTokens!: Float64Array;
  activeDecodeBlocks!: Float64Array;
  activeRequests!: Float64Array;
  /** §9.1 `active_prefix_depth` of this request on the rank. */
  activePrefixDepth!: Float64Array;
  /** §13 preferred-taint multiplier; 1 when the request has no preferred taints. */
  taintMultiplier!: Float64Array;
  /** ttft policy: learned prefill rate of the rank, prompt tokens per ms; 0 = unknown (default rate). */
  prefillRate!: Float64Array;
  /** ttft policy: `total_kv_blocks` of the rank (decode pressure); 0 = unknown. */
  capacityBlocks!: Float64Array;
  /** ttft policy: learned fixed ms per prefill pass of the rank; 0 = none. */
  prefillPassMs!: Float64Array;
  /** ttft policy: prompt tokens per pass (`max_num_batched_tokens`); 0 = unbounded (one pass). */
  passTokens!: Float64Array;
  /**
   * dynamo policy with sibling sharing: prompt tokens of this request's prefix that the rank's
   * booked, not yet prefilled requests are computing (predicted blocks, §7.6); 0 otherwise.
   */
  sharedPendingTokens!: Float64Array;
  /**
   * Optional (slot, generation) of each candidate in `MultiWorkerSequences` (`slotOf` /
   * `slotGen`), so `fillLoads` need not look ranks up; −1 (the reset value) = look up.
   */
  loadSlot!: Int32Array;
  loadGen!: Uint32Array;
  private cap = 0;

  constructor(capacity = 16) {
    this.alloc(Math.max(1, capacity));
  }

  get capacity(): number {
    return this.cap;
  }

  /** Sizes the batch to `n` candidates with every input zeroed and multipliers at 1. */
  reset(n: number): this {
    nonNegInt('n', n);
    if (n > this.cap) this.alloc(Math.max(n, this.cap * 2));
    this.n = n;
    this.workers.length = n;
    for (const a of [
      this.deviceBlocks,
      this.hostExtBlocks,
      this.diskExtBlocks,
      this.sharedBeyondBlocks,
      this.activePrefillTokens,
      this.activeDecodeBlocks,
      this.activeRequests,
      this.activePrefixDepth,
      this.prefillRate,
      this.capacityBlocks,
      this.prefillPassMs,
      this.passTokens,
      this.sharedPendingTokens,
    ])
      a.fill(0, 0, n);
    this.taintMultiplier.fill(1, 0, n);
    this.loadSlot.fill(-1, 0, n);
    return this;
  }

  /** Convenience for callers off the hot path and for tests. */
  static of(rows: readonly CandidateInput[]): CandidateBatch {
    const b = new CandidateBatch(rows.length).reset(rows.length);
    rows.forEach((r, i) => {
      b.workers[i] = r.worker ?? ({ worker_id: BigInt(i), dp_rank: 0 } as WorkerWithDpRank);
      b.deviceBlocks[i] = r.deviceBlocks ?? 0;
      b.hostExtBlocks[i] = r.hostExtBlocks ?? 0;
      b.diskExtBlocks[i] = r.diskExtBlocks ?? 0;
      b.sharedBeyondBlocks[i] = r.sharedBeyondBlocks ?? 0;
      b.activePrefillTokens[i] = r.activePrefillTokens ?? 0;
      b.activeDecodeBlocks[i] = r.activeDecodeBlocks ?? 0;
      b.activeRequests[i] = r.activeRequests ?? 0;
      b.activePrefixDepth[i] = r.activePrefixDepth ?? 0;
      b.taintMultiplier[i] = r.taintMultiplier ?? 1;
      b.prefillRate[i] = r.prefillRate ?? 0;
      b.capacityBlocks[i] = r.capacityBlocks ?? 0;
      b.prefillPassMs[i] = r.prefillPassMs ?? 0;
      b.passTokens[i] = r.passTokens ?? 0;
      b.sharedPendingTokens[i] = r.sharedPendingTokens ?? 0;
    });
    return b;
  }

  private alloc(cap: number): void {
    const grow = (old: Float64Array | undefined): Float64Array => {
      const a = new Float64Array(cap);
      if (old) a.set(old.subarray(0, Math.min(old.length, cap)));
      return a;
    };
    this.deviceBlocks = grow(this.deviceBlocks);
    this.hostExtBlocks = grow(this.hostExtBlocks);
    this.diskExtBlocks = grow(this.diskExtBlocks);
    this.sharedBeyondBlocks = grow(this.sharedBeyondBlocks);
    this.activePrefillTokens = grow(this.activePrefillTokens);
    this.activeDecodeBlocks = grow(this.activeDecodeBlocks);
    this.activeRequests = grow(this.activeRequests);
    this.activePrefixDepth = grow(this.activePrefixDepth);
    this.taintMultiplier = grow(this.taintMultiplier);
    this.prefillRate = grow(this.prefillRate);
    this.capacityBlocks = grow(this.capacityBlocks);
    this.prefillPassMs = grow(this.prefillPassMs);
    this.passTokens = grow(this.passTokens);
    this.sharedPendingTokens = grow(this.sharedPendingTokens);
    const slot = new Int32Array(cap).fill(-1);
    const gen = new Uint32Array(cap);
    if (this.loadSlot) {
      slot.set(this.loadSlot.subarray(0, Math.min(this.loadSlot.length, cap)));
      gen.set(this.loadGen.subarray(0, Math.min(this.loadGen.length, cap)));
    }
    this.loadSlot = slot;
    this.loadGen = gen;
    this.cap = cap;
  }
}

export interface CandidateInput {
  worker?: WorkerWithDpRank;
  deviceBlocks?: number;
  hostExtBlocks?: number;
  diskExtBlocks?: number;
  sharedBeyondBlocks?: number;
  activePrefillTokens?: number;
  activeDecodeBlocks?: number;
  activeRequests?: number;
  activePrefixDepth?: number;
  taintMultiplier?: number;
  prefillRate?: number;
  capacityBlocks?: number;
  prefillPassMs?: number;
  passTokens?: number;
  sharedPendingTokens?: number;
}

export interface CostRequest {
  /** Prompt length in tokens. */
  isl: number;
  /** KV block size in tokens. */
  blockSize: number;
}

/** Every term of §8.3 per candidate, plus the request-wide values they used. */
export class CostBreakdown {
  n = 0;
  /** ceil(isl / bs). */
  requestBlocks = 0;
  /** Minimum active prefill tokens over the candidates (decay reference). */
  minActivePrefill = 0;
  effectiveOverlap = new Float64Array(0);
  cachedTokens = new Float64Array(0);
  rawPrefill = new Float64Array(0);
  decay = new Float64Array(0);
  creditBlocks = new Float64Array(0);
  prefillTerm = new Float64Array(0);
  decode = new Float64Array(0);
  additional = new Float64Array(0);
  activeRequestTerm = new Float64Array(0);
  logit = new Float64Array(0);
  taintMultiplier = new Float64Array(0);
  cost = new Float64Array(0);

  ensure(n: number): void {
    this.n = n;
    if (this.cost.length >= n) return;
    const cap = Math.max(n, this.cost.length * 2, 16);
    this.effectiveOverlap = new Float64Array(cap);
    this.cachedTokens = new Float64Array(cap);
    this.rawPrefill = new Float64Array(cap);
    this.decay = new Float64Array(cap);
    this.creditBlocks = new Float64Array(cap);
    this.prefillTerm = new Float64Array(cap);
    this.decode = new Float64Array(cap);
    this.additional = new Float64Array(cap);
    this.activeRequestTerm = new Float64Array(cap);
    this.logit = new Float64Array(cap);
    this.taintMultiplier = new Float64Array(cap);
    this.cost = new Float64Array(cap);
  }
}

/**
 * §8.3 for every candidate of `c`. Inputs are checked (all ≥ 0, multipliers > 0) before the first
 * output is written. `out` is reused when given.
 */
export function computeCosts(
  c: CandidateBatch,
  req: CostRequest,
  p: Readonly<CostParams>,
  out: CostBreakdown = new CostBreakdown(),
): CostBreakdown {
  const isl = nonNegInt('isl', req.isl);
  const bs = posInt('blockSize', req.blockSize);
  const n = c.n;
  const dev = c.deviceBlocks,
    host = c.hostExtBlocks,
    disk = c.diskExtBlocks,
    shared = c.sharedBeyondBlocks,
    apt = c.activePrefillTokens,
    adb = c.activeDecodeBlocks,
    areq = c.activeRequests,
    depth = c.activePrefixDepth,
    taint = c.taintMultiplier;

  let minActive = Infinity;
  for (let i = 0; i < n; i++) {
    // One combined test keeps the hot loop short; `!(x >= 0)` also catches NaN.
    if (
      !(dev[i] >= 0 && host[i] >= 0 && disk[i] >= 0 && shared[i] >= 0) ||
      !(apt[i] >= 0 && adb[i] >= 0 && areq[i] >= 0 && depth[i] >= 0) ||
      !(taint[i] > 0)
    )
      throw badCandidate(c, i);
    if (apt[i] < minActive) minActive = apt[i]!;
  }
  if (n === 0) minActive = 0;

  out.ensure(n);
  const requestBlocks = Math.ceil(isl / bs);
  const fullBlocks = Math.floor(isl / bs);
  out.requestBlocks = requestBlocks;
  out.minActivePrefill = minActive;
  const track = p.trackPrefillTokens;
  const useDecay = track && p.creditDecay !== 0;
  // isl = 0 would divide by zero; one block is the smallest meaningful request.
  const decayDen = Math.max(1, requestBlocks);
  const { credit, creditDecay, prefillLoadScale, hostWeight, diskWeight, sharedMultiplier } = p;
  const arw = p.decodeActiveRequestWeight;
  const trackBlocks = p.trackActiveBlocks;
  const share = p.siblingShare === true;
  const pend = c.sharedPendingTokens;

  const oEff = out.effectiveOverlap,
    oCached = out.cachedTokens,
    oRaw = out.rawPrefill,
    oDecay = out.decay,
    oCredit = out.creditBlocks,
    oPrefill = out.prefillTerm,
    oDecode = out.decode,
    oAdd = out.additional,
    oReq = out.activeRequestTerm,
    oLogit = out.logit,
    oTaint = out.taintMultiplier,
    oCost = out.cost;
  for (let i = 0; i < n; i++) {
    const d = dev[i];
    const hTier = hostWeight * host[i];
    const dTier = diskWeight * disk[i];
    const eff = d + hTier + dTier;
    // Sibling sharing (predict-on-route): the booked prefill that computes this prompt's own
    // predicted blocks is not held against it; the credit for those blocks then stands.
    const a = share ? Math.max(0, apt[i] - pend[i]) : apt[i];
    const raw = track ? (a + isl) / bs : 0;
    const decay = useDecay ? 1 / (1 + (creditDecay * ((a - minActive) / bs)) / decayDen) : 1;
    const creditBlocks = credit * decay * d + hTier + dTier + sharedMultiplier * shared[i];
    const prefill = prefillLoadScale * Math.max(0, raw - creditBlocks);
    const additional = trackBlocks ? Math.max(0, fullBlocks - depth[i]) : 0;
    const reqTerm = arw * areq[i];
    const decode = adb[i];
    const logit = prefill + decode + additional + reqTerm;
    const m = taint[i];
    oEff[i] = eff;
    oCached[i] = Math.round(eff * bs);
    oRaw[i] = raw;
    oDecay[i] = decay;
    oCredit[i] = creditBlocks;
    oPrefill[i] = prefill;
    oDecode[i] = decode;
    oAdd[i] = additional;
    oReq[i] = reqTerm;
    oLogit[i] = logit;
    oTaint[i] = m;
    oCost[i] = logit * m;
  }
  return out;
}

function badCandidate(c: CandidateBatch, i: number) {
  const fields: [string, number][] = [
    ['deviceBlocks', c.deviceBlocks[i]],
    ['hostExtBlocks', c.hostExtBlocks[i]],
    ['diskExtBlocks', c.diskExtBlocks[i]],
    ['sharedBeyondBlocks', c.sharedBeyondBlocks[i]],
    ['activePrefillTokens', c.activePrefillTokens[i]],
    ['activeDecodeBlocks', c.activeDecodeBlocks[i]],
    ['activeRequests', c.activeRequests[i]],
    ['activePrefixDepth', c.activePrefixDepth[i]],
  ];
  for (const [f, v] of fields) if (!(v >= 0)) return invalid(`candidates[${i}].${f}`, 'must be >= 0', v);
  return invalid(`candidates[${i}].taintMultiplier`, 'must be > 0', c.taintMultiplier[i]);
}
