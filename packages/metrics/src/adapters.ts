/**
 * Adapters from the domain packages' hooks to metric updates. Each returns a function of exactly
 * the hook's shape, so wiring is `new KvRouter({ hooks: { ...routerMetricsHooks(...) } })`,
 * `new RadixIndexer({ onApplied: appliedHook(index) })`, `new Publisher({ onEngineDropped: ... })`.
 */
import type { ActiveLoad } from '@kvrouter/protocols';
import type { AppliedHook } from '@kvrouter/radix-indexer';
import type { RouterHooks, RouterOverhead } from '@kvrouter/router';
import type { KvIndexMetrics, PublisherMetrics } from './kv.js';
import { ERROR_TYPES, WORKER_TYPES, type ErrorType, type WorkerType } from './names.js';
import type { RouterOverheadMetrics } from './router.js';
import { checkOneOf } from './validate.js';
import type { WorkerMetrics } from './workers.js';

/** Router phases → the `worker_type` label of §16 (aggregated workers are decode workers upstream). */
export function workerTypeOfPhase(phase: 'aggregated' | 'prefill' | 'decode' | undefined): WorkerType {
  return phase === 'prefill' ? 'prefill' : 'decode';
}

export interface RouterHookTargets {
  /** `kv` mode only (§16); absent → no `onOverhead`. */
  overhead?: RouterOverheadMetrics | null;
  workers?: WorkerMetrics | null;
  /** `worker_type` of the router's workers (see `workerTypeOfPhase`). */
  workerType: WorkerType;
  /** The real `ActiveLoad` publisher (§5.5), if any: loads go to it and to the gauges. */
  publishLoad?: ((load: ActiveLoad) => void) | null;
}

/** `onOverhead`, `onQueueChange` and `publishLoad` options of a `KvRouter`. */
export function routerMetricsHooks(
  t: RouterHookTargets,
): Pick<RouterHooks, 'onOverhead' | 'onQueueChange' | 'publishLoad'> {
  const type = checkOneOf('workerType', WORKER_TYPES, t.workerType);
  const out: Pick<RouterHooks, 'onOverhead' | 'onQueueChange' | 'publishLoad'> = {};
  if (t.overhead) out.onOverhead = overheadHook(t.overhead);
  const w = t.workers;
  if (w) {
    out.onQueueChange = (pending) => w.setQueuePending(type, pending);
    const next = t.publishLoad;
    out.publishLoad = (load) => {
      // The gauges are updated first and cannot stop the real publisher: it runs even if they throw.
      try {
        w.setLoad(load, type);
      } finally {
        next?.(load);
      }
    };
  } else if (t.publishLoad) out.publishLoad = t.publishLoad;
  return out;
}

/** Router `onOverhead` → the five `dynamo_router_overhead_*_ms` histograms. */
export function overheadHook(m: RouterOverheadMetrics): (o: RouterOverhead) => void {
  return (o) => m.observe(o);
}

/** Index `onApplied` → `dynamo_component_kv_cache_events_applied`. */
export function appliedHook(m: KvIndexMetrics): AppliedHook {
  return m.hook;
}

/** Publisher `onEngineDropped(dropped, dpRank)` → the worker's dropped-events counter (§3.4). */
export function engineDroppedHook(
  m: PublisherMetrics,
  workerId: bigint,
): (dropped: number, dpRank: number) => void {
  m.register(workerId);
  return (dropped) => m.recordDropped(workerId, dropped);
}

const HTTP_ERROR_TYPE: Readonly<Record<number, ErrorType>> = {
  400: 'validation',
  413: 'validation',
  422: 'validation',
  404: 'not_found',
  429: 'overload',
  503: 'overload',
  499: 'cancelled',
  501: 'not_implemented',
  504: 'response_timeout',
};

/**
 * The `error_type` label of a failed request. A `KvrError` that names its type
 * (`detail.error_type`, e.g. all-workers-busy → `overload`) wins; then code `cancelled` and aborts;
 * then the HTTP status as upstream classifies it (4xx validation, 404, 429/503 overload, 499, 501,
 * 504); anything else is `internal`.
 */
export function errorTypeOf(err: unknown): Exclude<ErrorType, ''> {
  if (err && typeof err === 'object') {
    const e = err as { code?: unknown; status?: unknown; name?: unknown; detail?: { error_type?: unknown } };
    const named = e.detail?.error_type;
    if (typeof named === 'string' && named !== '' && (ERROR_TYPES as readonly string[]).includes(named))
      return named as Exclude<ErrorType, ''>;
    if (e.code === 'cancelled' || e.name === 'AbortError') return 'cancelled';
    if (typeof e.status === 'number') {
      const t = HTTP_ERROR_TYPE[e.status];
      if (t) return t as Exclude<ErrorType, ''>;
      if (e.status >= 400 && e.status < 500) return 'validation';
    }
  }
  return 'internal';
}
