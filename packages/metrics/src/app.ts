/**
 * The frontend's registry as §16 lays it out, built in one call so the mode rules live in one
 * place: frontend request metrics, router request metrics (zero-valued in non-`kv` modes), per-worker
 * and queue gauges always; routing-overhead histograms and the index counter in `kv` mode only.
 */
import type { Registry } from 'prom-client';
import type { ActiveLoad } from '@kvrouter/protocols';
import type { RouterHooks } from '@kvrouter/router';
import { routerMetricsHooks } from './adapters.js';
import { FrontendMetrics } from './frontend.js';
import { KvIndexMetrics } from './kv.js';
import { MemoryMetrics } from './memory.js';
import { RequestLifecycleMetrics } from './lifecycle.js';
import type { WorkerType } from './names.js';
import type { BucketOverrides } from './overrides.js';
import { createRegistry } from './registry.js';
import { RouterOverheadMetrics, RouterRequestMetrics, type RouterEndpointLabels } from './router.js';
import { TruthMetrics } from './truth.js';
import { invalid } from './validate.js';
import { WorkerMetrics } from './workers.js';

export interface FrontendMetricSetOptions {
  /** Default: a fresh registry. */
  registry?: Registry;
  /** `--metrics-prefix`. */
  prefix?: string;
  /** `DYN_METRICS_*` overrides. */
  buckets?: BucketOverrides;
  /** `--router-mode`; only `kv` observes router metrics. */
  routerMode: string;
  /** This frontend's discovery instance id: the `router_id` of the overhead histograms (kv mode). */
  routerId?: bigint | number | string;
  /** kv mode: whether the frontend holds a local index (false with `--use-remote-indexer`). Default true. */
  localIndex?: boolean;
  /** Clock of the request trackers (ms); default `performance.now`. */
  now?: () => number;
}

export class FrontendMetricSet {
  readonly registry: Registry;
  readonly kv: boolean;
  readonly frontend: FrontendMetrics;
  readonly routerRequests: RouterRequestMetrics;
  readonly workers: WorkerMetrics;
  readonly overhead: RouterOverheadMetrics | null;
  readonly index: KvIndexMetrics | null;
  /** Truth-checked routing (kv mode). */
  readonly truth: TruthMetrics | null;
  /** Sizes and limits of the bounded caches and tables (every mode). */
  readonly memory: MemoryMetrics;
  private readonly now: (() => number) | undefined;

  constructor(o: FrontendMetricSetOptions) {
    if (typeof o?.routerMode !== 'string') throw invalid('routerMode', 'must be a string', o?.routerMode);
    this.kv = o.routerMode === 'kv';
    if (this.kv && o.routerId === undefined) throw invalid('routerId', 'is required in kv mode', o.routerId);
    this.registry = o.registry ?? createRegistry();
    this.frontend = new FrontendMetrics(this.registry, { prefix: o.prefix, buckets: o.buckets });
    this.routerRequests = new RouterRequestMetrics(this.registry);
    this.workers = new WorkerMetrics(this.registry);
    this.overhead = this.kv ? new RouterOverheadMetrics(this.registry, o.routerId!) : null;
    this.index = this.kv && o.localIndex !== false ? new KvIndexMetrics(this.registry) : null;
    this.truth = this.kv ? new TruthMetrics(this.registry) : null;
    this.memory = new MemoryMetrics(this.registry);
    this.now = o.now;
  }

  /**
   * Request tracking for one model's router endpoint. Its router series exist (at zero) from this
   * call in every mode; they are observed in `kv` mode only.
   */
  lifecycle(endpoint: RouterEndpointLabels): RequestLifecycleMetrics {
    const e = this.routerRequests.forEndpoint(endpoint);
    return new RequestLifecycleMetrics({
      frontend: this.frontend,
      router: this.kv ? e : null,
      workers: this.workers,
      ...(this.now ? { now: this.now } : {}),
    });
  }

  /** Hooks for one `KvRouter` (overhead only in kv mode). */
  routerHooks(
    workerType: WorkerType,
    publishLoad?: ((load: ActiveLoad) => void) | null,
  ): Pick<RouterHooks, 'onOverhead' | 'onQueueChange' | 'publishLoad'> {
    return routerMetricsHooks({ overhead: this.overhead, workers: this.workers, workerType, publishLoad });
  }
}
