/**
 * Disaggregated prefill / decode serving (docs/protocol.md §14) with topology-aware KV transfer (§13).
 *
 * Cards of type `prefill` in a model's namespace become prefill worker sets (their own KvRouter,
 * phase `prefill`, active-block tracking off) held by the model's `DisaggState`; the first one seen
 * activates disaggregation. Per request, before the decode router runs:
 *
 *   prefill router picks a prefill worker → topology constraints derived from its runtime config
 *   (fail closed) and merged with the request's own → required constraints checked against the
 *   decode workers (none compatible → 503) → only then prefill is dispatched with `max_tokens = 1`
 *   → its `disaggregated_params` go to the decode leg, routed with the decode overrides
 *   (credit 0, prefill_load_scale 0, assume_kv_reuse false, track_prefill_tokens false).
 *
 * Not activated: aggregated, or 503 with `--enforce-disagg`. Activated but every prefill worker
 * gone: aggregated on the decode workers with `--decode-fallback`, else 503.
 */
import {
  KvrError,
  isQueryOnly,
  u64ToHex,
  type Nvext,
  type RoutingConstraints,
  type WorkerWithDpRank,
} from '@kvrouter/protocols';
import { TopologyMetrics, topologyMetrics, type Registry } from '@kvrouter/metrics';
import type { KvRouter, KvRouterOptions, RoutingDecision } from '@kvrouter/router';
import type { CatalogWorker } from '@kvrouter/router-host';
import type { RequestClient, Transport } from '@kvrouter/runtime';
import type { GenerateItem, GenerateRequest, Logger } from '@kvrouter/protocols';
import {
  TopologyConstraintError,
  deriveDecodeConstraints,
  isEmptyConstraints,
  mergeConstraints,
  satisfiesRequired,
  symptomLogLine,
  workerTaints,
  type DerivedConstraints,
  type TopologySymptom,
} from '@kvrouter/topology';
import type { RouterConfigOverride } from '@kvrouter/core-cost';

/**
 * What disaggregated serving uses of a worker set: models.ts's `WorkerSet` satisfies it. Named here, not imported,
 * so that models.ts -> disagg.ts stays one-way (no import cycle).
 */
interface WorkerSet {
  readonly namespace: string;
  readonly component: string;
  readonly endpoint: string;
  readonly router: KvRouter;
  readonly workers: Map<bigint, CatalogWorker>;
  readonly readyCount: number;
  transportOf(id: bigint): Transport | null;
  markDown(id: bigint): void;
}

/** `--enforce-disagg`, `--decode-fallback`. */
export interface DisaggFlags {
  enforceDisagg: boolean;
  decodeFallback: boolean;
}

/** §14 decode-leg overrides (S: `overlap_score_weight = 0`). */
const DECODE_LEG_OVERRIDES: Readonly<RouterConfigOverride> = Object.freeze({
  overlap_score_credit: 0,
  prefill_load_scale: 0,
  assume_kv_reuse: false,
  track_prefill_tokens: false,
});

/** Router options of a prefill worker set: prefill-phase pins, no active-block tracking (§14). */
export function prefillRouterOptions(o: KvRouterOptions): KvRouterOptions {
  const policy = o.policy ?? {};
  return {
    ...o,
    policy: {
      ...policy,
      phase: 'prefill',
      cost: { ...policy.cost, trackActiveBlocks: false },
      trackOutputBlocks: false,
    },
  };
}

/** Log lines of frequent symptoms: the 1st, 10th, 100th, then every 1000th. */
const sampled = (n: number): boolean => n === 1 || n === 10 || n === 100 || n % 1000 === 0;

/** One model's prefill side. */
export class DisaggState {
  readonly sets: WorkerSet[] = [];
  /** A prefill card was seen (§14 activation); stays true after the last prefill worker leaves. */
  activated = false;
  private rr = 0;
  private readonly counts = new Map<TopologySymptom, number>();
  /** Prefill legs run to completion before decode / run in the background (bootstrap variant). */
  sequentialLegs = 0;
  bootstrapLegs = 0;

  constructor(
    readonly model: string,
    readonly flags: DisaggFlags = { enforceDisagg: false, decodeFallback: false },
  ) {}

  addSet(s: WorkerSet): void {
    this.sets.push(s);
    this.activated = true;
  }

  removeSet(s: WorkerSet): void {
    const i = this.sets.indexOf(s);
    if (i >= 0) this.sets.splice(i, 1);
  }

  get readyCount(): number {
    let n = 0;
    for (const s of this.sets) n += s.readyCount;
    return n;
  }

  /** Round robin over prefill sets that have workers. */
  pick(): WorkerSet | null {
    const n = this.sets.length;
    for (let i = 0; i < n; i++) {
      const s = this.sets[(this.rr + i) % n]!;
      if (s.readyCount > 0) {
        this.rr = (this.rr + i + 1) % n;
        return s;
      }
    }
    return null;
  }

  /** Whether this request goes disaggregated (true), aggregated (false), or fails (throws 503). */
  mode(): boolean {
    if (this.readyCount > 0) return true;
    if (!this.activated) {
      if (this.flags.enforceDisagg)
        throw new KvrError(
          'prefill_workers_missing',
          `model ${this.model}: no prefill worker has been seen yet and --enforce-disagg is set`,
          503,
          { error_type: 'overload' },
        );
      return false;
    }
    if (this.flags.decodeFallback) return false;
    throw new KvrError(
      'prefill_workers_missing',
      `model ${this.model}: every prefill worker has gone (serve aggregated with --decode-fallback)`,
      503,
      { error_type: 'overload' },
    );
  }

  /** Counts a symptom and returns whether this occurrence gets a log line. */
  note(s: TopologySymptom): { count: number; log: boolean } {
    const count = (this.counts.get(s) ?? 0) + 1;
    this.counts.set(s, count);
    return { count, log: sampled(count) };
  }
}

/** What the decode leg needs from the prefill leg. */
export interface DecodeLeg {
  prefill: WorkerWithDpRank;
  /** Decode-phase pins: `decode_worker_id` / `dp_rank` as the aggregated router's `backend_instance_id`. */
  nvext: Nvext;
  overrides: RouterConfigOverride;
  /** Merged constraints; undefined when empty. */
  constraints: RoutingConstraints | undefined;
  /** The prefill worker's transfer parameters for the decode payload (`disagg`); null for query-only. */
  disagg: Record<string, unknown> | null;
  derived: DerivedConstraints;
  /** Placement metrics after the decode router picked. */
  decodeRouted(d: RoutingDecision): void;
}

export interface PrefillLegArgs {
  state: DisaggState;
  /** The decode worker set the request goes to. */
  decodeSet: WorkerSet;
  requestId: string;
  model: string;
  tokens: Uint32Array;
  nvext: Nvext;
  /** Header `x-prefill-instance-id`. */
  prefillHeader?: string;
  /** The request's own constraints (none in v1 nvext; programmatic callers). */
  constraints?: RoutingConstraints | null;
  signal: AbortSignal;
  client: RequestClient;
  registry: Registry;
  log: Logger;
  /** Receives the transfer time the prefill worker reports (`kv_transfer_estimated_latency_seconds`). */
  onTransferSeconds?: (s: number) => void;
}

/**
 * The prefill leg of one request (or null: serve aggregated). Throws 503 before anything is
 * dispatched when no prefill worker may serve it or its constraints cannot be met.
 */
export async function runPrefillLeg(a: PrefillLegArgs): Promise<DecodeLeg | null> {
  const st = a.state;
  if (!st.mode()) return null;
  const pset = st.pick();
  if (!pset) return null; // raced with the last worker leaving; mode() covers the next request
  const queryOnly = isQueryOnly(a.nvext);
  const { session_control: _s, ...prefillNvext } = a.nvext;
  const router = pset.router;
  // Its own id: a bootstrap prefill can outlive this attempt (a migration retry runs a new leg).
  const pid = `${a.requestId}/prefill-${++prefillSeq}`;
  const pd = await router.route({
    requestId: pid,
    tokens: a.tokens,
    nvext: prefillNvext,
    pinHeader: a.prefillHeader,
    signal: a.signal,
  });
  const m = topologyMetrics(a.registry);
  const ep = TopologyMetrics.labels(a.decodeSet);
  const hex = u64ToHex(pd.workerId);
  const free = (): void => void router.free(pid);
  let derived: DerivedConstraints;
  let merged: RoutingConstraints;
  try {
    const rc = pset.workers.get(pd.workerId)?.card?.runtime_config;
    try {
      derived = deriveDecodeConstraints(rc, hex);
    } catch (e) {
      if (e instanceof TopologyConstraintError) {
        m.constraintErrors.inc({ ...ep, reason: e.detail.reason });
        const n = st.note('constraints_underivable');
        if (n.log)
          a.log.warn(
            symptomLogLine('constraints_underivable', {
              model: a.model,
              prefillWorker: hex,
              reason: e.detail.reason,
              count: n.count,
            }),
          );
      }
      throw e;
    }
    if (derived.kind === 'none' && otherPrefillPublishes(st, pd.workerId)) {
      m.metadataMissing.inc(ep);
      const n = st.note('metadata_missing');
      if (n.log)
        a.log.warn(
          symptomLogLine('metadata_missing', { model: a.model, prefillWorker: hex, count: n.count }),
        );
    }
    merged = mergeConstraints(a.constraints, derived.kind === 'none' ? null : derived.constraints);
    if (merged.required_taints.size > 0 && !anyDecodeSatisfies(a.decodeSet, merged)) {
      m.requiredUnsatisfied.inc(ep);
      const taint = derived.kind === 'none' ? [...merged.required_taints].join(',') : derived.taint;
      const n = st.note('required_no_endpoint');
      if (n.log)
        a.log.warn(
          symptomLogLine('required_no_endpoint', {
            model: a.model,
            prefillWorker: hex,
            taint,
            count: n.count,
          }),
        );
      throw new KvrError(
        'no_eligible_workers',
        `no decode worker of model ${a.model} holds the required taint(s) ${[...merged.required_taints].join(', ')} of prefill worker ${hex}; nothing was dispatched`,
        503,
        { error_type: 'overload' },
      );
    }
  } catch (e) {
    free();
    throw e;
  }

  let params: Record<string, unknown> | null = null;
  const boot = bootstrapEndpoint(pset.workers.get(pd.workerId)?.card?.runtime_config.disaggregated_endpoint);
  const observe = (p: Record<string, unknown>): void => {
    const ms = p.transfer_ms;
    if (typeof ms === 'number' && ms >= 0) a.onTransferSeconds?.(ms / 1000);
  };
  if (queryOnly) {
    // routed only: nothing dispatched, nothing booked
  } else if (boot) {
    // Bootstrap variant: prefill runs in the background (not cancelled when the client goes away);
    // decode goes now and waits for the room at the prefill worker's bootstrap endpoint.
    st.bootstrapLegs++;
    void dispatchPrefill({ ...a, signal: new AbortController().signal }, pset, pd, pid)
      .then(observe, (e: unknown) => a.log.warn(`prefill ${pid} on ${hex} failed: ${(e as Error).message}`))
      .finally(free);
    params = {
      prefill_worker_id: hex,
      prefill_dp_rank: pd.dpRank,
      bootstrap_host: boot.host,
      bootstrap_port: boot.port,
      bootstrap_room: pid,
    };
  } else {
    st.sequentialLegs++;
    try {
      params = await dispatchPrefill(a, pset, pd, pid);
    } finally {
      free();
    }
    observe(params);
  }

  const nv: Nvext = { ...a.nvext };
  if (a.nvext.decode_worker_id !== undefined) nv.backend_instance_id = a.nvext.decode_worker_id;
  return {
    prefill: pd.worker,
    nvext: nv,
    overrides: DECODE_LEG_OVERRIDES,
    constraints: isEmptyConstraints(merged) ? undefined : merged,
    disagg: params,
    derived,
    decodeRouted: (d) => {
      if (derived.kind === 'none' || d.queryOnly) return;
      const rc = a.decodeSet.workers.get(d.workerId)?.card?.runtime_config;
      const inDomain = rc !== undefined && workerTaints(rc).has(derived.taint);
      m.decodePlacements.inc({
        ...ep,
        enforcement: derived.kind,
        placement: inDomain ? 'in_domain' : 'cross_domain',
      });
      if (!inDomain && derived.kind === 'preferred') {
        const n = st.note('preferred_cross_domain');
        if (n.log)
          a.log.warn(
            symptomLogLine('preferred_cross_domain', {
              model: a.model,
              prefillWorker: hex,
              decodeWorker: u64ToHex(d.workerId),
              taint: derived.taint,
              count: n.count,
            }),
          );
      }
    },
  };
}

/** Streams the prefill request (`max_tokens = 1`) and returns the worker's transfer parameters. */
async function dispatchPrefill(
  a: PrefillLegArgs,
  pset: WorkerSet,
  pd: RoutingDecision,
  pid: string,
): Promise<Record<string, unknown>> {
  const transport = pset.transportOf(pd.workerId);
  if (!transport)
    throw new KvrError(
      'cannot_connect',
      `prefill worker ${u64ToHex(pd.workerId)} has no known transport`,
      503,
    );
  const payload: GenerateRequest = {
    request_id: pid,
    model: a.model,
    token_ids: a.tokens,
    dp_rank: pd.dpRank,
    stop_conditions: { max_tokens: 1, ignore_eos: true },
  };
  let params: unknown = null;
  let first = true;
  try {
    for await (const item of a.client.stream<GenerateItem>(transport, 'generate', payload, {
      signal: a.signal,
    })) {
      if (first && item.token_ids.length > 0) {
        first = false;
        pset.router.markPrefillCompleted(pid);
      }
      if (item.disaggregated_params !== undefined) params = item.disaggregated_params;
      if (item.finish_reason === 'error')
        throw new KvrError('engine_error', 'the prefill engine failed the request', 502);
      if (item.finish_reason === 'cancelled')
        throw new KvrError('cancelled', 'the prefill engine cancelled the request', 499);
    }
  } catch (e) {
    if (a.signal.aborted) throw new KvrError('cancelled', 'client disconnected', 499);
    const code = (e as KvrError).code;
    if (code === 'cannot_connect' || code === 'disconnected' || code === 'connection_timeout')
      pset.markDown(pd.workerId);
    throw e;
  }
  if (a.signal.aborted) throw new KvrError('cancelled', 'client disconnected', 499);
  if (typeof params !== 'object' || params === null || Array.isArray(params))
    throw new KvrError(
      'prefill_failed',
      `prefill worker ${u64ToHex(pd.workerId)} returned no disaggregated_params`,
      502,
    );
  return params as Record<string, unknown>;
}

let prefillSeq = 0;

/** `runtime_config.disaggregated_endpoint` as `{host, port}`, or null (no bootstrap variant). */
function bootstrapEndpoint(v: unknown): { host: string; port: number } | null {
  if (typeof v !== 'object' || v === null) return null;
  const { host, port } = v as { host?: unknown; port?: unknown };
  if (
    typeof host !== 'string' ||
    host === '' ||
    typeof port !== 'number' ||
    !Number.isInteger(port) ||
    port < 1 ||
    port > 65535
  )
    return null;
  return { host, port };
}

function anyDecodeSatisfies(set: WorkerSet, c: RoutingConstraints): boolean {
  for (const w of set.workers.values())
    if (w.routed && w.card && satisfiesRequired(workerTaints(w.card.runtime_config), c)) return true;
  return false;
}

function otherPrefillPublishes(st: DisaggState, except: bigint): boolean {
  for (const s of st.sets)
    for (const w of s.workers.values())
      if (w.id !== except && w.card?.runtime_config.kv_transfer_domain != null) return true;
  return false;
}
