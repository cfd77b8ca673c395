/**
 * Per-request lifecycle → frontend, router and per-worker metrics (§16). One `RequestTracker` per
 * HTTP request: handler entry (`start`), routing decision(s) (`routed`), response chunks
 * (`tokens`), end (`end` / `disconnected`). Timestamps are ms on one monotonic clock.
 */
import type { WorkerWithDpRank } from '@kvrouter/protocols';
import { modelLabel, type FrontendMetrics } from './frontend.js';
import { ERROR_TYPES, REQUEST_TYPES, type ErrorType, type RequestType } from './names.js';
import type { RouterEndpointMetrics } from './router.js';
import type { CounterSeries, GaugeSeries, HistogramSeries } from './series.js';
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
  /**
   * Whether a client-supplied model name is one this process serves. When given, any other name
   * counts under `UNKNOWN_MODEL_LABEL`, so made-up (or 100 MB) names cannot grow the exposition.
   */
  knownModel?: (model: string) => boolean;
}

/** The one `model` label every unknown or made-up model name counts under. */
export const UNKNOWN_MODEL_LABEL = '__unknown__';

/**
 * At most this many distinct `model` label values per `RequestLifecycleMetrics`; names past it
 * count under `UNKNOWN_MODEL_LABEL` (a backstop: the served models are far fewer).
 */
export const MAX_MODEL_LABELS = 256;

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

/**
 * The `model`-labelled series of one model, looked up once per model rather than per update. The
 * gauges exist from the first request; a histogram or counter series appears with its first
 * update (as upstream's do), so e.g. a model never routed in kv mode exports no kv_hit_rate.
 */
export class ModelSeries {
  readonly inflight: GaugeSeries<'model'>;
  readonly queued: GaugeSeries<'model'>;
  private readonly l: { model: string };
  private duration_?: HistogramSeries<'model'>;
  private isl_?: HistogramSeries<'model'>;
  private osl_?: HistogramSeries<'model'>;
  private ttft_?: HistogramSeries<'model'>;
  private itl_?: HistogramSeries<'model'>;
  private cached_?: HistogramSeries<'model'>;
  private hitRate_?: HistogramSeries<'model'>;
  private outputTokens_?: CounterSeries<'model'>;
  private cancellations_?: CounterSeries<'model'>;
  private rejections_?: CounterSeries<'model'>;
  /**
   * Requests whose engine reported its cached tokens, with the router's prediction for the same
   * requests (plain sums for the dashboard's predicted-vs-reported view; no metric family).
   */
  readonly reportedCache = {
    requests: 0,
    promptTokens: 0,
    reportedCachedTokens: 0,
    predictedCachedTokens: 0,
  };

  constructor(
    private readonly f: FrontendMetrics,
    readonly model: string,
  ) {
    this.l = { model };
    this.inflight = f.inflightRequests.labels(this.l);
    this.queued = f.queuedRequests.labels(this.l);
  }

  get duration(): HistogramSeries<'model'> {
    return (this.duration_ ??= this.f.requestDurationSeconds.labels(this.l));
  }
  get isl(): HistogramSeries<'model'> {
    return (this.isl_ ??= this.f.inputSequenceTokens.labels(this.l));
  }
  get osl(): HistogramSeries<'model'> {
    return (this.osl_ ??= this.f.outputSequenceTokens.labels(this.l));
  }
  get ttft(): HistogramSeries<'model'> {
    return (this.ttft_ ??= this.f.timeToFirstTokenSeconds.labels(this.l));
  }
  get itl(): HistogramSeries<'model'> {
    return (this.itl_ ??= this.f.interTokenLatencySeconds.labels(this.l));
  }
  get cached(): HistogramSeries<'model'> {
    return (this.cached_ ??= this.f.cachedTokens.labels(this.l));
  }
  get hitRate(): HistogramSeries<'model'> {
    return (this.hitRate_ ??= this.f.kvHitRate.labels(this.l));
  }
  get outputTokens(): CounterSeries<'model'> {
    return (this.outputTokens_ ??= this.f.outputTokensTotal.labels(this.l));
  }
  get cancellations(): CounterSeries<'model'> {
    return (this.cancellations_ ??= this.f.modelCancellationTotal.labels(this.l));
  }
  get rejections(): CounterSeries<'model'> {
    return (this.rejections_ ??= this.f.modelRejectionTotal.labels(this.l));
  }
}

export class RequestLifecycleMetrics {
  private readonly now: () => number;
  private readonly models = new Map<string, ModelSeries>();

  constructor(readonly deps: LifecycleDeps) {
    this.now = deps.now ?? (() => performance.now());
  }

  /** Handler entry: inflight and queued go up. */
  start(req: RequestStart, at: number = this.now()): RequestTracker {
    const model = this.boundedLabel(req?.model);
    const endpoint = checkString('endpoint', req.endpoint);
    const requestType = checkOneOf('request_type', REQUEST_TYPES, req.requestType);
    checkTime('at', at);
    return new RequestTracker(this.deps, this.seriesOf(model), this.now, endpoint, requestType, at);
  }

  /** Engine-reported vs predicted cached tokens of one model so far (null: no request of it yet). */
  reportedCache(model: string): Readonly<ModelSeries['reportedCache']> | null {
    return this.models.get(modelLabel(model))?.reportedCache ?? null;
  }

  /** The label of a client-supplied name: its own only for a known model, within `MAX_MODEL_LABELS`. */
  private boundedLabel(model: string): string {
    const known = this.deps.knownModel;
    if (known && typeof model === 'string' && !known(model)) return UNKNOWN_MODEL_LABEL;
    const label = modelLabel(model);
    if (!this.models.has(label) && this.models.size >= MAX_MODEL_LABELS) return UNKNOWN_MODEL_LABEL;
    return label;
  }

  private seriesOf(model: string): ModelSeries {
    let m = this.models.get(model);
    if (!m) this.models.set(model, (m = new ModelSeries(this.deps.frontend, model)));
    return m;
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
  /** The decode worker's last-ITL gauge, looked up at the first ITL. */
  private itlGauge: GaugeSeries<'worker_id' | 'dp_rank' | 'worker_type'> | null = null;
  private readonly router: RouterEndpointMetrics | null;

  /** @internal use `RequestLifecycleMetrics.start`. */
  constructor(
    private readonly deps: LifecycleDeps,
    private readonly m: ModelSeries,
    private readonly now: () => number,
    readonly endpoint: string,
    readonly requestType: RequestType,
    readonly startedAt: number,
  ) {
    this.router = deps.router ?? null;
    this.lastAt = startedAt;
    m.inflight.inc();
    m.queued.inc();
  }

  get model(): string {
    return this.m.model;
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
    if (!Number.isInteger(worker.dp_rank) || worker.dp_rank < 0)
      throw invalid('dpRank', 'must be an integer >= 0', worker.dp_rank);
    const isl = checkCount('isl', o?.isl);
    const phase = checkOneOf('phase', ['aggregated', 'prefill', 'decode'] as const, o.phase ?? 'aggregated');
    const kv = this.router !== null;
    const first = !this.routedOnce;
    if (first && kv) {
      checkRatio('kvHitRate', d.kvHitRate);
      checkCount('cachedTokens', d.cachedTokens);
    }
    if (phase === 'prefill') this.prefillWorker = worker;
    else {
      this.decodeWorker = worker;
      this.itlGauge = null;
    }
    if (!first) return;
    this.routedOnce = true;
    this.isl = isl;
    if (kv) {
      this.m.hitRate.observe(d.kvHitRate);
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
    this.m.cached.observe(tokens);
    if (this.routedOnce && this.predictedCached !== null) {
      const r = this.m.reportedCache;
      r.requests++;
      r.promptTokens += this.isl;
      r.reportedCachedTokens += tokens;
      r.predictedCachedTokens += this.predictedCached;
    }
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
    if (at < this.lastAt)
      throw invalid('at', `must not be earlier than the previous event (${this.lastAt})`, at);
    const m = this.m;
    m.outputTokens.inc(n);
    this.osl += n;
    if (this.firstTokenAt === null) {
      this.firstTokenAt = at;
      const ttft = (at - this.startedAt) / 1000;
      this.leaveQueue();
      m.ttft.observe(ttft);
      if (this.routedOnce) {
        m.isl.observe(this.isl);
        this.router?.observeTtft(ttft);
      }
      const w = this.prefillWorker ?? this.decodeWorker;
      if (w && this.deps.workers)
        this.deps.workers.setLastTtft(w, this.prefillWorker ? 'prefill' : 'decode', ttft, this.isl);
    } else {
      const itl = (at - this.lastAt) / 1000 / n;
      m.itl.observeMany(itl, n);
      this.itlSum += itl * n;
      this.itlCount += n;
      if (this.decodeWorker && this.deps.workers) {
        this.itlGauge ??= this.deps.workers.lastItlSeries(this.decodeWorker, 'decode');
        this.itlGauge.set(itl);
      }
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
    if (at < this.lastAt)
      throw invalid('at', `must not be earlier than the previous event (${this.lastAt})`, at);
    this.ended_ = true;
    const m = this.m;
    this.leaveQueue();
    m.inflight.dec();
    this.deps.frontend.requestsTotal.inc({
      model: m.model,
      endpoint: this.endpoint,
      request_type: this.requestType,
      status: et === '' ? 'success' : 'error',
      error_type: et,
    });
    m.duration.observe((at - this.startedAt) / 1000);
    if (et === 'cancelled') m.cancellations.inc();
    if (et === 'overload') m.rejections.inc();
    // Zero-token requests (failed, cancelled) would drag the OSL mean down; upstream skips them too.
    if (this.osl > 0) m.osl.observe(this.osl);
    if (!this.cachedObserved && this.predictedCached !== null) {
      this.cachedObserved = true;
      m.cached.observe(this.predictedCached);
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
    if (at < this.lastAt)
      throw invalid('at', `must not be earlier than the previous event (${this.lastAt})`, at);
    this.deps.frontend.disconnectedClients.inc({});
    this.end('cancelled', at);
  }

  private leaveQueue(): void {
    if (!this.queued) return;
    this.queued = false;
    this.m.queued.dec();
  }
}

function checkTime(field: string, at: number): void {
  if (typeof at !== 'number' || !Number.isFinite(at))
    throw invalid(field, 'must be a finite number of ms', at);
}
