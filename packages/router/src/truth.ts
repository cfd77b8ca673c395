/**
 * Truth-checked routing (issue 19): the router's predicted overlap of every finished request is
 * compared with the cached tokens its engine reported (`usage.prompt_tokens_details.cached_tokens`).
 * Per worker it keeps a drift score (a mean of the per-request error, then an EWMA) and watches
 * whether the index hears from the worker at all; a worker whose index picture is wrong or silent
 * is routed on load alone (its overlap counts as 0 in the gate) until fresh comparisons show it
 * right again. Per router it reports a mode: `exact` (verified), `degraded` (still converging, a
 * worker drifting or load-only), `fallback` (every worker with traffic load-only: the model routes
 * on load alone).
 *
 * Pure: time is an argument (the router's clock); the index is read through `treeSizes()` and is
 * polled at most every `TRUTH_INDEX_POLL_MS`. The frontend calls `evaluate(now)` periodically so
 * the time rule (`silentAfterMs`) fires without new requests, and logs and exports the report.
 */
import { invalidArgument } from '@kvrouter/protocols';

export type TruthMode = 'exact' | 'degraded' | 'fallback';
export const TRUTH_MODES: readonly TruthMode[] = ['exact', 'degraded', 'fallback'];

/** `converging`: fewer than `minSamples` comparisons; `drifting`: drift over `driftDegraded`. */
export type WorkerTruthState = 'converging' | 'ok' | 'drifting' | 'load_only';

/** Why a worker is routed on load alone. */
export type LoadOnlyReason = 'silent' | 'drift' | 'index_empty';

export interface TruthThresholds {
  /** Weight of one comparison in the drift EWMA (a plain mean over the first 1/alpha samples). */
  driftAlpha: number;
  /** Drift at or above this marks a worker `drifting` (the mode is `degraded`); also the recovery bound. */
  driftDegraded: number;
  /** Drift at or above this (after `minSamples`) routes the worker on load alone. */
  driftFallback: number;
  /** Comparisons a worker needs before it counts as verified (and before drift can flag it). */
  minSamples: number;
  /** Comparisons the router needs in all before it can report `exact`. */
  modelMinSamples: number;
  /** Requests with at least one full prompt block finished on a worker the index holds nothing for. */
  silentRequests: number;
  /** ... or this long (ms) since the first such request: the worker is silent. */
  silentAfterMs: number;
  /**
   * The request counts above flag only once their first request is at least this old (ms): event
   * delivery that pauses for less (a NATS restart recovers within 2 s) is not an alarm.
   */
  silentMinMs: number;
  /** The whole index empty after this many such requests (any workers): every worker is load-only. */
  indexEmptyRequests: number;
}

/**
 * Documented defaults (docs/memory.md lists the state, packages/router/README.md the rules).
 * Within 100 requests: `indexEmptyRequests` (16) flips a model whose events never arrive;
 * `silentRequests` (8) a single silent worker — each once its first such request is `silentMinMs`
 * (5 s) old; `silentAfterMs` (30 s) covers slow traffic. So a silent index is flagged within 30 s
 * whenever requests flow, and pauses shorter than 5 s never are.
 */
export const DEFAULT_TRUTH_THRESHOLDS: Readonly<TruthThresholds> = Object.freeze({
  driftAlpha: 0.1,
  driftDegraded: 0.15,
  driftFallback: 0.35,
  minSamples: 8,
  modelMinSamples: 16,
  silentRequests: 8,
  silentAfterMs: 30_000,
  silentMinMs: 5_000,
  indexEmptyRequests: 16,
});

/** The index's per-rank block counts are read at most this often (ms). */
export const TRUTH_INDEX_POLL_MS = 250;

export interface TruthOptions {
  blockSize: number;
  /** Per-rank held blocks (`KvIndexer.treeSizes`, keys `"<worker>:<rank>"`); null: no silence check (remote index). */
  treeSizes: (() => ReadonlyMap<string, number>) | null;
  thresholds?: Partial<TruthThresholds>;
}

export interface WorkerTruth {
  workerId: bigint;
  state: WorkerTruthState;
  reason: LoadOnlyReason | null;
  /** Drift score in [0, 1]: mean |predicted − reported| beyond one block, per prompt token. */
  drift: number;
  samples: number;
  /** Blocks the index holds for the worker (all ranks) at the last poll. */
  indexBlocks: number;
}

export interface TruthReport {
  mode: TruthMode;
  /** Why not `exact` (empty when exact). */
  reasons: string[];
  samples: number;
  workers: WorkerTruth[];
}

interface WorkerState {
  samples: number;
  drift: number;
  /** Block-bearing requests seen while the index held nothing for the worker. */
  emptyRequests: number;
  emptySince: number;
  /** The router's check count at this worker's last check (recent traffic, for `converging`). */
  lastCheck: number;
  /** Samples since the worker became load-only, or since its events came back (recovery needs `minSamples`). */
  sinceFlag: number;
  /** Load-only for silence and its events arrive again: fresh comparisons are being gathered. */
  recovering: boolean;
  reason: LoadOnlyReason | null;
  indexBlocks: number;
}

const fresh = (): WorkerState => ({
  samples: 0,
  drift: 0,
  lastCheck: 0,
  emptyRequests: 0,
  emptySince: 0,
  sinceFlag: 0,
  recovering: false,
  reason: null,
  indexBlocks: 0,
});

function checkThresholds(t: TruthThresholds): TruthThresholds {
  const frac = (k: keyof TruthThresholds, lo: number) => {
    const v = t[k];
    if (typeof v !== 'number' || !(v > lo && v <= 1))
      throw invalidArgument(`truth.${k}`, `must be a number in (${lo}, 1]`, v);
  };
  const count = (k: keyof TruthThresholds) => {
    const v = t[k];
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1)
      throw invalidArgument(`truth.${k}`, 'must be an integer >= 1', v);
  };
  frac('driftAlpha', 0);
  frac('driftDegraded', 0);
  frac('driftFallback', 0);
  if (t.driftFallback < t.driftDegraded)
    throw invalidArgument('truth.driftFallback', 'must be >= truth.driftDegraded', t.driftFallback);
  count('minSamples');
  count('modelMinSamples');
  count('silentRequests');
  count('indexEmptyRequests');
  if (typeof t.silentAfterMs !== 'number' || !(t.silentAfterMs > 0))
    throw invalidArgument('truth.silentAfterMs', 'must be a number > 0', t.silentAfterMs);
  if (typeof t.silentMinMs !== 'number' || !(t.silentMinMs >= 0) || t.silentMinMs > t.silentAfterMs)
    throw invalidArgument('truth.silentMinMs', 'must be a number in [0, truth.silentAfterMs]', t.silentMinMs);
  return t;
}

export class TruthMonitor {
  readonly thresholds: Readonly<TruthThresholds>;
  private readonly bs: number;
  private readonly workers = new Map<bigint, WorkerState>();
  private samples = 0;
  /** Block-bearing requests seen while the whole index was empty, since `emptyIndexSince`. */
  private emptyIndexRequests = 0;
  private emptyIndexSince = 0;
  /** Held blocks per worker (all ranks) at the last poll, and their sum. */
  private sizes: Map<bigint, number> | null = null;
  private sizesTotal = 0;
  private sizesAt = -Infinity;
  private loadOnlyCount = 0;

  constructor(
    private readonly o: TruthOptions,
    /** Flips the gate's per-worker switch (overlap counted as 0 while true). */
    private readonly setLoadOnly: (workerId: bigint, on: boolean) => void,
  ) {
    this.thresholds = Object.freeze(checkThresholds({ ...DEFAULT_TRUTH_THRESHOLDS, ...o.thresholds }));
    this.bs = o.blockSize;
  }

  /** A worker joined (or re-joined): its comparisons start over. */
  addWorker(id: bigint): void {
    if (!this.workers.has(id)) this.workers.set(id, fresh());
  }

  /** A worker left: its state is dropped (bounded by the fleet). */
  removeWorker(id: bigint): void {
    const w = this.workers.get(id);
    if (!w) return;
    if (w.reason !== null) this.loadOnlyCount--;
    this.workers.delete(id);
  }

  /** Workers routed on load alone right now. */
  get loadOnlyWorkers(): number {
    return this.loadOnlyCount;
  }

  /**
   * One finished (first-token) request of `workerId`: the index's overlap at routing time
   * (`predictedTokens`, before any load-only override), the engine's `reportedTokens`, the prompt
   * length `isl`. Unknown workers are ignored (they left meanwhile).
   *
   * `predictedMaxTokens` (>= `predictedTokens`): the most the engine may rightly report, counting the
   * prompt's prefix that requests active on the worker were computing when this one was routed
   * (§9.1 `active_prefix_depth`): the engine admits this request after they prefilled it and counts
   * it cached before their KV events reach the index. A report in [predicted, max] is no error.
   */
  observe(
    workerId: bigint,
    predictedTokens: number,
    reportedTokens: number,
    isl: number,
    now: number,
    predictedMaxTokens = predictedTokens,
  ): void {
    const w = this.workers.get(workerId);
    if (!w) return;
    if (!(predictedTokens >= 0) || !(reportedTokens >= 0) || !(isl >= 0)) return;
    const bs = this.bs;
    const hi = predictedMaxTokens > predictedTokens ? predictedMaxTokens : predictedTokens;
    const off =
      reportedTokens < predictedTokens ? predictedTokens - reportedTokens : Math.max(0, reportedTokens - hi);
    const err = Math.min(1, Math.max(0, off - bs) / Math.max(isl, bs));
    w.samples++;
    this.samples++;
    w.lastCheck = this.samples;
    const t = this.thresholds;
    w.drift += (err - w.drift) / Math.min(w.samples, Math.round(1 / t.driftAlpha));
    if (w.reason !== null) w.sinceFlag++;
    if (isl >= bs) {
      const sizes = this.poll(now);
      if (sizes !== null) {
        w.indexBlocks = sizes.get(workerId) ?? 0;
        if (w.indexBlocks === 0) {
          if (w.emptyRequests++ === 0) w.emptySince = now;
        } else w.emptyRequests = 0;
        if (this.sizesTotal === 0) {
          if (this.emptyIndexRequests++ === 0) this.emptyIndexSince = now;
        } else this.emptyIndexRequests = 0;
      }
    }
    this.judge(workerId, w, now);
  }

  /** Applies the time rule and recovery to every worker; returns the report. */
  evaluate(now: number): TruthReport {
    const sizes = this.poll(now);
    if (sizes !== null) {
      for (const [id, w] of this.workers) {
        w.indexBlocks = sizes.get(id) ?? 0;
        if (w.indexBlocks > 0) w.emptyRequests = 0;
      }
      if (this.sizesTotal > 0) this.emptyIndexRequests = 0;
    }
    for (const [id, w] of this.workers) this.judge(id, w, now);
    return this.report();
  }

  report(): TruthReport {
    const t = this.thresholds;
    const workers: WorkerTruth[] = [];
    let withTraffic = 0;
    let loadOnly = 0;
    let converging = 0;
    let drifting = 0;
    for (const [id, w] of this.workers) {
      const state: WorkerTruthState =
        w.reason !== null
          ? 'load_only'
          : w.samples < t.minSamples
            ? 'converging'
            : w.drift >= t.driftDegraded
              ? 'drifting'
              : 'ok';
      const traffic = w.samples > 0 || w.reason !== null;
      if (traffic) withTraffic++;
      if (state === 'load_only') loadOnly++;
      // Unverified and still served (a check within the last 2 × modelMinSamples of the router's):
      // a worker that got a few requests once and none since does not hold the mode back for ever.
      else if (state === 'converging' && w.samples > 0 && this.samples - w.lastCheck < 2 * t.modelMinSamples)
        converging++;
      else if (state === 'drifting') drifting++;
      workers.push({
        workerId: id,
        state,
        reason: w.reason,
        drift: w.drift,
        samples: w.samples,
        indexBlocks: w.indexBlocks,
      });
    }
    workers.sort((a, b) => (a.workerId < b.workerId ? -1 : a.workerId > b.workerId ? 1 : 0));
    const reasons: string[] = [];
    let mode: TruthMode;
    if (withTraffic > 0 && loadOnly === withTraffic) {
      mode = 'fallback';
      reasons.push(`every worker with traffic (${loadOnly}) is routed on load alone`);
    } else {
      if (loadOnly > 0) reasons.push(`${loadOnly} worker(s) routed on load alone`);
      if (drifting > 0) reasons.push(`${drifting} worker(s) drifting`);
      if (this.samples < t.modelMinSamples)
        reasons.push(`converging: ${this.samples}/${t.modelMinSamples} requests checked`);
      else if (converging > 0)
        reasons.push(`converging: ${converging} worker(s) under ${t.minSamples} checks`);
      mode = reasons.length === 0 ? 'exact' : 'degraded';
    }
    for (const w of workers)
      if (w.state === 'load_only') {
        const why =
          w.reason === 'drift'
            ? `drift ${w.drift.toFixed(2)} >= ${t.driftFallback}`
            : w.reason === 'index_empty'
              ? 'the index holds no block of any worker (no KV events applied)'
              : 'no KV events from it reach the index';
        reasons.push(`worker ${w.workerId}: ${why}`);
      }
    return { mode, reasons, samples: this.samples, workers };
  }

  private judge(id: bigint, w: WorkerState, now: number): void {
    const t = this.thresholds;
    const age = now - w.emptySince;
    const silent =
      this.o.treeSizes !== null &&
      w.emptyRequests > 0 &&
      ((w.emptyRequests >= t.silentRequests && age >= t.silentMinMs) || age >= t.silentAfterMs);
    const indexEmpty =
      this.o.treeSizes !== null &&
      this.emptyIndexRequests >= t.indexEmptyRequests &&
      now - this.emptyIndexSince >= t.silentMinMs;
    const drift = w.samples >= t.minSamples && w.drift >= t.driftFallback;
    if (w.reason === null) {
      const reason: LoadOnlyReason | null = indexEmpty
        ? 'index_empty'
        : silent
          ? 'silent'
          : drift
            ? 'drift'
            : null;
      if (reason === null) return;
      w.reason = reason;
      w.sinceFlag = 0;
      this.loadOnlyCount++;
      this.setLoadOnly(id, true);
      return;
    }
    // Recovery: the index hears from the worker again and fresh comparisons agree.
    if (silent || indexEmpty) return;
    if (w.reason !== 'drift') {
      if (w.indexBlocks === 0) return;
      if (!w.recovering) {
        // Its events arrive again: the silent period's comparisons say nothing about the index now.
        w.recovering = true;
        w.drift = 0;
        w.samples = 0;
        w.sinceFlag = 0;
        return;
      }
    }
    if (w.sinceFlag < t.minSamples || w.drift >= t.driftDegraded) return;
    w.reason = null;
    w.recovering = false;
    this.loadOnlyCount--;
    this.setLoadOnly(id, false);
  }

  private poll(now: number): Map<bigint, number> | null {
    const f = this.o.treeSizes;
    if (f === null) return null;
    if (this.sizes === null || now - this.sizesAt >= TRUTH_INDEX_POLL_MS) {
      const byWorker = new Map<bigint, number>();
      let total = 0;
      for (const [k, v] of f()) {
        const c = k.indexOf(':');
        let id: bigint;
        try {
          id = BigInt(c < 0 ? k : k.slice(0, c));
        } catch {
          continue;
        }
        byWorker.set(id, (byWorker.get(id) ?? 0) + v);
        total += v;
      }
      this.sizes = byWorker;
      this.sizesTotal = total;
      this.sizesAt = now;
    }
    return this.sizes;
  }
}
