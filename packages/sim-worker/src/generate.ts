/**
 * The `generate` endpoint's payload and stream items (PROTOCOL.md §5.7) and their validation. The
 * shapes are the request plane's wire maps, so the frontend can build payloads from these types.
 */
import { KvrError } from '@kvrouter/protocols';
import type { DisaggregatedParams } from './disagg.js';

export interface StopConditions {
  /** Output length; the stream ends with `length` after this many tokens. */
  max_tokens?: number | null;
  /** A generated token in this list ends the stream with `stop` (it is the last token sent). */
  stop_token_ids?: readonly number[] | null;
  /** Ignore `stop_token_ids` (the mocker has no EOS of its own, so these are the only stop tokens). */
  ignore_eos?: boolean | null;
}

export interface GenerateRequest {
  request_id: string;
  model: string;
  /** Prompt token ids. In-process callers may pass a `Uint32Array`; over msgpack a little-endian `Uint8Array` of u32s is read as such. */
  token_ids: readonly number[] | Uint32Array | Uint8Array;
  dp_rank?: number | null;
  stop_conditions?: StopConditions | null;
  /** Accepted and ignored: simulated tokens are drawn from a seeded generator. */
  sampling_options?: Record<string, unknown> | null;
  /** Accepted and ignored (the simulated scheduler is FIFO). */
  priority?: number | null;
  /** Disaggregated decode: the prefill worker's `disaggregated_params` (see `disagg.ts`); refused by aggregated and prefill workers. */
  disagg?: unknown;
}

export type FinishReason = 'stop' | 'length' | 'cancelled' | 'error';

export interface GenerateItem {
  token_ids: number[];
  finish_reason?: FinishReason;
  /** kvrouter addition, first item only: prompt tokens served from the engine's prefix cache. */
  cached_tokens?: number;
  /** Prefill workers, last item: the KV transfer parameters to forward to decode as `disagg`. */
  disaggregated_params?: DisaggregatedParams;
}

/** A validated request, in the engine's terms. */
export interface ParsedGenerate {
  requestId: string;
  model: string;
  tokenIds: Uint32Array;
  dpRank: number;
  /** Null = not given (the worker applies its default). */
  maxTokens: number | null;
  /** Null when none apply (none given, or `ignore_eos`). */
  stopTokenIds: ReadonlySet<number> | null;
  /** Set by a decode worker for a request with transfer parameters (engine `kvTransferred`). */
  kvTransferred?: boolean;
}

const U32_MAX = 0xffffffff;
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

export function invalidRequest(field: string, message: string): KvrError {
  return new KvrError('invalid_request', `generate ${field}: ${message}`, 400, { field });
}

function describe(v: unknown): string {
  if (typeof v === 'bigint') return `${v}n`;
  if (typeof v === 'string') return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v);
  if (Array.isArray(v)) return `an array`;
  if (v === null) return 'null';
  if (typeof v === 'object') return 'an object';
  return String(v as number | boolean | undefined);
}

/** An integer in [lo, hi] given as a number or (from a 64-bit msgpack int) a bigint. */
function intField(v: unknown, field: string, lo: number, hi: number): number {
  const n = typeof v === 'bigint' && v >= BigInt(lo) && v <= BigInt(hi) ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < lo || n > hi)
    throw invalidRequest(field, `expected an integer in [${lo}, ${hi}], got ${describe(v)}`);
  return n;
}

function tokenArray(v: unknown, field: string): Uint32Array {
  if (v instanceof Uint32Array) return v;
  if (v instanceof Uint8Array) {
    if (v.byteLength % 4 !== 0)
      throw invalidRequest(field, `a byte array must hold whole u32s, got ${v.byteLength} bytes`);
    // Copy: the bytes may sit at an offset that is not 4-aligned inside a decoded message.
    const out = new Uint32Array(v.byteLength / 4);
    if (!LITTLE_ENDIAN) throw invalidRequest(field, 'the byte form needs a little-endian host');
    new Uint8Array(out.buffer).set(v);
    return out;
  }
  if (!Array.isArray(v)) throw invalidRequest(field, `expected an array of u32, got ${describe(v)}`);
  const out = new Uint32Array(v.length);
  for (let i = 0; i < v.length; i++) out[i] = intField(v[i], `${field}[${i}]`, 0, U32_MAX);
  return out;
}

/** Validates a whole payload before anything is enqueued; the first bad field is named. */
export function parseGenerateRequest(payload: unknown): ParsedGenerate {
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload))
    throw invalidRequest('payload', `expected a map, got ${describe(payload)}`);
  const p = payload as Record<string, unknown>;
  const requestId = p.request_id;
  if (typeof requestId !== 'string' || requestId.length === 0 || requestId.length > 512)
    throw invalidRequest(
      'request_id',
      `expected a non-empty string of at most 512 characters, got ${describe(requestId)}`,
    );
  const model = p.model ?? '';
  if (typeof model !== 'string') throw invalidRequest('model', `expected a string, got ${describe(model)}`);
  const tokenIds = tokenArray(p.token_ids, 'token_ids');
  if (tokenIds.length === 0) throw invalidRequest('token_ids', 'empty prompt');
  const dpRank =
    p.dp_rank === undefined || p.dp_rank === null ? 0 : intField(p.dp_rank, 'dp_rank', 0, U32_MAX);

  let maxTokens: number | null = null;
  let stopTokenIds: Set<number> | null = null;
  const sc = p.stop_conditions;
  if (sc !== undefined && sc !== null) {
    if (typeof sc !== 'object' || Array.isArray(sc))
      throw invalidRequest('stop_conditions', `expected a map, got ${describe(sc)}`);
    const s = sc as Record<string, unknown>;
    if (s.max_tokens !== undefined && s.max_tokens !== null)
      maxTokens = intField(s.max_tokens, 'stop_conditions.max_tokens', 1, U32_MAX);
    const ignoreEos = s.ignore_eos ?? false;
    if (typeof ignoreEos !== 'boolean')
      throw invalidRequest('stop_conditions.ignore_eos', `expected a boolean, got ${describe(ignoreEos)}`);
    if (s.stop_token_ids !== undefined && s.stop_token_ids !== null) {
      const ids = s.stop_token_ids;
      if (!Array.isArray(ids))
        throw invalidRequest(
          'stop_conditions.stop_token_ids',
          `expected an array of u32, got ${describe(ids)}`,
        );
      const set = new Set<number>();
      for (let i = 0; i < ids.length; i++)
        set.add(intField(ids[i], `stop_conditions.stop_token_ids[${i}]`, 0, U32_MAX));
      if (!ignoreEos && set.size > 0) stopTokenIds = set;
    }
  }
  for (const k of ['sampling_options'] as const) {
    const v = p[k];
    if (v !== undefined && v !== null && (typeof v !== 'object' || Array.isArray(v)))
      throw invalidRequest(k, `expected a map, got ${describe(v)}`);
  }
  if (
    p.priority !== undefined &&
    p.priority !== null &&
    (typeof p.priority !== 'number' || !Number.isFinite(p.priority))
  )
    throw invalidRequest('priority', `expected a number, got ${describe(p.priority)}`);
  if (p.disagg !== undefined && p.disagg !== null)
    throw new KvrError(
      'not_supported',
      'generate disagg: disaggregated serving is not supported by this worker yet (aggregated only)',
      400,
      { field: 'disagg' },
    );
  return { requestId, model, tokenIds, dpRank, maxTokens, stopTokenIds };
}
