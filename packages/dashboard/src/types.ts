/**
 * What an app hands the dashboard (`DashboardSource`: read-only views of state it already keeps)
 * and what the dashboard sends to the page (`DashboardSnapshot`, one JSON object per tick). The
 * views are structural so this package imports neither the router nor prom-client.
 */
import type { BusyThresholds } from '@kvrouter/core-cost';

/** The parts of a `KvRouter` the page reads (all getters the router already has). */
export interface RouterView {
  readonly mode: string;
  readonly blockSize: number;
  readonly queueDepth: number;
  readonly busyThresholds: BusyThresholds;
  rankLoad(w: { worker_id: bigint; dp_rank: number }): {
    active_prefill_tokens: number;
    active_decode_blocks: number;
    active_requests: number;
  };
  inflight(workerId: bigint): number;
}

export interface WorkerView {
  id: bigint;
  dpStart: number;
  dpSize: number;
  /** Card `total_kv_blocks` (null: unknown). */
  totalKvBlocks: number | null;
  /** Effective `max_num_batched_tokens` (null: unknown). */
  maxNumBatchedTokens: number | null;
}

/** The runtime-config fields of a model card the page reads (`ModelRuntimeConfig` of `@kvrouter/runtime`). */
export interface RuntimeConfigLike {
  data_parallel_start_rank: number;
  data_parallel_size: number;
  total_kv_blocks: number | null;
}

/** A worker as the apps' catalogs hold it: routed or not, with its card once known. */
export interface CatalogWorkerLike<R extends RuntimeConfigLike> {
  id: bigint;
  routed: boolean;
  card: { runtime_config: R } | null;
}

/** A KV event subscriber's cursor of one rank (`KvEventSubscriber.cursor`). */
export interface CursorView {
  state: string;
  last: bigint;
  phase: string;
}

/** Engine-reported cache hits of the requests that reported one, with the router's prediction for the same requests. */
export interface ReportedCache {
  requests: number;
  promptTokens: number;
  reportedCachedTokens: number;
  predictedCachedTokens: number;
}

/** A metric series by family name and label subset. */
export interface SeriesRef {
  name: string;
  labels: Readonly<Record<string, string>>;
}

/** One router of the app: a (model, namespace, component, endpoint) worker set. */
export interface RouterSetView {
  model: string;
  namespace: string;
  component: string;
  endpoint: string;
  role: 'decode' | 'prefill';
  router: RouterView;
  workers(): Iterable<WorkerView>;
  /** Cached blocks per `worker_id:dp_rank` (`KvIndexer.treeSizes`), or null without a local index. */
  treeSizes?: (() => Map<string, number>) | null;
  /** Events applied per `status:event_type` (`KvIndexer.appliedCounts`). */
  appliedCounts?: (() => Map<string, number>) | null;
  cursor?: ((workerId: bigint, dpRank: number) => CursorView | null) | null;
  /** Cumulative engine-reported cache hits (frontend only). */
  reported?: (() => ReportedCache | null) | null;
  /** Histogram series read from the registry: TTFT, ITL (seconds) and the router's kv hit rate (one sample per decision). */
  series: { ttft?: SeriesRef; itl?: SeriesRef; hitRate?: SeriesRef };
}

/** A metric sample as prom-client's `get()` returns it. */
export interface MetricSample {
  value: number;
  labels: Record<string, string | number>;
  /** Labels common to several samples of a series (prom-client's histogram samples use them). */
  sharedLabels?: Record<string, string | number>;
  metricName?: string;
}

/** The structural part of a prom-client `Registry` the page reads. */
export interface RegistryLike {
  getSingleMetric(name: string): { get(): unknown } | undefined;
  getMetricsAsArray(): readonly { name: string }[];
}

export interface DashboardSource {
  app: 'frontend' | 'router';
  sets(): Iterable<RouterSetView>;
  registry: RegistryLike | null;
}

// ---- the snapshot ---------------------------------------------------------------------------

export interface WorkerSnapshot {
  worker_id: string;
  dp_rank: number;
  active_prefill_tokens: number;
  active_decode_blocks: number;
  active_requests: number;
  inflight: number;
  total_kv_blocks: number | null;
  max_num_batched_tokens: number | null;
  /** Cached blocks in the router's index (null: no local index). */
  cached_blocks: number | null;
  /** The router's §11 verdict from its own load view (null: no threshold applies). */
  busy: boolean | null;
  /** Event cursor: state, recovery phase, last applied event id (null: no subscriber). */
  events: { state: string; phase: string; last_event_id: string } | null;
}

export interface HistogramSnapshot {
  /** Upper bounds; the last bucket is +Inf and has no bound here. */
  bounds: number[];
  /** Per-bucket counts over the window (bounds.length + 1 entries). */
  counts: number[];
  count: number;
  sum: number;
  p50: number | null;
  p90: number | null;
  p99: number | null;
}

export interface ModelSnapshot {
  model: string;
  namespace: string;
  component: string;
  endpoint: string;
  role: 'decode' | 'prefill';
  mode: string;
  block_size: number;
  queue_depth: number;
  workers: WorkerSnapshot[];
  /** Routing decisions per second over the rate window (kv mode: from the hit-rate histogram's count). */
  decisions_per_sec: number | null;
  hit_rate: {
    /** Mean router-predicted hit rate (overlap blocks / prompt blocks) of the decisions in the window. */
    predicted: number | null;
    /** Engine-reported cached tokens / prompt tokens, over the requests that reported (null: none did). */
    reported: number | null;
    /** The router's predicted cached tokens / prompt tokens over those same requests. */
    predicted_of_reported: number | null;
    reported_requests: number;
  };
  ttft: HistogramSnapshot | null;
  itl: HistogramSnapshot | null;
  /** Events applied per second over the window, and the cumulative counts by `status:event_type`. */
  events_per_sec: number | null;
  events_applied: Record<string, number> | null;
}

/** One sampled routing decision with its cost terms (from the router's decision-log line). */
export interface DecisionRow {
  ts: number;
  model: string | null;
  request_id: string;
  reason: string;
  worker_id: string;
  dp_rank: number;
  required_blocks: number;
  overlap_blocks: number;
  kv_hit_rate: number;
  queued_ms: number;
  busy_filtered: number;
  temperature: number;
  candidates: {
    worker_id: string;
    dp_rank: number;
    device_blocks: number;
    prefill_term: number;
    decode: number;
    /** Blocks this request would add on that rank (`additional_active_blocks`). */
    additional: number;
    cost: number;
  }[];
}

/** A metric family of the truth-check signals (issue 19), shown when the registry has one. */
export interface SignalSnapshot {
  name: string;
  type: string;
  series: { labels: Record<string, string>; value: number }[];
}

export interface DashboardSnapshot {
  app: 'frontend' | 'router';
  /** Wall-clock ms. */
  ts: number;
  interval_ms: number;
  window_s: number;
  /** Wall ms the previous tick took (build, serialise, write to every viewer); null before the second tick. */
  tick_ms: number | null;
  models: ModelSnapshot[];
  decisions: DecisionRow[];
  signals: SignalSnapshot[];
}
