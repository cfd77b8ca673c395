/**
 * The TTFT-predicting policy (`--router-policy ttft`, issue 19): each candidate's cost is the time
 * to first token the request would see there, in ms:
 *
 *   cached_i   = min(isl, bs · max(effective_overlap_i, active_prefix_depth_i))
 *   work_i     = active_prefill_tokens_i + (isl − cached_i)
 *   pressure_i = 1 + κ · min(1, active_decode_blocks_i / total_kv_blocks_i)
 *   ttft_i     = work_i / rate_i · pressure_i
 *   cost_i     = (ttft_i + λ · (isl − cached_i) / rate_i) · taint_i
 *
 * `active_prefix_depth` (blocks of this prompt booked on the rank by requests still in flight)
 * counts as cached: a sibling ahead in the rank's prefill queue computes those blocks first, so
 * this request adds no prefill work for them (its own booking then carries only the rest). The
 * rate (prompt tokens per ms) is learned per rank from observed prefill completions
 * (`PrefillRate`), seeded from the AIC predictor or `DEFAULT_PREFILL_TOKENS_PER_MS`. λ (the work
 * weight) charges the prefill work a choice adds to the fleet: without it two equally fast
 * choices where one recomputes a whole prompt would tie. Pick: the minimum cost; exact ties go to
 * the longer cached prefix, then reservoir sampling (`pickTtft`).
 */
import type { CandidateBatch, CostBreakdown, CostRequest } from './cost.js';
import { argminReservoir, type Uniform } from './select.js';
import { finiteNonNeg, invalid, nonNegInt, posInt } from './validate.js';

/** Prompt tokens per ms assumed before any completion was seen and without an AIC seed. */
export const DEFAULT_PREFILL_TOKENS_PER_MS = 40;
/** Weight of a rank's seed rate, in prompt tokens: one typical pass budget (at most; the router caps it at the rank's). */
export const PREFILL_RATE_SEED_TOKENS = 8192;
/**
 * Decode pressure κ: a decode step over a full KV cache costs about a fifth of a full prefill
 * pass (§17 polynomials: 34 ms vs 169 ms for 8192 tokens), so prefill slows by up to 25 %.
 */
export const DEFAULT_DECODE_PRESSURE = 0.25;
/** λ: weight of the prefill work a choice adds to the fleet, relative to the request's own TTFT. */
export const DEFAULT_TTFT_WORK_WEIGHT = 0.5;

/** `1 + κ · min(1, active decode blocks / total KV blocks)`; 1 when the capacity is unknown (0). */
export function decodePressure(kappa: number, decodeBlocks: number, capacityBlocks: number): number {
  return capacityBlocks > 0 ? 1 + kappa * Math.min(1, decodeBlocks / capacityBlocks) : 1;
}

export interface TtftParams {
  decodePressure: number;
  workWeight: number;
  /** Used for a candidate whose `prefillRate` is 0 (unknown). */
  defaultRate: number;
}

export const DEFAULT_TTFT_PARAMS: Readonly<TtftParams> = Object.freeze({
  decodePressure: DEFAULT_DECODE_PRESSURE,
  workWeight: DEFAULT_TTFT_WORK_WEIGHT,
  defaultRate: DEFAULT_PREFILL_TOKENS_PER_MS,
});

/**
 * Fills `out` for the ttft policy. Reads `c.prefillRate` (0 = default rate) and `c.capacityBlocks`
 * (0 = unknown: no decode pressure) besides the usual inputs. The §8.3 arrays of `out` are filled
 * with what this policy used: `cachedTokens` (what the booking assumes), `rawPrefill` (work in
 * blocks), `prefillTerm` (predicted TTFT ms), `decode` (active decode blocks), `additional` 0,
 * `logit` = cost before the taint multiplier.
 */
export function computeTtftCosts(
  c: CandidateBatch,
  req: CostRequest,
  tp: Readonly<TtftParams>,
  trackPrefillTokens: boolean,
  hostWeight: number,
  diskWeight: number,
  out: CostBreakdown,
): CostBreakdown {
  const isl = nonNegInt('isl', req.isl);
  const bs = posInt('blockSize', req.blockSize);
  finiteNonNeg('decodePressure', tp.decodePressure);
  finiteNonNeg('workWeight', tp.workWeight);
  const n = c.n;
  out.ensure(n);
  out.requestBlocks = Math.ceil(isl / bs);
  let minActive = Infinity;
  for (let i = 0; i < n; i++) {
    const a = c.activePrefillTokens[i];
    if (
      !(c.deviceBlocks[i] >= 0 && a >= 0 && c.activeDecodeBlocks[i] >= 0 && c.activePrefixDepth[i] >= 0) ||
      !(c.prefillRate[i] >= 0 && c.capacityBlocks[i] >= 0 && c.taintMultiplier[i] > 0)
    )
      throw invalid(`candidates[${i}]`, 'loads, overlap, rate and capacity must be >= 0, taint > 0');
    if (a < minActive) minActive = a;
  }
  out.minActivePrefill = n === 0 ? 0 : minActive;
  for (let i = 0; i < n; i++) {
    const eff = c.deviceBlocks[i] + hostWeight * c.hostExtBlocks[i] + diskWeight * c.diskExtBlocks[i];
    const cached = Math.min(isl, Math.round(bs * Math.max(eff, c.activePrefixDepth[i])));
    const uncached = isl - cached;
    const queued = trackPrefillTokens ? c.activePrefillTokens[i] : 0;
    const rate = c.prefillRate[i] > 0 ? c.prefillRate[i] : tp.defaultRate;
    const ttft =
      ((queued + uncached) / rate) *
      decodePressure(tp.decodePressure, c.activeDecodeBlocks[i], c.capacityBlocks[i]);
    const logit = ttft + (tp.workWeight * uncached) / rate;
    out.effectiveOverlap[i] = eff;
    out.cachedTokens[i] = cached;
    out.rawPrefill[i] = (queued + uncached) / bs;
    out.decay[i] = 1;
    out.creditBlocks[i] = cached / bs;
    out.prefillTerm[i] = ttft;
    out.decode[i] = c.activeDecodeBlocks[i];
    out.additional[i] = 0;
    out.activeRequestTerm[i] = 0;
    out.logit[i] = logit;
    out.taintMultiplier[i] = c.taintMultiplier[i];
    out.cost[i] = logit * c.taintMultiplier[i];
  }
  return out;
}

/**
 * Minimum cost; among exact ties the longest cached prefix; remaining ties by reservoir sampling
 * (one draw per tie after the first, as `argminReservoir`).
 */
export function pickTtft(
  cost: ArrayLike<number>,
  cached: ArrayLike<number>,
  n: number,
  rand: Uniform,
): number {
  let min = Infinity;
  for (let i = 0; i < n; i++) if (cost[i] < min) min = cost[i];
  let best = -Infinity;
  for (let i = 0; i < n; i++) if (cost[i] === min && cached[i] > best) best = cached[i];
  skip.length = n;
  for (let i = 0; i < n; i++) skip[i] = !(cost[i] === min && cached[i] === best);
  return argminReservoir(cost, n, rand, skip);
}

const skip: boolean[] = [];

/**
 * One rank's learned prefill rate (prompt tokens per ms): exponentially weighted sums of
 * completed prefill tokens and the time they took. A completion of `tokens` booked prefill tokens
 * is timed from the later of its booking and the rank's previous completion (the engine works
 * through its prefill queue roughly in order), and normalised by the decode pressure at that
 * moment so the rate is the engine's bare prefill speed. Completions with no prefill work (full
 * cache hits) teach nothing and are ignored.
 */
export class PrefillRate {
  private tok: number;
  private ms: number;
  private lastDone = -Infinity;
  samples = 0;

  /** `seedRate` tokens/ms carried with the weight of `seedTokens` tokens. */
  constructor(
    seedRate: number = DEFAULT_PREFILL_TOKENS_PER_MS,
    seedTokens = PREFILL_RATE_SEED_TOKENS,
    private readonly keep = 0.9,
  ) {
    this.tok = seedTokens;
    this.ms = seedTokens / seedRate;
  }

  get rate(): number {
    return this.tok / this.ms;
  }

  /** A prefill of `tokens` (booked at `bookedAt`) produced its first token at `now`; `pressure` = 1 + κ·u then. */
  observe(tokens: number, bookedAt: number, now: number, pressure = 1): void {
    const start = Math.max(bookedAt, this.lastDone);
    this.lastDone = now;
    const dt = now - start;
    if (!(tokens > 0) || !(dt > 0) || !Number.isFinite(dt)) return;
    this.tok = this.keep * this.tok + tokens * pressure;
    this.ms = this.keep * this.ms + dt;
    this.samples++;
  }
}
