/**
 * The `nvext` request extension (docs/protocol.md §15), its `agent_hints` and `session_control` (§12), and
 * `RoutingConstraints` (§13). `parseNvext` validates a request body's `nvext` member and throws
 * `KvrError('invalid_request', message, 400, {field})` with the messages of docs/configuration.md "Per request".
 * u64 fields accept an integer or a decimal string; parse the body with `parseJson` (events/json.ts)
 * so integers above 2^53 arrive exact.
 */
import { KvrError } from './errors.js';
import { U64_MAX, type WorkerId } from './ids.js';

export interface AgentHints {
  /** i32; queue `priority_jump = max(priority, 0)`; forwarded to the engine. */
  priority?: number;
  /** Deprecated alias of `priority`, used only when `priority` is absent. */
  latency_sensitivity?: number;
  /** u32 outer queue tier (optional upstream feature). */
  strict_priority?: number;
  /** u32 expected output tokens (output-block decay, §9.3). */
  osl?: number;
  speculative_prefill?: boolean;
  /** 0..1 per-request overlap credit (§8.7). */
  kv_overlap_score_credit?: number;
}

export type SessionAction = 'open' | 'close' | 'bind';
export const SESSION_ACTIONS: readonly SessionAction[] = ['open', 'close', 'bind'];
export const DEFAULT_SESSION_TIMEOUT_S = 300;
/** Longest `session_id` accepted (issue 17: ids are held by the router's session table). */
const MAX_SESSION_ID_CHARS = 1024;

export interface SessionControl {
  session_id: string;
  /** Absent = lookup only. */
  action?: SessionAction;
  /** Seconds; default 300. */
  timeout: number;
}

export interface Nvext {
  backend_instance_id?: WorkerId;
  prefill_worker_id?: WorkerId;
  decode_worker_id?: WorkerId;
  dp_rank?: number;
  prefill_dp_rank?: number;
  /** Pre-tokenised prompt. */
  token_data?: Uint32Array;
  agent_hints?: AgentHints;
  session_control?: SessionControl;
  /** e.g. `"worker_id"`, `"timing"`. */
  extra_fields?: string[];
  /** e.g. `"query_instance_id:<anything>"`. */
  annotations?: string[];
  /** Members kvrouter does not interpret (sampling extensions, ...), passed through untouched. */
  other?: Record<string, unknown>;
}

/** `RoutingConstraints` (§13); on the wire empty members are omitted. */
export interface RoutingConstraints {
  required_taints: Set<string>;
  /** taint -> weight; the cost multiplier is exp(−tanh(Σ weights held)). */
  preferred_taints: Map<string, number>;
}

// ---------------------------------------------------------------------------------------------------

const KNOWN = new Set([
  'backend_instance_id',
  'prefill_worker_id',
  'decode_worker_id',
  'dp_rank',
  'prefill_dp_rank',
  'token_data',
  'agent_hints',
  'session_control',
  'extra_fields',
  'annotations',
]);

function bad(field: string, message: string): KvrError {
  return new KvrError('invalid_request', message, 400, { field });
}

const isObj = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
const present = (v: unknown): boolean => v !== undefined && v !== null;

function u64Field(v: unknown, field: string): WorkerId {
  if (typeof v === 'bigint' && v >= 0n && v <= U64_MAX) return v as WorkerId;
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return BigInt(v) as WorkerId;
  if (typeof v === 'string' && /^[0-9]{1,20}$/.test(v)) {
    const b = BigInt(v);
    if (b <= U64_MAX) return b as WorkerId;
  }
  throw bad(field, `${field} must be a u64 (an integer or a decimal string)`);
}

function u32Field(v: unknown, field: string): number {
  const n = typeof v === 'bigint' && v >= 0n && v <= 0xffffffffn ? Number(v) : v;
  if (typeof n === 'number' && Number.isInteger(n) && n >= 0 && n <= 0xffffffff) return n;
  throw bad(field, `${field} must be an integer between 0 and 4294967295`);
}

function stringList(v: unknown, field: string): string[] {
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string'))
    throw bad(field, `${field} must be an array of strings`);
  return v.slice();
}

function tokenData(v: unknown): Uint32Array {
  const f = 'nvext.token_data';
  if (!Array.isArray(v)) throw bad(f, `${f} must be an array of token ids`);
  const out = new Uint32Array(v.length);
  for (let i = 0; i < v.length; i++) {
    const x: unknown = v[i];
    if (typeof x !== 'number' || !Number.isInteger(x) || x < 0 || x > 0xffffffff)
      throw bad(`${f}[${i}]`, `${f}[${i}] must be a token id between 0 and 4294967295`);
    out[i] = x;
  }
  return out;
}

function agentHints(v: unknown): AgentHints {
  const f = 'nvext.agent_hints';
  if (!isObj(v)) throw bad(f, `${f} must be an object`);
  const h: AgentHints = {};
  if (present(v.priority)) {
    const p = typeof v.priority === 'bigint' ? Number(v.priority) : v.priority;
    if (typeof p !== 'number' || !Number.isInteger(p) || p < -0x80000000 || p > 0x7fffffff)
      throw bad(`${f}.priority`, `${f}.priority must be an integer between -2147483648 and 2147483647`);
    h.priority = p;
  }
  if (present(v.latency_sensitivity)) {
    if (typeof v.latency_sensitivity !== 'number' || !Number.isFinite(v.latency_sensitivity))
      throw bad(`${f}.latency_sensitivity`, `${f}.latency_sensitivity must be a finite number`);
    h.latency_sensitivity = v.latency_sensitivity;
  }
  if (present(v.strict_priority)) h.strict_priority = u32Field(v.strict_priority, `${f}.strict_priority`);
  if (present(v.osl)) h.osl = u32Field(v.osl, `${f}.osl`);
  if (present(v.speculative_prefill)) {
    if (typeof v.speculative_prefill !== 'boolean')
      throw bad(`${f}.speculative_prefill`, `${f}.speculative_prefill must be a boolean`);
    h.speculative_prefill = v.speculative_prefill;
  }
  if (present(v.kv_overlap_score_credit)) {
    const c = v.kv_overlap_score_credit;
    if (typeof c !== 'number' || !(c >= 0 && c <= 1))
      throw bad(`${f}.kv_overlap_score_credit`, `${f}.kv_overlap_score_credit must be between 0.0 and 1.0`);
    h.kv_overlap_score_credit = c;
  }
  return h;
}

function sessionControl(v: unknown): SessionControl {
  const f = 'nvext.session_control';
  if (!isObj(v)) throw bad(f, `${f} must be an object`);
  if (typeof v.session_id !== 'string' || v.session_id.length === 0)
    throw bad(`${f}.session_id`, `${f}.session_id must be a non-empty string`);
  if (v.session_id.length > MAX_SESSION_ID_CHARS)
    throw bad(`${f}.session_id`, `${f}.session_id must be at most ${MAX_SESSION_ID_CHARS} characters`);
  const s: SessionControl = { session_id: v.session_id, timeout: DEFAULT_SESSION_TIMEOUT_S };
  if (present(v.action)) {
    if (!SESSION_ACTIONS.includes(v.action as SessionAction))
      throw bad(`${f}.action`, `${f}.action must be one of open, close, bind`);
    s.action = v.action as SessionAction;
  }
  if (present(v.timeout)) {
    const t = typeof v.timeout === 'bigint' ? Number(v.timeout) : v.timeout;
    if (typeof t !== 'number' || !Number.isFinite(t))
      throw bad(`${f}.timeout`, `${f}.timeout must be an integer number of seconds`);
    if (t <= 0) throw bad(`${f}.timeout`, `${f}.timeout must be > 0`);
    if (!Number.isSafeInteger(t))
      throw bad(`${f}.timeout`, `${f}.timeout must be an integer number of seconds`);
    s.timeout = t;
  }
  return s;
}

/** Validates `body.nvext`; `undefined` / `null` give `{}`. Never returns a partially checked object. */
export function parseNvext(raw: unknown): Nvext {
  if (raw === undefined || raw === null) return {};
  if (!isObj(raw)) throw bad('nvext', 'nvext must be an object');
  const n: Nvext = {};
  if (present(raw.backend_instance_id))
    n.backend_instance_id = u64Field(raw.backend_instance_id, 'nvext.backend_instance_id');
  if (present(raw.prefill_worker_id))
    n.prefill_worker_id = u64Field(raw.prefill_worker_id, 'nvext.prefill_worker_id');
  if (present(raw.decode_worker_id))
    n.decode_worker_id = u64Field(raw.decode_worker_id, 'nvext.decode_worker_id');
  if (present(raw.dp_rank)) n.dp_rank = u32Field(raw.dp_rank, 'nvext.dp_rank');
  if (present(raw.prefill_dp_rank))
    n.prefill_dp_rank = u32Field(raw.prefill_dp_rank, 'nvext.prefill_dp_rank');
  if (present(raw.token_data)) n.token_data = tokenData(raw.token_data);
  if (present(raw.agent_hints)) n.agent_hints = agentHints(raw.agent_hints);
  if (present(raw.session_control)) n.session_control = sessionControl(raw.session_control);
  if (present(raw.extra_fields)) n.extra_fields = stringList(raw.extra_fields, 'nvext.extra_fields');
  if (present(raw.annotations)) n.annotations = stringList(raw.annotations, 'nvext.annotations');
  for (const k of Object.keys(raw)) {
    // An own "__proto__" key (possible from a JSON parse) must not become a prototype here.
    if (KNOWN.has(k) || k === '__proto__') continue;
    (n.other ??= {})[k] = raw[k];
  }
  return n;
}

/** Queue priority jump (§10): `max(priority, 0)`, falling back to the deprecated `latency_sensitivity`. */
export function priorityJump(n: Nvext | undefined): number {
  const h = n?.agent_hints;
  const p = h?.priority ?? h?.latency_sensitivity ?? 0;
  return Math.max(p, 0);
}

export const QUERY_INSTANCE_ANNOTATION = 'query_instance_id:';

/** Query-only request (§15): route, do not dispatch or book. */
export const isQueryOnly = (n: Nvext | undefined): boolean =>
  n?.annotations?.some((a) => a.startsWith(QUERY_INSTANCE_ANNOTATION)) ?? false;

export const WORKER_INSTANCE_HEADER = 'x-worker-instance-id';
export const PREFILL_INSTANCE_HEADER = 'x-prefill-instance-id';

/**
 * The worker pinned for aggregated/decode serving: header `x-worker-instance-id` wins over
 * `nvext.backend_instance_id`. Undefined when neither is set.
 */
export function pinnedWorker(n: Nvext | undefined, header?: string): WorkerId | undefined {
  if (header !== undefined && header !== '') return u64Field(header.trim(), WORKER_INSTANCE_HEADER);
  return n?.backend_instance_id;
}

/** `--router-mode direct`: the pinned worker, or the docs/configuration.md 400. */
export function directRoutingTarget(n: Nvext | undefined, header?: string): WorkerId {
  const w = pinnedWorker(n, header);
  if (w === undefined)
    throw bad(
      'nvext.backend_instance_id',
      'direct routing requires nvext.backend_instance_id or x-worker-instance-id',
    );
  return w;
}

// ---------------------------------------------------------------------------------------------------
// RoutingConstraints

export function emptyRoutingConstraints(): RoutingConstraints {
  return { required_taints: new Set(), preferred_taints: new Map() };
}

/** Parses the JSON form `{required_taints?: [string], preferred_taints?: {taint: weight}}`. */
export function parseRoutingConstraints(raw: unknown, field = 'routing_constraints'): RoutingConstraints {
  const c = emptyRoutingConstraints();
  if (raw === undefined || raw === null) return c;
  if (!isObj(raw)) throw bad(field, `${field} must be an object`);
  if (present(raw.required_taints)) {
    for (const t of stringList(raw.required_taints, `${field}.required_taints`)) c.required_taints.add(t);
  }
  if (present(raw.preferred_taints)) {
    const p = raw.preferred_taints;
    const f = `${field}.preferred_taints`;
    if (!isObj(p)) throw bad(f, `${f} must be an object of taint -> weight`);
    for (const [k, w] of Object.entries(p)) {
      if (typeof w !== 'number' || !Number.isFinite(w))
        throw bad(`${f}.${k}`, `${f}.${k} must be a finite number`);
      c.preferred_taints.set(k, w);
    }
  }
  return c;
}

export function routingConstraintsToJson(c: RoutingConstraints): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (c.required_taints.size > 0) out.required_taints = [...c.required_taints].sort();
  if (c.preferred_taints.size > 0)
    out.preferred_taints = Object.fromEntries([...c.preferred_taints].sort(([a], [b]) => (a < b ? -1 : 1)));
  return out;
}
