/**
 * Per-request lifecycle → frontend, router and per-worker metrics (§16). One `RequestTracker` per
 * HTTP request: handler entry (`start`), routing decision(s) (`routed`), response chunks
 * (`tokens`), end (`end` / `disconnected`). Timestamps are ms on one monotonic clock.
 */
import type { WorkerWithDpRank } from '@kvrouter/protocols';
import { modelLabel, type FrontendMetrics } from './frontend.js';
import { ERROR_TYPES, REQUEST_TYPES, type ErrorType, type RequestType } from './names.js';
import type { RouterEndpointMetrics } from './router.js';
import { checkCount, checkNonNeg, checkOneOf, checkRatio, checkString, invalid } from './validate.js';
import type { WorkerMetrics } from './workers.js';

export interface LifecycleDeps {
  frontend: FrontendMetrics;
  /**
   * The router's endpoint series, in `kv` mode only. Its presence is what marks KV routing: the
   * router histograms and the frontend `kv_hit_rate` / predicted `cached_tokens` are observed only
   * then (in other modes the decision carries no overlap, and the router series stay at zero).
   */
  router?: RouterEndpointMetrics | null;
  workers?: WorkerMetrics | null;
  /** ms; default `performance.now`. */
  now?: () => number;
}

export interface RequestStart {
  model: string;
  /** e.g. `chat_completions`, `completions`. */
  endpoint: string;
  requestType: RequestType;
}

/** The fields of a `RoutingDecision` the metrics use. */
export interface RoutedInfo {
  workerId: bigint;
  dpRank: number;
  /** Selected rank's device overlap / ceil(isl / bs) (§16). */
  kvHitRate: number;
  /** Tokens already cached on the selected rank. */
  cachedTokens: number;
}

export interface RoutedOptions {
  /** Prompt length in tokens. */
  isl: number;
  /**
   * `prefill`: this worker does the prefill (TTFT is attributed to it, `worker_type=prefill`).
   * `decode` / `aggregated` (default): this worker streams the tokens (ITL, `worker_type=decode`),
   * and also gets the TTFT when no prefill worker was routed.
   */
  phase?: 'aggregated' | 'prefill' | 'decode';
}

export class RequestLifecycleMetrics {
  private readonly now: () => number;

  constructor(readonly deps: LifecycleDeps) {
    this.now = deps.now ?? (() => performance.now());
  }

  /** Handler entry: inflight and queued go up. */
  start(req: RequestStart, at: number = this.now()): RequestTracker {
    const model = modelLabel(req?.model);
    const endpoint = checkString('endpoint', req.endpoint);
    const requestType = checkOneOf('request_type', REQUEST_TYPES, req.requestType);
    checkTime('at', at);
    return new RequestTracker(this.deps, this.now, model, endpoint, requestType, at);
  }
}

export class RequestTracker {
  private ended_ = false;
  private queued = true;
  private routedOnce = false;
  private isl = 0;
  private predictedCached: number | null = null;
  private cachedObserved = false;
  private firstTokenAt: number | null = null;
  private lastAt: number;
  private osl = 0;
  private itlSum = 0;
  private itlCount = 0;
  private prefillWorker: WorkerWithDpRank | null = null;
  private decodeWorker: WorkerWithDpRank | null = null;
  private readonly router: RouterEndpointMetrics | null;

  /** @internal use `RequestLifecycleMetrics.start`. */
  constructor(
    private readonly deps: LifecycleDeps,
    private readonly now: () => number,
    readonly model: string,
    readonly endpoint: string,
    readonly requestType: RequestType,
    readonly startedAt: number,
  ) {
    this.router = deps.router ?? null;
    this.lastAt = startedAt;
    deps.frontend.inflightRequests.inc({ model });
    deps.frontend.queuedRequests.inc({ model });
  }

  get ended(): boolean {
    return this.ended_;
  }

  /**
   * A routing decision. The first one per request is the one that decides where the prompt is
   * computed: it records the hit rate and the router's ISL. Later ones (the decode half of a
   * disaggregated request) only set which worker the ITL belongs to.
   */
  routed(d: RoutedInfo, o: RoutedOptions): void {
    if (this.ended_) return;
    const worker = { worker_id: d?.workerId, dp_rank: d?.dpRank } as WorkerWithDpRank;
    if (typeof worker.worker_id !== 'bigint') throw invalid('workerId', 'must be a bigint', worker.worker_id);
    if (!Number.isInteger(worker.dp_rank) || worker.dp_rank < 0) throw invalid('dpRank', 'must be an integer >= 0', worker.dp_rank);
    const isl = checkCount('isl', o?.isl);
    const phase = checkOneOf('phase', ['aggregated', 'prefill', 'decode'] as const, o.phase ?? 'aggregated');
    const kv = this.router !== null;
    const first = !this.routedOnce;
    if (first && kv) {
      checkRatio('kvHitRate', d.kvHitRate);
      checkCount('cachedTokens', d.cachedTokens);
    }
    if (phase === 'prefill') this.prefillWorker = worker;
    else this.decodeWorker = worker;
    if (!first) return;
    this.routedOnce = true;
    this.isl = isl;
    if (kv) {
      this.deps.frontend.kvHitRate.observe({ model: this.model }, d.kvHitRate);
      this.router!.observeKvHitRate(d.kvHitRate);
      this.router!.observeIsl(isl);
      this.predictedCached = d.cachedTokens;
    }
  }

  /**
   * Cached tokens as the engine reported them (e.g. `usage.prompt_tokens_details.cached_tokens`).
   * Observed once per request; without it, `end` observes the router's prediction (kv mode).
   */
  observeCachedTokens(tokens: number): void {
    checkCount('cached_tokens', tokens);
    if (this.ended_ || this.cachedObserved) return;
    this.cachedObserved = true;
    this.deps.frontend.cachedTokens.observe({ model: this.model }, tokens);
  }

  /** Disaggregated serving: the router's estimate of the KV transfer time (kv mode only). */
  observeKvTransferEstimate(seconds: number): void {
    checkNonNeg('kv_transfer_estimated_latency', seconds);
    if (!this.ended_) this.router?.observeKvTransferLatency(seconds);
  }

  /**
   * `n` new output tokens arrived at `at`. The first chunk gives the TTFT (and the ISL, as
   * upstream); each later chunk gives n ITL samples of (at − previous chunk) / n, as upstream.
   */
  tokens(n: number, at: number = this.now()): void {
    checkCount('tokens', n);
    checkTime('at', at);
    if (this.ended_ || n === 0) return;
    if (at < this.lastAt) throw invalid('at', `must not be earlier than the previous event (${this.lastAt})`, at);
    const f = this.deps.frontend;
    const model = { model: this.model };
    f.outputTokensTotal.inc(model, n);
    this.osl += n;
    if (this.firstTokenAt === null) {
      this.firstTokenAt = at;
      const ttft = (at - this.startedAt) / 1000;
      this.leaveQueue();
      f.timeToFirstTokenSeconds.observe(model, ttft);
      if (this.routedOnce) f.inputSequenceTokens.observe(model, this.isl);
      if (this.routedOnce) this.router?.observeTtft(ttft);
      const w = this.prefillWorker ?? this.decodeWorker;
      if (w && this.deps.workers)
        this.deps.workers.setLastTtft(w, this.prefillWorker ? 'prefill' : 'decode', ttft, this.isl);
    } else {
      const itl = (at - this.lastAt) / 1000 / n;
      for (let i = 0; i < n; i++) f.interTokenLatencySeconds.observe(model, itl);
      this.itlSum += itl * n;
      this.itlCount += n;
      if (this.decodeWorker && this.deps.workers) this.deps.workers.setLastItl(this.decodeWorker, 'decode', itl);
    }
    this.lastAt = at;
  }

  /**
   * The request is over. `errorType` `""` = success, anything else = error with that type;
   * `cancelled` also counts a cancellation and `overload` a rejection. Idempotent.
   */
  end(errorType: ErrorType = '', at: number = this.now()): void {
    const et = checkOneOf('error_type', ERROR_TYPES, errorType);
    checkTime('at', at);
    if (this.ended_) return;
    if (at < this.lastAt) throw invalid('at', `must not be earlier than the previous event (${this.lastAt})`, at);
    this.ended_ = true;
    const f = this.deps.frontend;
    const model = { model: this.model };
    this.leaveQueue();
    f.inflightRequests.dec(model);
    f.requestsTotal.inc({
      model: this.model,
      endpoint: this.endpoint,
      request_type: this.requestType,
      status: et === '' ? 'success' : 'error',
      error_type: et,
    });
    f.requestDurationSeconds.observe(model, (at - this.startedAt) / 1000);
    if (et === 'cancelled') f.modelCancellationTotal.inc(model);
    if (et === 'overload') f.modelRejectionTotal.inc(model);
    // Zero-token requests (failed, cancelled) would drag the OSL mean down; upstream skips them too.
    if (this.osl > 0) f.outputSequenceTokens.observe(model, this.osl);
    if (!this.cachedObserved && this.predictedCached !== null) {
      this.cachedObserved = true;
      f.cachedTokens.observe(model, this.predictedCached);
    }
    if (this.router && this.routedOnce) {
      // Upstream's router counts dispatched requests only, and one average ITL per request.
      if (this.osl > 0) this.router.observeOsl(this.osl);
      if (this.itlCount > 0) this.router.observeItl(this.itlSum / this.itlCount);
      this.router.requestCompleted();
    }
  }

  /** The client went away before the response ended: counts it and ends as `cancelled`. */
  disconnected(at: number = this.now()): void {
    checkTime('at', at);
    if (this.ended_) return;
    if (at < this.lastAt) throw invalid('at', `must not be earlier than the previous event (${this.lastAt})`, at);
    this.deps.frontend.disconnectedClients.inc();
    this.end('cancelled', at);
  }

  private leaveQueue(): void {
    if (!this.queued) return;
    this.queued = false;
    this.deps.frontend.queuedRequests.dec({ model: this.model });
  }
}

function checkTime(field: string, at: number): void {
  if (typeof at !== 'number' || !Number.isFinite(at)) throw invalid(field, 'must be a finite number of ms', at);
}
