/**
 * The TTFT-predicting policy (`--router-policy ttft`, issue 19): each candidate's cost is the time
 * to first token the request would see there, in ms:
 *
 *   cached_i   = min(isl, bs · max(effective_overlap_i, active_prefix_depth_i))
 *   Q_i, U_i   = active_prefill_tokens_i (queued), isl − cached_i (this request's own work)
 *   passes_i   = ceil(Q_i / B_i) + ceil(U_i / B_i)      (B = tokens per pass; a prompt cannot join a running pass)
 *   pressure_i = 1 + κ · min(1, active_decode_blocks_i / total_kv_blocks_i)
 *   ttft_i     = (passes_i · o_i + (Q_i + U_i) / rate_i) · pressure_i
 *   own_i      = ceil(U_i / B_i) · o_i + U_i / rate_i  (the prefill this choice adds to the fleet)
 *   λ_eff      = λ · b / (1 − b + 1/n)                  (b = share of the n candidates with queued prefill)
 *   λ_i        = max(λ_eff, λ) on a rank with queued prefill and in-flight requests sharing this
 *                prompt's prefix (a hot prefix's holder), else λ_eff
 *   cost_i     = (ttft_i + λ_i · own_i + λ_eff · w_dup · dup_i / rate_i) · taint_i
 *   (ttft_i also carries the decode step per pass, and dup_i the cold prefix it would recompute:
 *   see the code and packages/router/README.md)
 *
 * `active_prefix_depth` (blocks of this prompt booked on the rank by requests still in flight)
 * counts as cached: a sibling ahead in the rank's prefill queue computes those blocks first, so
 * this request adds no prefill work for them (its own booking then carries only the rest). `o`
 * (ms per pass) and `rate` (prompt tokens per ms) are learned per rank from observed prefill
 * completions (`PrefillRate`), pooled with the fleet's, seeded from the AIC predictor or
 * `DEFAULT_PREFILL_TOKENS_PER_MS`. λ charges the prefill work a choice adds to the fleet, scaled by
 * how busy the fleet is: work added while other ranks sit idle delays nobody, work added when
 * every rank has a queue delays whoever arrives next (the busy/idle ratio b / (1 − b) grows like
 * the expected queue of an M/M/1 server at utilisation b; the 1/n keeps it finite). Pick
 * (`pickTtft`): the candidates within `TTFT_TIE_TOLERANCE` of the minimum cost, whose predicted
 * TTFT is also within it of the cheapest one's, are ties (the prediction is no finer than that);
 * among them the longest cached prefix, then the rank with the least recent cache inflow (booked
 * uncached tokens, half-life `INFLOW_HALF_LIFE_MS`), then reservoir sampling.
 */
import type { CandidateBatch, CostBreakdown, CostRequest } from './cost.js';
import { argminReservoir, checkSample, type Uniform } from './select.js';
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
/** Scale of the per-pass decode step (`decodeStepMs`) in the predicted TTFT. */
export const DEFAULT_TTFT_DECODE_STEP = 1;
/** Extra weight (× λ_eff) of recomputing a cold prefix another rank holds. */
export const DEFAULT_TTFT_DUPLICATE_WEIGHT = 3;
/** λ: weight of the prefill work a choice adds to the fleet (scaled by the busy share, see above). */
export const DEFAULT_TTFT_WORK_WEIGHT = 1;
/** Relative cost difference within which candidates are ties (the prediction's resolution). */
export const TTFT_TIE_TOLERANCE = 0.1;
/** Half-life of a rank's recent cache inflow (the tie break after the cached prefix), ms. */
export const INFLOW_HALF_LIFE_MS = 60_000;
/** Share of an observed prefill time kept as bare prefill however many decode steps it held. */
export const MIN_BARE_SHARE = 0.1;
/** Weight of the fleet's prefill model in a rank's, in completions (see `PrefillRate`). */
export const POOL_WEIGHT = 4;

/** `1 + κ · min(1, active decode blocks / total KV blocks)`; 1 when the capacity is unknown (0). */
export function decodePressure(kappa: number, decodeBlocks: number, capacityBlocks: number): number {
  return capacityBlocks > 0 ? 1 + kappa * Math.min(1, decodeBlocks / capacityBlocks) : 1;
}

/**
 * One decode step of an engine at KV occupancy `u` (0..1), ms: the default engine model's (§17)
 * polynomial, `max(1, −25.74·u² + 54.01·u + 5.74)` (5.7 ms empty, 34 ms full). Every pass of a rank
 * with running requests carries one such step besides its prefill chunk, so a queue of `k` passes
 * on a decoding rank takes `k` steps longer than on an idle one.
 */
export function decodeStepMs(u: number): number {
  const x = Math.min(1, Math.max(0, u));
  return Math.max(1, -25.74 * x * x + 54.01 * x + 5.74);
}

export interface TtftParams {
  decodePressure: number;
  /**
   * Scale of the per-pass decode step (`decodeStepMs`) on a rank with running requests; 0 = none
   * (the prediction of the first TTFT policy).
   */
  decodeStep: number;
  /** Extra weight (× λ_eff) of recomputing a cold prefix another rank holds; 0 = none. */
  duplicateWeight: number;
  workWeight: number;
  /** Used for a candidate whose `prefillRate` is 0 (unknown). */
  defaultRate: number;
}

export const DEFAULT_TTFT_PARAMS: Readonly<TtftParams> = Object.freeze({
  decodePressure: DEFAULT_DECODE_PRESSURE,
  decodeStep: DEFAULT_TTFT_DECODE_STEP,
  duplicateWeight: DEFAULT_TTFT_DUPLICATE_WEIGHT,
  workWeight: DEFAULT_TTFT_WORK_WEIGHT,
  defaultRate: DEFAULT_PREFILL_TOKENS_PER_MS,
});

/**
 * Fills `out` for the ttft policy. Reads `c.prefillRate` (0 = default rate), `c.prefillPassMs`
 * (0 = none), `c.passTokens` (0 = unbounded) and `c.capacityBlocks` (0 = unknown: no decode
 * pressure) besides the usual inputs. The §8.3 arrays of `out` are filled
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
      !(c.prefillRate[i] >= 0 && c.capacityBlocks[i] >= 0 && c.taintMultiplier[i] > 0) ||
      !(c.prefillPassMs[i] >= 0 && c.passTokens[i] >= 0)
    )
      throw invalid(
        `candidates[${i}]`,
        'loads, overlap, rate, pass time, pass tokens and capacity must be >= 0, taint > 0',
      );
    if (a < minActive) minActive = a;
  }
  out.minActivePrefill = n === 0 ? 0 : minActive;
  let busy = 0;
  if (trackPrefillTokens) for (let i = 0; i < n; i++) if (c.activePrefillTokens[i] > 0) busy++;
  const lambda = n === 0 ? 0 : (tp.workWeight * (busy / n)) / (1 - busy / n + 1 / n);
  // The longest cached prefix anywhere (M) and the part of it in-flight requests share (H).
  let longest = 0;
  let hot = 0;
  for (let i = 0; i < n; i++) {
    const eff = c.deviceBlocks[i] + hostWeight * c.hostExtBlocks[i] + diskWeight * c.diskExtBlocks[i];
    longest = Math.max(longest, Math.min(isl, Math.round(bs * Math.max(eff, c.activePrefixDepth[i]))));
    hot = Math.max(hot, c.activePrefixDepth[i]);
  }
  hot = Math.min(longest, bs * hot);
  const dupWeight = lambda * tp.duplicateWeight;
  for (let i = 0; i < n; i++) {
    const eff = c.deviceBlocks[i] + hostWeight * c.hostExtBlocks[i] + diskWeight * c.diskExtBlocks[i];
    const cached = Math.min(isl, Math.round(bs * Math.max(eff, c.activePrefixDepth[i])));
    const uncached = isl - cached;
    const queued = trackPrefillTokens ? c.activePrefillTokens[i] : 0;
    const rate = c.prefillRate[i] > 0 ? c.prefillRate[i] : tp.defaultRate;
    const passMs = c.prefillPassMs[i];
    const passTok = c.passTokens[i] > 0 ? c.passTokens[i] : Infinity;
    const ownPasses = Math.ceil(uncached / passTok);
    const own = ownPasses * passMs + uncached / rate;
    // A rank with running requests decodes in every pass: each pass of the queue and of this
    // prompt carries one step, and a prompt arriving mid-step waits half a step on average.
    const step =
      tp.decodeStep > 0 && c.activeRequests[i] > 0 && c.capacityBlocks[i] > 0
        ? tp.decodeStep * decodeStepMs(c.activeDecodeBlocks[i] / c.capacityBlocks[i])
        : 0;
    const queuePasses = Math.ceil(queued / passTok);
    const ttft =
      ((queuePasses === 0 ? step / 2 : 0) +
        queuePasses * (passMs + step) +
        queued / rate +
        own +
        ownPasses * step) *
      decodePressure(tp.decodePressure, c.activeDecodeBlocks[i], c.capacityBlocks[i]);
    // Recomputing a prefix that another rank holds and no request in flight shares leaves a
    // second copy nobody else reads: charged again, on top of the work.
    const dup = Math.max(0, longest - Math.max(cached, hot));
    // A rank whose queued prefill shares this prompt's prefix is where the next requests with that
    // prefix will queue, however idle the other ranks are: its added work is weighed at λ itself.
    const lam = queued > 0 && c.activePrefixDepth[i] > 0 ? Math.max(lambda, tp.workWeight) : lambda;
    const logit = ttft + lam * own + dupWeight * (dup / rate);
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
 * Ties are the candidates the prediction cannot tell apart: cost within `tolerance` (relative) of
 * the minimum and, with `ttft`, predicted TTFT within `tolerance` of the cheapest candidate's (so
 * a work-weighted cost never lets a much slower holder count as a tie). Among them the longest
 * cached prefix, then (with `inflow`) the least recent cache inflow, then reservoir sampling (one
 * draw per tie after the first, as `argminReservoir`; with a tolerance the draw is uniform over
 * the remaining ties, whose costs differ only within it).
 */
export function pickTtft(
  cost: ArrayLike<number>,
  cached: ArrayLike<number>,
  n: number,
  rand: Uniform,
  tolerance = 0,
  inflow?: ArrayLike<number>,
  ttft?: ArrayLike<number>,
): number {
  finiteNonNeg('tolerance', tolerance);
  let min = Infinity;
  let at = -1;
  for (let i = 0; i < n; i++)
    if (cost[i] < min) {
      min = cost[i];
      at = i;
    }
  const lim = min + Math.abs(min) * tolerance;
  const tLim = ttft === undefined || at < 0 ? Infinity : ttft[at] + Math.abs(ttft[at]) * tolerance;
  const tie = (i: number): boolean => cost[i] <= lim && (ttft === undefined || ttft[i] <= tLim);
  let best = -Infinity;
  for (let i = 0; i < n; i++) if (tie(i) && cached[i] > best) best = cached[i];
  skip.length = n;
  for (let i = 0; i < n; i++) skip[i] = !(tie(i) && cached[i] === best);
  if (inflow !== undefined) {
    let lo = Infinity;
    for (let i = 0; i < n; i++) if (!skip[i] && inflow[i] < lo) lo = inflow[i];
    for (let i = 0; i < n; i++) if (!skip[i] && inflow[i] > lo) skip[i] = true;
  }
  if (tolerance === 0) return argminReservoir(cost, n, rand, skip);
  let seen = 0;
  let pick = -1;
  for (let i = 0; i < n; i++) {
    if (skip[i]) continue;
    seen++;
    if (seen === 1 || checkSample(rand()) * seen < 1) pick = i;
  }
  return pick;
}

const skip: boolean[] = [];

/**
 * One rank's learned prefill time: `ms(x) = ceil(x / passTokens) · passMs + x / rate` for `x`
 * prompt tokens on an idle rank (an engine computes at most one token budget per pass, and every
 * pass costs a fixed time besides the per-token work). Both parameters are a least-squares fit
 * over exponentially weighted completions (weight `keep` per newer completion): a completion of
 * `tokens` booked prefill tokens is timed from the later of its booking and the rank's previous
 * completion (the engine works through its prefill queue roughly in order) and divided by the
 * decode pressure at that moment, so the model is the engine's bare prefill speed. The seed
 * enters as two pseudo-completions on the seed model (a full pass and an eighth of one, each of
 * weight `seedWeight`) that fade like any other. A fit with a negative pass time is refitted
 * through the origin (pass time 0); a degenerate one keeps the previous parameters. Completions
 * with no prefill work (full cache hits) teach nothing.
 *
 * With a `pool` (the fleet's model, fed every rank's completions) the rank predicts with its own
 * fit and the pool's, weighted by its decayed completion count against `POOL_WEIGHT`: a rank
 * that has served nothing yet predicts like the fleet, not like the seed.
 *
 * Why two parameters and a pool: a rate alone, learned from whatever mix of short and long
 * prompts a rank happened to serve, differs between identical ranks (a 100-token pass is mostly
 * fixed cost); the ranks that looked fastest then took every request that fitted nowhere better,
 * overflowed their caches (evicted before reuse), and a rank that had seen nothing kept the
 * seed's guess and could be starved.
 *
 * The same object keeps the rank's recent cache inflow (`booked`, `inflow`), the tie break.
 */
export class PrefillRate {
  // Weighted sums over completions of n = passes, x = tokens, t = bare ms.
  private snn = 0;
  private snx = 0;
  private sxx = 0;
  private snt = 0;
  private sxt = 0;
  private lastDone = -Infinity;
  private o: number;
  private s: number;
  /** Decayed count of the completions learned (the seed's pseudo-completions excluded). */
  private own = 0;
  private inTok = 0;
  private inAt = 0;
  samples = 0;

  /** Seed: `seedRate` tokens/ms beyond a fixed `seedPassMs` per pass. */
  constructor(
    seedRate: number = DEFAULT_PREFILL_TOKENS_PER_MS,
    readonly passTokens = PREFILL_RATE_SEED_TOKENS,
    private readonly keep = 0.9,
    seedPassMs = 0,
    private readonly pool?: PrefillRate,
    seedWeight = 1,
  ) {
    if (!(seedRate > 0 && seedRate < Infinity)) throw invalid('seedRate', 'must be a finite number > 0');
    if (!(passTokens > 0 && passTokens < Infinity))
      throw invalid('passTokens', 'must be a finite number > 0');
    finiteNonNeg('seedPassMs', seedPassMs);
    finiteNonNeg('seedWeight', seedWeight);
    this.o = seedPassMs;
    this.s = 1 / seedRate;
    for (const x of [passTokens, passTokens / 8]) this.add(seedWeight, 1, x, seedPassMs + x / seedRate);
  }

  /** Prompt tokens per ms of the per-token part. */
  get rate(): number {
    return 1 / this.blend(this.s, this.pool?.s);
  }

  /** Fixed ms per pass. */
  get passMs(): number {
    return this.blend(this.o, this.pool?.o);
  }

  /** Predicted ms to prefill `tokens` on an idle rank (no decode pressure). */
  ms(tokens: number): number {
    return tokens > 0 ? Math.ceil(tokens / this.passTokens) * this.passMs + tokens / this.rate : 0;
  }

  /** Tokens per ms over one full pass: how fast a long queue drains. */
  get passRate(): number {
    return this.passTokens / this.ms(this.passTokens);
  }

  /**
   * A prefill of `tokens` (booked at `bookedAt`) produced its first token at `now`; `pressure` =
   * 1 + κ·u then; `stepMs` = the decode step each of its passes carried (0 = none).
   */
  observe(tokens: number, bookedAt: number, now: number, pressure = 1, stepMs = 0): void {
    const start = Math.max(bookedAt, this.lastDone);
    this.lastDone = now;
    const dt = now - start;
    if (!(tokens > 0) || !(dt > 0) || !Number.isFinite(dt) || !(pressure > 0) || !(stepMs >= 0)) return;
    const n = Math.ceil(tokens / this.passTokens);
    // Each of the n passes carried a decode step (and a prompt that found no prefill ahead of it
    // waited half of one, as `computeTtftCosts` predicts); what is left is the bare prefill.
    const steps = (n + (start === bookedAt ? 0.5 : 0)) * stepMs;
    const bare = Math.max(dt / pressure - steps, MIN_BARE_SHARE * (dt / pressure));
    this.learn(n, tokens, bare);
    this.pool?.learn(n, tokens, bare);
  }

  /** One completion of `n` passes and `x` tokens that took `t` bare ms. */
  learn(n: number, x: number, t: number): void {
    const k = this.keep;
    this.snn *= k;
    this.snx *= k;
    this.sxx *= k;
    this.snt *= k;
    this.sxt *= k;
    this.own = k * this.own + 1;
    this.add(1, n, x, t);
    this.samples++;
    this.fit();
  }

  /** Uncached prompt tokens booked on the rank, decayed with a half-life of `INFLOW_HALF_LIFE_MS`. */
  inflow(now: number): number {
    return this.inTok * Math.pow(0.5, Math.max(0, now - this.inAt) / INFLOW_HALF_LIFE_MS);
  }

  /** `tokens` uncached prompt tokens were booked on the rank at `now`. */
  booked(tokens: number, now: number): void {
    this.inTok = this.inflow(now) + tokens;
    this.inAt = Math.max(now, this.inAt);
  }

  private blend(mine: number, pooled: number | undefined): number {
    return pooled === undefined ? mine : (this.own * mine + POOL_WEIGHT * pooled) / (this.own + POOL_WEIGHT);
  }

  private add(w: number, n: number, x: number, t: number): void {
    this.snn += w * n * n;
    this.snx += w * n * x;
    this.sxx += w * x * x;
    this.snt += w * n * t;
    this.sxt += w * x * t;
  }

  private fit(): void {
    const det = this.snn * this.sxx - this.snx * this.snx;
    if (det > 1e-9 * this.snn * this.sxx) {
      const o = (this.snt * this.sxx - this.snx * this.sxt) / det;
      const s = (this.snn * this.sxt - this.snx * this.snt) / det;
      if (o >= 0 && s > 0) {
        this.o = o;
        this.s = s;
        return;
      }
    }
    const s = this.sxt / this.sxx;
    if (s > 0) {
      this.o = 0;
      this.s = s;
    }
  }
}
