/**
 * The standalone router's own endpoints (`route`, `mark_prefill_completed`, `free`): payload
 * validation and reply shapes, shared by the request plane and the HTTP API so both speak the same
 * JSON. Every check runs before anything reaches the router; errors name the field.
 */
import { invalidRequest as bad, parseU64, type WorkerId } from '@kvrouter/protocols';
import type { RouteRequest, RoutingDecision } from '@kvrouter/router';

export const ROUTE_ENDPOINT = 'route';
export const MARK_PREFILL_COMPLETED_ENDPOINT = 'mark_prefill_completed';
export const FREE_ENDPOINT = 'free';
/** Route + forward (upstream's `generate` on the router component): the §5.7 generate payload in, the worker's items out. */
export const GENERATE_VIA_ROUTER_ENDPOINT = 'generate';
/** Component of the standalone router's own endpoints (upstream `python -m dynamo.router` serves under `router`). */
export const ROUTER_COMPONENT = 'router';

export interface RoutePayload {
  request_id: string;
  token_ids: Uint32Array;
  lora_name?: string;
  query_only: boolean;
  /** Pin (§15): route to this worker (and rank) instead of choosing. */
  backend_instance_id?: bigint;
  dp_rank?: number;
  router_config_override?: RouteRequest['overrides'];
}

export interface RouteReply {
  request_id: string;
  worker_id: WorkerId;
  dp_rank: number;
  overlap_blocks: number;
  cached_tokens: number;
  required_blocks: number;
  /** false for query-only decisions: nothing to free. */
  booked: boolean;
}

function obj(v: unknown): Record<string, unknown> {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw bad('body', 'expected a JSON object');
  return v as Record<string, unknown>;
}

function requestId(o: Record<string, unknown>, required: boolean, make: () => string): string {
  const id = o.request_id;
  if (id === undefined || id === null) {
    if (required) throw bad('request_id', 'is required');
    return make();
  }
  if (typeof id !== 'string' || id.length === 0 || id.length > 256)
    throw bad('request_id', 'must be a non-empty string of at most 256 characters');
  return id;
}

const OVERRIDE_NUMBERS = [
  'overlap_score_credit',
  'prefill_load_scale',
  'router_temperature',
  'shared_cache_multiplier',
  'overlap_score_weight',
] as const;
const OVERRIDE_BOOLS = ['assume_kv_reuse', 'track_prefill_tokens'] as const;

function overrides(v: unknown): RouteRequest['overrides'] {
  if (v === undefined || v === null) return undefined;
  const o = obj(v);
  const out: Record<string, number | boolean | null> = {};
  for (const k of Object.keys(o)) {
    const x = o[k];
    const f = `router_config_override.${k}`;
    if ((OVERRIDE_NUMBERS as readonly string[]).includes(k)) {
      if (x !== null && (typeof x !== 'number' || !Number.isFinite(x)))
        throw bad(f, 'must be a finite number or null');
    } else if ((OVERRIDE_BOOLS as readonly string[]).includes(k)) {
      if (x !== null && typeof x !== 'boolean') throw bad(f, 'must be a boolean or null');
    } else throw bad(f, 'is not a router override');
    out[k] = x as number | boolean | null;
  }
  return out;
}

/** `route`: `{request_id?, token_ids, lora_name?, query_only?, backend_instance_id?, dp_rank?, router_config_override?}`. */
export function parseRoute(v: unknown, makeId: () => string): RoutePayload {
  const o = obj(v);
  const t = o.token_ids;
  if (!Array.isArray(t)) throw bad('token_ids', 'must be an array of token ids');
  const tokens = new Uint32Array(t.length);
  for (let i = 0; i < t.length; i++) {
    const x: unknown = t[i];
    if (typeof x !== 'number' || !Number.isInteger(x) || x < 0 || x > 0xffffffff)
      throw bad(`token_ids[${i}]`, 'must be an integer 0..4294967295');
    tokens[i] = x;
  }
  const out: RoutePayload = { request_id: requestId(o, false, makeId), token_ids: tokens, query_only: false };
  if (o.query_only !== undefined && o.query_only !== null) {
    if (typeof o.query_only !== 'boolean') throw bad('query_only', 'must be a boolean');
    out.query_only = o.query_only;
  }
  if (o.lora_name !== undefined && o.lora_name !== null) {
    if (typeof o.lora_name !== 'string') throw bad('lora_name', 'must be a string');
    out.lora_name = o.lora_name;
  }
  if (o.backend_instance_id !== undefined && o.backend_instance_id !== null) {
    try {
      out.backend_instance_id = parseU64(o.backend_instance_id as bigint | number | string);
    } catch {
      throw bad('backend_instance_id', 'must be a u64 (an integer or a decimal string)');
    }
  }
  if (o.dp_rank !== undefined && o.dp_rank !== null) {
    const r = o.dp_rank;
    if (typeof r !== 'number' || !Number.isInteger(r) || r < 0 || r > 0xffffffff)
      throw bad('dp_rank', 'must be an integer 0..4294967295');
    out.dp_rank = r;
  }
  const ov = overrides(o.router_config_override);
  if (ov) out.router_config_override = ov;
  return out;
}

/** Router-only fields, not forwarded to the worker. */
const ROUTER_FIELDS = ['query_only', 'backend_instance_id', 'router_config_override', 'lora_name'];

/**
 * The worker's §5.7 `generate` payload for a routed request: the caller's payload without the
 * router-only fields, with the request id and the chosen rank.
 */
export function forwardPayload(body: unknown, requestId: string, dpRank: number): Record<string, unknown> {
  const out: Record<string, unknown> = { ...obj(body) };
  for (const k of ROUTER_FIELDS) delete out[k];
  out.request_id = requestId;
  out.dp_rank = dpRank;
  return out;
}

/** `mark_prefill_completed` and `free`: `{request_id}`. */
export function parseRequestRef(v: unknown): { request_id: string } {
  return { request_id: requestId(obj(v), true, () => '') };
}

/** `signal`: the caller went away (a parked request then leaves the queue without booking). */
export function toRouteRequest(p: RoutePayload, signal?: AbortSignal): RouteRequest {
  const r: RouteRequest = { requestId: p.request_id, tokens: p.token_ids, queryOnly: p.query_only };
  if (signal) r.signal = signal;
  if (p.lora_name !== undefined) r.loraName = p.lora_name;
  if (p.router_config_override) r.overrides = p.router_config_override;
  if (p.backend_instance_id !== undefined) {
    r.nvext = {
      backend_instance_id: p.backend_instance_id as WorkerId,
      ...(p.dp_rank !== undefined ? { dp_rank: p.dp_rank } : {}),
    } as RouteRequest['nvext'];
  }
  return r;
}

export function routeReply(d: RoutingDecision): RouteReply {
  return {
    request_id: d.requestId,
    worker_id: d.workerId,
    dp_rank: d.dpRank,
    overlap_blocks: d.overlapBlocks,
    cached_tokens: d.cachedTokens,
    required_blocks: d.requiredBlocks,
    booked: d.booked,
  };
}
