/**
 * Request intent: a `RouteRequest` checked and turned into what the rest of the router reads
 * (`Pending`). Preparation throws before any state changes, except the session lookup of §12
 * (a binding is refreshed, a `close` unbinds at arrival), which is part of arriving.
 */
import {
  applyOverrides,
  priorityJump,
  selectDirect,
  type CostParams,
  type RouterConfigOverride,
} from '@kvrouter/core-cost';
import {
  invalidArgument,
  KvrError,
  PREFILL_INSTANCE_HEADER,
  WORKER_INSTANCE_HEADER,
  isQueryOnly,
  parseU64,
  type WorkerId,
} from '@kvrouter/protocols';
import type { ResolvedOptions } from './options.js';
import type { SessionBinding } from './sessions.js';
import type { RouteRequest, RouterPhase, RoutingDecision, TokensPrefix } from './types.js';

export interface Pin {
  workerId: WorkerId;
  dpRank: number | null;
  reason: 'pinned' | 'session';
}

/** What the request asks for, fixed at arrival. */
export interface RequestIntent {
  id: string;
  isl: number;
  tokens: Uint32Array;
  /** `req.tokensPrefix`, checked; null when absent or `tokens` came from `nvext.token_data`. */
  prefix: TokensPrefix | null;
  loraName: string | undefined;
  /** Cost parameters with the request's overrides applied (§8.7). */
  params: CostParams;
  /** `agent_hints.osl`. */
  osl: number | null;
  /** Queue keys (§10). */
  priority: number;
  strictPriority: number | null;
  queryOnly: boolean;
  explain: boolean;
}

/** Where it may go (§8.1, §13, §15). */
export interface Placement {
  pin: Pin | null;
  allowed: ReadonlySet<bigint> | null;
  required: ReadonlySet<string> | null;
  preferred: ReadonlyMap<string, number> | null;
}

/** The prompt's hashes and overlaps. */
export interface Prompt {
  /** Local / sequence hashes as (lo, hi) pairs: scratch views until parked, then copies. */
  local: Uint32Array;
  seq: Uint32Array;
  /** Per-rank overlap (worker key → blocks); null without an index or after a failed lookup. */
  scores: Map<string, number> | null;
}

/** Phase timings (router `hrtime`, ms). */
export interface PhaseTimes {
  start: number;
  hash: number;
  seq: number;
  find: number;
}

/** A parked request's wait (§10). */
export interface Waiting {
  queuedAt: number;
  /** Overlaps re-queried at an admission attempt (once). */
  refreshed: boolean;
  settle: (d: RoutingDecision) => void;
  fail: (e: unknown) => void;
  unlisten: (() => void) | null;
}

/** `nvext.session_control` as it arrived (§12). */
export interface SessionIntent {
  sessionId: string;
  action: 'open' | 'close' | 'bind' | undefined;
  timeoutS: number;
  /** Binding found at arrival (refreshed). */
  binding: SessionBinding | undefined;
}

/** One request between arrival and decision. */
export interface Pending {
  readonly intent: RequestIntent;
  readonly where: Placement;
  readonly session: SessionIntent | null;
  readonly prompt: Prompt;
  readonly times: PhaseTimes;
  /** Set while parked (and kept once admitted, for the explanation). */
  wait: Waiting | null;
}

export const EMPTY = new Uint32Array(0);

export interface IntentContext {
  readonly o: ResolvedOptions;
  /** A request id already booked or parked. */
  isKnown(id: string): boolean;
  /** §12 arrival: looks the session up (refreshing it), unbinds on `close`. */
  arriveSession(req: RouteRequest, queryOnly: boolean, now: number): SessionIntent | null;
}

/** Names are integers >= -1, prefix lengths integers in [0, tokens]. */
function checkPrefix(p: TokensPrefix, tokens: number): TokensPrefix {
  const name = (v: unknown): boolean => Number.isSafeInteger(v) && (v as number) >= -1;
  const len = (v: unknown): boolean =>
    Number.isSafeInteger(v) && (v as number) >= 0 && (v as number) <= tokens;
  if (
    p === null ||
    typeof p !== 'object' ||
    !name(p.reused) ||
    !name(p.leaf) ||
    !len(p.reusedTokens) ||
    !len(p.leafTokens)
  )
    throw invalidArgument(
      'tokensPrefix',
      `must be { reused, leaf: integers >= -1; reusedTokens, leafTokens: integers in [0, ${tokens}] }`,
    );
  return p;
}

export function prepareIntent(req: RouteRequest, ctx: IntentContext): Pending {
  const o = ctx.o;
  if (!req || typeof req !== 'object') throw invalidArgument('request', 'must be an object');
  const id = req.requestId;
  if (typeof id !== 'string' || id.length === 0)
    throw invalidArgument('requestId', 'must be a non-empty string', id);
  const nv = req.nvext;
  const tokens = req.tokens ?? nv?.token_data;
  if (o.mode === 'kv' && !(tokens instanceof Uint32Array))
    throw invalidArgument('tokens', 'must be a Uint32Array of token ids');
  const isl = req.isl ?? tokens?.length ?? 0;
  if (!Number.isSafeInteger(isl) || isl < 0) throw invalidArgument('isl', 'must be an integer >= 0', isl);
  if (req.loraName !== undefined && typeof req.loraName !== 'string')
    throw invalidArgument('loraName', 'must be a string');
  const prefix =
    req.tokensPrefix !== undefined && req.tokens !== undefined
      ? checkPrefix(req.tokensPrefix, req.tokens.length)
      : null;
  const queryOnly = req.queryOnly === true || isQueryOnly(nv);
  if (!queryOnly && ctx.isKnown(id))
    throw new KvrError('duplicate_request', `request ${id} is already being routed`, 400, {
      field: 'requestId',
    });

  const hints = nv?.agent_hints;
  let ov: RouterConfigOverride | undefined = req.overrides;
  if (hints?.kv_overlap_score_credit != null && ov?.overlap_score_credit == null)
    ov = { ...ov, overlap_score_credit: hints.kv_overlap_score_credit };
  const params = applyOverrides(o.params, ov);

  let pin = resolvePin(req, o.phase);
  if (o.mode === 'direct' && !pin) selectDirect(null);
  const now = o.clock.now();

  const session = ctx.arriveSession(req, queryOnly, now);
  const binding = session?.binding;
  if (binding && !pin)
    pin = { workerId: binding.worker.worker_id, dpRank: binding.worker.dp_rank, reason: 'session' };

  let allowed: Set<bigint> | null = null;
  if (req.allowedWorkerIds != null) {
    allowed = new Set();
    for (const w of req.allowedWorkerIds) allowed.add(parseU64(w));
  }
  const c = req.constraints;
  const t = o.hr();
  return {
    intent: {
      id,
      isl,
      tokens: tokens ?? EMPTY,
      prefix,
      loraName: req.loraName,
      params,
      osl: hints?.osl ?? null,
      priority: priorityJump(hints),
      strictPriority: hints?.strict_priority ?? null,
      queryOnly,
      explain: req.explain === true || o.explain,
    },
    where: {
      pin,
      allowed,
      required: c && c.required_taints.size > 0 ? c.required_taints : null,
      preferred: c && c.preferred_taints.size > 0 ? c.preferred_taints : null,
    },
    session,
    prompt: { local: EMPTY, seq: EMPTY, scores: null },
    times: { start: t, hash: 0, seq: 0, find: 0 },
    wait: null,
  };
}

/** §15 pins per phase; the header wins over nvext. */
function resolvePin(req: RouteRequest, phase: RouterPhase): Pin | null {
  const nv = req.nvext;
  const header = req.pinHeader !== undefined && req.pinHeader !== '' ? req.pinHeader : undefined;
  let id: bigint | undefined;
  let rank: number | undefined;
  if (header !== undefined) {
    try {
      id = parseU64(header.trim());
    } catch {
      const name = phase === 'prefill' ? PREFILL_INSTANCE_HEADER : WORKER_INSTANCE_HEADER;
      throw new KvrError('invalid_request', `${name} must be a u64 (an integer or a decimal string)`, 400, {
        field: name,
      });
    }
  }
  if (phase === 'prefill') {
    id ??= nv?.prefill_worker_id;
    rank = nv?.prefill_dp_rank;
  } else {
    id ??= phase === 'decode' ? (nv?.decode_worker_id ?? nv?.backend_instance_id) : nv?.backend_instance_id;
    rank = nv?.dp_rank;
  }
  return id === undefined ? null : { workerId: id as WorkerId, dpRank: rank ?? null, reason: 'pinned' };
}

export function hasAll(have: ReadonlySet<string>, need: ReadonlySet<string>): boolean {
  for (const t of need) if (!have.has(t)) return false;
  return true;
}
