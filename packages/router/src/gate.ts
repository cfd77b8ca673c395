/**
 * The admission gate of kv mode (§8.1–§8.4, §10, §11): filters → load snapshot → overlaps →
 * park check → (overlap refresh) → cost → pick. It returns a verdict and changes no routing state:
 * no booking, no live entry, no queue, index, session or timer change. Its only writes are the
 * per-router scratch (candidate batch, cost breakdown, candidate and busy epoch marks), each
 * checked rank's busy reading of the router's own tracker (§11; a function of the tracker at
 * `now`), and the request's own refreshed overlap. Booking happens in `booking.ts`, synchronously
 * after the verdict.
 */
import {
  CandidateBatch,
  CostBreakdown,
  DEFAULT_DECODE_PRESSURE,
  DEFAULT_PREFILL_TOKENS_PER_MS,
  DEFAULT_TTFT_DECODE_STEP,
  DEFAULT_TTFT_DUPLICATE_WEIGHT,
  DEFAULT_TTFT_WORK_WEIGHT,
  PREFILL_RATE_SEED_TOKENS,
  PrefillRate,
  TTFT_TIE_TOLERANCE,
  allWorkersBusy,
  computeCosts,
  computeTtftCosts,
  pickTtft,
  noEligibleWorkers,
  pickIndex,
  pinnedWorkerBusy,
  preferredTaintMultiplier,
  type BusyThresholds,
  type MultiWorkerSequences,
} from '@kvrouter/core-cost';
import { hasAll, type Pending } from './intent.js';
import { anyThreshold, type ResolvedOptions } from './options.js';
import type { OverlapSource } from './overlap.js';
import type { ReasonCode } from './types.js';
import type { RankEntry, WorkerEntry, WorkerSet } from './workers.js';

/** The gate's answer when the request may go now (one object per gate, overwritten per call). */
export interface Admission {
  /** Candidates after the filters (indexes into `batch` / `out`). */
  n: number;
  idx: number;
  chosen: RankEntry;
  reason: ReasonCode;
  /** Device-overlap blocks and cached tokens of the chosen rank. */
  overlap: number;
  cached: number;
  busyFiltered: number;
}

export type Verdict = Admission | 'park' | 'unknown_pin';

/** Learned rates kept beyond twice the live ranks before those of departed ranks are dropped. */
const RATES_SLACK = 16;

export class AdmissionGate {
  /** Scoring scratch, reused by every decision (the gate is synchronous). */
  readonly batch = new CandidateBatch(64);
  readonly out = new CostBreakdown();
  private cand: RankEntry[] = [];
  private epoch = 0;
  private thresholds: BusyThresholds;
  private busyOn: boolean;
  /**
   * ttft policy: learned prefill rate per rank (rank key), fed by `Bookings.markPrefillCompleted`;
   * departed ranks' entries are dropped by `rateOf` once the map outgrows the live ranks.
   */
  readonly rates = new Map<string, PrefillRate>();
  /** ttft policy: the fleet's prefill model per token budget (`PrefillRate`'s pool). */
  private readonly pools = new Map<number, PrefillRate>();
  private inflow = new Float64Array(64);
  private readonly verdict: Admission = {
    n: 0,
    idx: 0,
    chosen: null as unknown as RankEntry,
    reason: 'kv_argmin',
    overlap: 0,
    cached: 0,
    busyFiltered: 0,
  };

  constructor(
    private readonly o: ResolvedOptions,
    private readonly workers: WorkerSet,
    private readonly seqs: MultiWorkerSequences,
    private readonly overlap: OverlapSource,
    private readonly report: (e: unknown, context: string) => void,
  ) {
    this.thresholds = o.thresholds;
    this.busyOn = anyThreshold(o.thresholds);
  }

  get busyThresholds(): BusyThresholds {
    return this.thresholds;
  }

  setBusyThresholds(t: BusyThresholds): void {
    this.thresholds = t;
    this.busyOn = anyThreshold(t);
  }

  /** Throws the §8.1 errors; `park` when every candidate is over the queue threshold (§10). */
  evaluate(p: Pending, now: number): Verdict {
    const pin = p.where.pin;
    let pinRank: RankEntry | undefined;
    if (pin) {
      const w = this.workers.get(pin.workerId);
      if (!w) return 'unknown_pin';
      pinRank = this.workers.rank(pin.workerId, pin.dpRank ?? w.dpStart);
      if (!pinRank) throw noEligibleWorkers();
    }
    const busyFiltered = this.filter(p, pinRank, now);
    const n = this.cand.length;
    const b = this.batch;
    const cand = this.cand;
    this.seqs.fillLoads(b, p.prompt.seq, now);
    this.fillOverlaps(p, n);
    const preferred = p.where.preferred;
    if (preferred) {
      for (let i = 0; i < n; i++) {
        let sum = 0;
        for (const [t, wgt] of preferred) if (cand[i].owner.taints.has(t)) sum += wgt;
        b.taintMultiplier[i] = preferredTaintMultiplier(sum);
      }
    }

    const threshold = this.o.queueThreshold;
    if (threshold !== null && !p.intent.queryOnly) {
      let parked = true;
      for (let i = 0; i < n; i++) {
        if (!(b.activePrefillTokens[i] > threshold * cand[i].owner.maxNumBatchedTokens)) {
          parked = false;
          break;
        }
      }
      if (parked) return 'park';
    }

    const wait = p.wait;
    const refreshMs = this.o.refreshMs;
    if (wait !== null && !wait.refreshed && refreshMs > 0 && now - wait.queuedAt > refreshMs) {
      wait.refreshed = true;
      try {
        p.prompt.scores = this.overlap.find(p.prompt.seq);
        this.fillOverlaps(p, n);
      } catch (e) {
        // §10: on failure the overlaps from arrival stay.
        this.report(e, 'overlap refresh');
      }
    }

    const out = this.out;
    const params = p.intent.params;
    const req = { isl: p.intent.isl, blockSize: this.o.blockSize };
    const ttft = params.policy === 'ttft';
    if (ttft) {
      for (let i = 0; i < n; i++) {
        const m = this.rateOf(cand[i]);
        b.prefillRate[i] = m.rate;
        b.prefillPassMs[i] = m.passMs;
        b.passTokens[i] = m.passTokens;
        b.capacityBlocks[i] = cand[i].owner.totalKvBlocks ?? 0;
        // The oldest queued prompt is being prefilled: it drains at the rank's learned pass throughput.
        b.activePrefillTokens[i] = this.seqs.prefillAtRate(cand[i].worker, now, m.passRate);
      }
      computeTtftCosts(
        b,
        req,
        {
          decodePressure: params.ttftDecodePressure ?? DEFAULT_DECODE_PRESSURE,
          decodeStep: params.ttftDecodeStep ?? DEFAULT_TTFT_DECODE_STEP,
          duplicateWeight: params.ttftDuplicateWeight ?? DEFAULT_TTFT_DUPLICATE_WEIGHT,
          workWeight: params.ttftWorkWeight ?? DEFAULT_TTFT_WORK_WEIGHT,
          defaultRate: DEFAULT_PREFILL_TOKENS_PER_MS,
        },
        params.trackPrefillTokens,
        params.hostWeight,
        params.diskWeight,
        out,
      );
    } else {
      if (params.siblingShare) this.fillSharedPending(p, n);
      computeCosts(b, req, params, out);
    }
    const idx = pinRank
      ? 0
      : ttft && params.temperature === 0
        ? pickTtft(
            out.cost,
            out.cachedTokens,
            n,
            this.o.random,
            TTFT_TIE_TOLERANCE,
            this.inflowOf(n, now),
            out.prefillTerm,
          )
        : pickIndex(out.cost, n, params.temperature, this.o.random);
    const v = this.verdict;
    v.n = n;
    v.idx = idx;
    v.chosen = cand[idx];
    v.reason = pin ? pin.reason : params.temperature === 0 ? 'kv_argmin' : 'kv_softmax';
    v.overlap = b.deviceBlocks[idx];
    v.cached = out.cachedTokens[idx];
    v.busyFiltered = busyFiltered;
    return v;
  }

  /** Recent cache inflow of each candidate (ttft tie break). */
  private inflowOf(n: number, now: number): Float64Array {
    if (this.inflow.length < n) this.inflow = new Float64Array(2 * n);
    for (let i = 0; i < n; i++) this.inflow[i] = this.rateOf(this.cand[i]).inflow(now);
    return this.inflow;
  }

  /**
   * The rank's learned prefill model; created on first use, seeded from the AIC predictor (time of
   * one token budget, at most 8192 tokens, from scratch) when there is one, else
   * `DEFAULT_PREFILL_TOKENS_PER_MS`; the seed weighs as much as that many observed tokens.
   */
  rateOf(r: RankEntry): PrefillRate {
    let rate = this.rates.get(r.key);
    if (rate === undefined) {
      // Bounded under worker churn: past twice the live ranks (plus slack), departed ranks' rates go.
      const live = this.workers.byKey;
      if (this.rates.size >= 2 * live.size + RATES_SLACK)
        for (const k of this.rates.keys()) if (!live.has(k)) this.rates.delete(k);
      let seed = DEFAULT_PREFILL_TOKENS_PER_MS;
      let seedPassMs = 0;
      const predictor = this.o.predictor;
      // One pass worth of tokens (a worker without a budget reports a huge default).
      const mnbt = Math.min(r.owner.maxNumBatchedTokens, PREFILL_RATE_SEED_TOKENS);
      if (predictor) {
        try {
          // Two points of the AIC curve (a full pass and an eighth of one): slope and pass time.
          const small = Math.max(1, Math.round(mnbt / 8));
          const full = predictor({ worker: r.worker, isl: mnbt, prefixTokens: 0 });
          const part = predictor({ worker: r.worker, isl: small, prefixTokens: 0 });
          if (full !== null && full > 0 && Number.isFinite(full)) {
            const slope = part !== null && part >= 0 && part < full ? (full - part) / (mnbt - small) : 0;
            if (slope > 0 && full - slope * mnbt >= 0) {
              seed = 1 / slope;
              seedPassMs = full - slope * mnbt;
            } else seed = mnbt / full;
          }
        } catch (e) {
          this.report(e, 'prefill rate seed');
        }
      }
      let pool = this.pools.get(mnbt);
      if (pool === undefined) {
        // The fleet's model: slower forgetting, a light seed (the fleet's data soon outweighs it).
        pool = new PrefillRate(seed, mnbt, 0.95, seedPassMs, undefined, 0.25);
        this.pools.set(mnbt, pool);
      }
      rate = new PrefillRate(seed, mnbt, 0.9, seedPassMs, pool);
      this.rates.set(r.key, rate);
    }
    return rate;
  }

  /**
   * Sibling sharing (dynamo policy with predict-on-route): per candidate, the prompt tokens of
   * this request that only the side index predicts (blocks routed there, not yet reported stored:
   * a sibling's prefill still computing them), capped by the rank's booked prefill.
   */
  private fillSharedPending(p: Pending, n: number): void {
    const b = this.batch;
    const pend = b.sharedPendingTokens;
    pend.fill(0, 0, n);
    const predicted = this.overlap.predictedOnly(p.prompt.seq);
    if (!predicted || predicted.size === 0) return;
    const byKey = this.workers.byKey;
    const epoch = this.epoch;
    const bs = this.o.blockSize;
    predicted.forEach((v, key) => {
      const r = byKey.get(key);
      if (r !== undefined && r.candEpoch === epoch)
        pend[r.candIndex] = Math.min(b.activePrefillTokens[r.candIndex], v * bs);
    });
  }

  /** Best device overlap among the last verdict's candidates (a parked request's wspt key, §10). */
  bestOverlap(): number {
    const b = this.batch;
    let best = 0;
    for (let i = 0; i < b.n; i++) if (b.deviceBlocks[i] > best) best = b.deviceBlocks[i];
    return best;
  }

  /** A new decision: the busy memo and candidate marks of the previous one are stale. */
  nextEpoch(): void {
    this.epoch++;
  }

  /** §11: a worker is busy only if all its ranks are; in kv mode the router's tracker feeds the signals. */
  workerBusy(w: WorkerEntry, now: number): boolean {
    if (!this.busyOn) return false;
    if (w.busyEpoch === this.epoch) return w.busyNow;
    let all = w.ranks.length > 0;
    const cap = { totalKvBlocks: w.totalKvBlocks, maxNumBatchedTokens: w.maxNumBatchedTokens };
    for (const r of w.ranks) {
      if (this.o.mode === 'kv') {
        const s = this.seqs.rank(r.worker);
        if (s)
          r.busy.observe({
            active_prefill_tokens: s.activePrefillTokens(now),
            active_decode_blocks: s.activeDecodeBlocks,
          });
      }
      if (!r.busy.isBusy(this.thresholds, cap)) {
        all = false;
        break;
      }
    }
    w.busyEpoch = this.epoch;
    w.busyNow = all;
    return all;
  }

  /**
   * §8.1 filters, in order: allowed workers, pin, dp bounds (resolved with the pin), required
   * taints, busy. Fills `cand` and sizes the batch; throws when nothing is left. Returns the
   * number of compatible ranks filtered as busy.
   */
  private filter(p: Pending, pinRank: RankEntry | undefined, now: number): number {
    this.epoch++;
    const ranks = pinRank ? [pinRank] : this.workers.ranks;
    const cand = this.cand;
    const { allowed, required } = p.where;
    const busyOn = this.busyOn;
    let n = 0;
    let compatible = 0;
    let busy = 0;
    for (let i = 0; i < ranks.length; i++) {
      const r = ranks[i];
      const w = r.owner;
      if (allowed && !allowed.has(w.id)) continue;
      if (required && !hasAll(w.taints, required)) continue;
      compatible++;
      if (busyOn && this.workerBusy(w, now)) {
        busy++;
        continue;
      }
      r.candIndex = n;
      r.candEpoch = this.epoch;
      cand[n++] = r;
    }
    if (n === 0) {
      if (compatible === 0) throw noEligibleWorkers();
      if (pinRank) throw pinnedWorkerBusy(pinRank.worker);
      throw allWorkersBusy();
    }
    cand.length = n;
    const b = this.batch.reset(n);
    for (let i = 0; i < n; i++) {
      const r = cand[i];
      b.workers[i] = r.worker;
      b.loadSlot[i] = r.loadSlot;
      b.loadGen[i] = r.loadGen;
    }
    return busy;
  }

  /** Scores hold only the matching ranks: visit those, not every candidate. */
  private fillOverlaps(p: Pending, n: number): void {
    const dev = this.batch.deviceBlocks;
    dev.fill(0, 0, n);
    const s = p.prompt.scores;
    if (!s || s.size === 0) return;
    const byKey = this.workers.byKey;
    const epoch = this.epoch;
    // forEach: `for (const [k, v] of map)` allocates an entry array per matched rank.
    s.forEach((v, key) => {
      const r = byKey.get(key);
      if (r !== undefined && r.candEpoch === epoch) dev[r.candIndex] = r.owner.loadOnly ? 0 : v;
    });
  }
}
