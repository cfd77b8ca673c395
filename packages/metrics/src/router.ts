/**
 * Router request metrics (`dynamo_component_router_*`, labels `dynamo_namespace`,
 * `dynamo_component`, `dynamo_endpoint`) and the routing-overhead histograms
 * (`dynamo_router_overhead_*_ms`, const label `router_id`) of PROTOCOL §16.
 */
import type { Registry } from 'prom-client';
import type { RouterOverhead } from '@kvrouter/router';
import { BUCKETS } from './buckets.js';
import { OVERHEAD_PHASES, overheadName, ROUTER, ROUTER_LABELS, type OverheadPhase } from './names.js';
import { counter, histogram } from './registry.js';
import {
  type CounterFamily,
  type CounterSeries,
  type HistogramFamily,
  type HistogramSeries,
  reserveNames,
} from './series.js';
import { checkCount, checkNonNeg, checkRatio, checkString, invalid } from './validate.js';

type RL = (typeof ROUTER_LABELS)[number];

/** Which router endpoint the series belong to (the worker component the router routes to). */
export interface RouterEndpointLabels {
  namespace: string;
  component: string;
  endpoint: string;
}

export class RouterRequestMetrics {
  readonly requestsTotal: CounterFamily<RL>;
  readonly timeToFirstTokenSeconds: HistogramFamily<RL>;
  readonly interTokenLatencySeconds: HistogramFamily<RL>;
  readonly inputSequenceTokens: HistogramFamily<RL>;
  readonly outputSequenceTokens: HistogramFamily<RL>;
  readonly kvHitRate: HistogramFamily<RL>;
  readonly kvTransferEstimatedLatencySeconds: HistogramFamily<RL>;
  readonly remoteIndexerQueryFailuresTotal: CounterFamily<RL>;
  readonly remoteIndexerWriteFailuresTotal: CounterFamily<RL>;
  private readonly endpoints = new Map<string, RouterEndpointMetrics>();

  constructor(registry: Registry) {
    reserveNames(registry, Object.values(ROUTER));
    const h = (name: string, help: string, b: readonly number[]) =>
      histogram(registry, name, help, ROUTER_LABELS, b);
    this.requestsTotal = counter(
      registry,
      ROUTER.requestsTotal,
      'Total number of requests processed by the router',
      ROUTER_LABELS,
    );
    this.timeToFirstTokenSeconds = h(
      ROUTER.timeToFirstTokenSeconds,
      'Time to first token observed at the router',
      BUCKETS.ttft,
    );
    this.interTokenLatencySeconds = h(
      ROUTER.interTokenLatencySeconds,
      'Average inter-token latency of a request observed at the router',
      BUCKETS.itl,
    );
    this.inputSequenceTokens = h(
      ROUTER.inputSequenceTokens,
      'Input sequence length observed at the router',
      BUCKETS.inputSequence,
    );
    this.outputSequenceTokens = h(
      ROUTER.outputSequenceTokens,
      'Output sequence length observed at the router',
      BUCKETS.outputSequence,
    );
    this.kvHitRate = h(ROUTER.kvHitRate, 'Predicted KV cache hit rate at routing time', BUCKETS.kvHitRate);
    this.kvTransferEstimatedLatencySeconds = h(
      ROUTER.kvTransferEstimatedLatencySeconds,
      'Upper-bound estimate of KV transfer latency in disaggregated serving',
      BUCKETS.kvTransferLatency,
    );
    this.remoteIndexerQueryFailuresTotal = counter(
      registry,
      ROUTER.remoteIndexerQueryFailuresTotal,
      'Remote indexer overlap queries that failed',
      ROUTER_LABELS,
    );
    this.remoteIndexerWriteFailuresTotal = counter(
      registry,
      ROUTER.remoteIndexerWriteFailuresTotal,
      'Remote indexer routing-decision writes that failed',
      ROUTER_LABELS,
    );
  }

  /**
   * The series of one endpoint, created at zero in every family (§16: registered with zero values
   * even in non-`kv` modes, where nothing observes them). Same labels → same object.
   */
  forEndpoint(l: RouterEndpointLabels): RouterEndpointMetrics {
    const labels: Record<RL, string> = {
      dynamo_namespace: checkString('namespace', l?.namespace),
      dynamo_component: checkString('component', l?.component),
      dynamo_endpoint: checkString('endpoint', l?.endpoint),
    };
    const key = `${labels.dynamo_namespace}\u0000${labels.dynamo_component}\u0000${labels.dynamo_endpoint}`;
    let e = this.endpoints.get(key);
    if (!e) {
      e = new RouterEndpointMetrics(this, labels);
      this.endpoints.set(key, e);
    }
    return e;
  }
}

type Observer = HistogramSeries<RL>;
type Incrementer = CounterSeries<RL>;

/** One endpoint's router series, with the label lookups done once. */
export class RouterEndpointMetrics {
  private readonly requests: Incrementer;
  private readonly ttft: Observer;
  private readonly itl: Observer;
  private readonly isl: Observer;
  private readonly osl: Observer;
  private readonly hitRate: Observer;
  private readonly transfer: Observer;
  private readonly queryFailures: Incrementer;
  private readonly writeFailures: Incrementer;

  constructor(
    f: RouterRequestMetrics,
    readonly labels: Readonly<Record<RL, string>>,
  ) {
    for (const c of [f.requestsTotal, f.remoteIndexerQueryFailuresTotal, f.remoteIndexerWriteFailuresTotal])
      c.inc(labels, 0);
    for (const h of [
      f.timeToFirstTokenSeconds,
      f.interTokenLatencySeconds,
      f.inputSequenceTokens,
      f.outputSequenceTokens,
      f.kvHitRate,
      f.kvTransferEstimatedLatencySeconds,
    ])
      h.zero(labels);
    this.requests = f.requestsTotal.labels(labels);
    this.ttft = f.timeToFirstTokenSeconds.labels(labels);
    this.itl = f.interTokenLatencySeconds.labels(labels);
    this.isl = f.inputSequenceTokens.labels(labels);
    this.osl = f.outputSequenceTokens.labels(labels);
    this.hitRate = f.kvHitRate.labels(labels);
    this.transfer = f.kvTransferEstimatedLatencySeconds.labels(labels);
    this.queryFailures = f.remoteIndexerQueryFailuresTotal.labels(labels);
    this.writeFailures = f.remoteIndexerWriteFailuresTotal.labels(labels);
  }

  /** A dispatched request finished (any outcome). */
  requestCompleted(): void {
    this.requests.inc();
  }
  observeTtft(seconds: number): void {
    this.ttft.observe(checkNonNeg('ttft', seconds));
  }
  observeItl(seconds: number): void {
    this.itl.observe(checkNonNeg('itl', seconds));
  }
  observeIsl(tokens: number): void {
    this.isl.observe(checkCount('isl', tokens));
  }
  observeOsl(tokens: number): void {
    this.osl.observe(checkCount('osl', tokens));
  }
  observeKvHitRate(rate: number): void {
    this.hitRate.observe(checkRatio('kv_hit_rate', rate));
  }
  observeKvTransferLatency(seconds: number): void {
    this.transfer.observe(checkNonNeg('kv_transfer_estimated_latency', seconds));
  }
  /** §7.7: a remote indexer query failed (the request was routed with empty overlaps). */
  remoteQueryFailed(): void {
    this.queryFailures.inc();
  }
  /** §7.7: an approximate-mode routing-decision write to the remote indexer failed. */
  remoteWriteFailed(): void {
    this.writeFailures.inc();
  }
}

/**
 * The five `dynamo_router_overhead_<phase>_ms` histograms of one router (frontend registry only,
 * `kv` mode only: the caller creates this object only then).
 */
export class RouterOverheadMetrics {
  readonly families: Readonly<Record<OverheadPhase, HistogramFamily<'router_id'>>>;
  readonly routerId: string;
  private readonly children: HistogramSeries<'router_id'>[];

  constructor(registry: Registry, routerId: bigint | number | string) {
    const id = routerIdLabel(routerId);
    reserveNames(registry, OVERHEAD_PHASES.map(overheadName));
    const fams = {} as Record<OverheadPhase, HistogramFamily<'router_id'>>;
    for (const p of OVERHEAD_PHASES) {
      const b =
        p === 'block_hashing' || p === 'seq_hashing' ? BUCKETS.overheadHashing : BUCKETS.overheadRouting;
      fams[p] = histogram(registry, overheadName(p), HELP[p], ['router_id'], b);
    }
    this.families = fams;
    this.routerId = id;
    // A family-wide constant label: one bound series per phase, looked up once.
    this.children = OVERHEAD_PHASES.map((p) => fams[p].labels({ router_id: id }));
  }

  /** One decision's phase timings in ms (the router's `onOverhead` shape). */
  observe(o: RouterOverhead): void {
    // All five are checked before any is observed: a bad field records nothing.
    for (const p of OVERHEAD_PHASES) checkNonNeg(p, o?.[p]);
    for (let i = 0; i < OVERHEAD_PHASES.length; i++) this.children[i]!.observe(o[OVERHEAD_PHASES[i]!]);
  }
}

const HELP: Record<OverheadPhase, string> = {
  block_hashing: 'Time spent computing block hashes of one routing decision (ms)',
  seq_hashing: 'Time spent computing sequence hashes of one routing decision (ms)',
  indexer_find_matches: 'Time spent in indexer find_matches of one routing decision (ms)',
  scheduling: 'Time spent in worker selection and booking of one routing decision (ms)',
  total: 'Total routing overhead of one routing decision (ms)',
};

function routerIdLabel(v: bigint | number | string): string {
  if (typeof v === 'bigint' || typeof v === 'number') {
    if (typeof v === 'number' ? Number.isSafeInteger(v) && v >= 0 : v >= 0n && v < 1n << 64n)
      return String(v);
  } else if (typeof v === 'string' && v.length > 0) return v;
  throw invalid('router_id', 'must be a u64 or a non-empty string', v);
}
