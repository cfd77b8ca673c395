/**
 * Router options: validation and defaults. `resolveOptions` checks every group (policy, deps,
 * ports, hooks) before anything is built and returns the values the other parts read.
 */
import {
  DEFAULT_BUSY_THRESHOLDS,
  DEFAULT_COST_PARAMS,
  DEFAULT_CUDA_TO_CPU_RATIO,
  DEFAULT_EXPIRY_MS,
  DEFAULT_QUEUE_THRESHOLD,
  EXPIRY_CHECK_INTERVAL_MS,
  QUEUE_POLICIES,
  ROUTER_MODES,
  effectiveBusyThresholds,
  validateBusyThresholds,
  validateCostParams,
  type BusyThresholds,
  type CostParams,
  type QueuePolicy,
  type RouterMode,
} from '@kvrouter/core-cost';
import { invalidArgument as invalid, type Clock } from '@kvrouter/protocols';
import { SESSION_REAP_INTERVAL_MS } from './sessions.js';
import type {
  KvRouterOptions,
  PrefillDurationPredictor,
  RouterDeps,
  RouterHooks,
  RouterPhase,
  RouterPorts,
} from './types.js';

/** Periodic queue re-check (§10): 60 s, or 100 ms with the AIC prefill model. */
export const QUEUE_RECHECK_MS = 60_000;
export const QUEUE_RECHECK_AIC_MS = 100;
/** Maintenance tick: lazy-expiry backstop (§9.2) and session reaper (§12), both every 30 s. */
export const MAINTENANCE_INTERVAL_MS = Math.min(EXPIRY_CHECK_INTERVAL_MS, SESSION_REAP_INTERVAL_MS);
export const DEFAULT_OVERLAP_REFRESH_AFTER_SECS = 10;

/** Everything the parts of the router read, validated and with defaults applied. */
export interface ResolvedOptions {
  blockSize: number;
  isEagle: boolean;
  mode: RouterMode;
  phase: RouterPhase;
  clock: Clock;
  random: () => number;
  randomU32: () => number;
  hr: () => number;
  params: CostParams;
  thresholds: BusyThresholds;
  queuePolicy: QueuePolicy;
  /** Null: no queue (disabled, or a non-kv mode). */
  queueThreshold: number | null;
  strictPriority: boolean;
  queueRecheckMs: number;
  refreshMs: number;
  expiryMs: number;
  cudaToCpuRatio: number;
  trackOutputBlocks: boolean;
  predictedTtlSecs: number | null;
  explain: boolean;
  predictor: PrefillDurationPredictor | null;
  deps: RouterDeps;
  ports: RouterPorts;
  hooks: RouterHooks;
  routerId: bigint | null;
}

export function resolveOptions(opts: KvRouterOptions): ResolvedOptions {
  if (!opts || typeof opts !== 'object') throw invalid('options', 'must be an object');
  const bs = opts.blockSize;
  if (typeof bs !== 'number' || !Number.isSafeInteger(bs) || bs < 1)
    throw invalid('blockSize', 'must be an integer >= 1', bs);
  const deps = opts.deps ?? ({} as Partial<RouterDeps>);
  const policy = opts.policy ?? {};
  const ports = opts.ports ?? {};
  const hooks = opts.hooks ?? {};
  const clock = deps.clock;
  if (
    !clock ||
    typeof clock.now !== 'function' ||
    typeof clock.setTimeout !== 'function' ||
    typeof clock.clearTimeout !== 'function'
  )
    throw invalid('clock', 'must provide now(), setTimeout() and clearTimeout()');
  const random = deps.random;
  if (typeof random !== 'function') throw invalid('random', 'must be a function returning [0, 1)');
  const mode = policy.mode ?? 'kv';
  if (!ROUTER_MODES.includes(mode)) throw invalid('mode', `must be one of ${ROUTER_MODES.join(', ')}`, mode);
  const queuePolicy = policy.queuePolicy ?? 'fcfs';
  if (!QUEUE_POLICIES.includes(queuePolicy))
    throw invalid('queuePolicy', `must be one of ${QUEUE_POLICIES.join(', ')}`, queuePolicy);
  const qt = policy.queueThreshold === undefined ? DEFAULT_QUEUE_THRESHOLD : policy.queueThreshold;
  if (qt !== null && !(typeof qt === 'number' && qt > 0 && Number.isFinite(qt)))
    throw invalid('queueThreshold', 'must be greater than 0 (null disables queueing)', qt);
  const refresh = policy.overlapRefreshAfterSecs ?? DEFAULT_OVERLAP_REFRESH_AFTER_SECS;
  if (!(typeof refresh === 'number' && refresh >= 0 && Number.isFinite(refresh)))
    throw invalid('overlapRefreshAfterSecs', 'must be a finite number >= 0', refresh);
  const expirySecs = policy.activeRequestExpirySecs ?? DEFAULT_EXPIRY_MS / 1000;
  if (!(typeof expirySecs === 'number' && expirySecs > 0 && Number.isFinite(expirySecs)))
    throw invalid('activeRequestExpirySecs', 'must be a finite number > 0', expirySecs);
  const ratio = policy.cudaToCpuRatio ?? DEFAULT_CUDA_TO_CPU_RATIO;
  if (!Number.isSafeInteger(ratio) || ratio < 1)
    throw invalid('cudaToCpuRatio', 'must be an integer >= 1', ratio);
  const phase = policy.phase ?? 'aggregated';
  if (phase !== 'aggregated' && phase !== 'prefill' && phase !== 'decode')
    throw invalid('phase', 'must be aggregated, prefill or decode', phase);
  if (ports.publishActiveSequenceEvent && typeof ports.routerId !== 'bigint')
    throw invalid('routerId', 'is required (a u64 bigint) for replica sync');
  if (ports.decisionLog) {
    const r = ports.decisionLog.sampleRate;
    if (typeof ports.decisionLog.sink !== 'function') throw invalid('decisionLog.sink', 'must be a function');
    if (!(typeof r === 'number' && r >= 0 && r <= 1))
      throw invalid('decisionLog.sampleRate', 'must be between 0.0 and 1.0', r);
  }
  const params = validateCostParams({ ...DEFAULT_COST_PARAMS, ...policy.cost });
  const thresholds = validateBusyThresholds(
    effectiveBusyThresholds(policy.admissionControl ?? 'none', {
      ...DEFAULT_BUSY_THRESHOLDS,
      ...policy.busyThresholds,
    }),
  );
  const pttl = policy.predictedTtlSecs;
  if (pttl != null && !(typeof pttl === 'number' && pttl > 0 && Number.isFinite(pttl)))
    throw invalid('predictedTtlSecs', 'must be > 0', pttl);
  // Predict-on-route (§7.6) makes bursts of siblings share unless the policy says otherwise.
  if (params.siblingShare === undefined && pttl != null) params.siblingShare = true;
  const predictor = deps.prefillDurationPredictor ?? null;
  return {
    blockSize: bs,
    isEagle: opts.isEagle ?? false,
    mode,
    phase,
    clock,
    random,
    randomU32: () => (random() * 4294967296) >>> 0,
    hr: deps.hrtime ?? (() => clock.now()),
    params,
    thresholds,
    queuePolicy,
    queueThreshold: mode === 'kv' ? qt : null,
    strictPriority: policy.strictPriority ?? false,
    queueRecheckMs: predictor ? QUEUE_RECHECK_AIC_MS : QUEUE_RECHECK_MS,
    refreshMs: refresh * 1000,
    expiryMs: expirySecs * 1000,
    cudaToCpuRatio: ratio,
    trackOutputBlocks: policy.trackOutputBlocks ?? false,
    predictedTtlSecs: pttl ?? null,
    explain: policy.explain === true,
    predictor,
    deps: deps as RouterDeps,
    ports,
    hooks,
    routerId: ports.routerId ?? null,
  };
}

/** Calls `onError` for a failure in background work; a failing hook never breaks routing. */
export function reporter(hooks: RouterHooks): (e: unknown, context: string) => void {
  return (e, context) => {
    try {
      hooks.onError?.(e, context);
    } catch {
      // A failing error hook must not break routing.
    }
  };
}

export function anyThreshold(t: BusyThresholds): boolean {
  return (
    t.activeDecodeBlocks !== null || t.activePrefillTokens !== null || t.activePrefillTokensFrac !== null
  );
}

/** The fields of `t` that are not undefined (a partial update must not clear what it omits). */
export function pickDefined<T extends object>(t: Partial<T>): Partial<T> {
  const out: Partial<T> = {};
  for (const k of Object.keys(t) as (keyof T)[]) if (t[k] !== undefined) out[k] = t[k];
  return out;
}
