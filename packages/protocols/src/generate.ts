/**
 * The `generate` endpoint's payload and stream items (docs/protocol.md §5.7) and their validation, and the
 * disaggregation transfer parameters a prefill worker returns and a decode worker accepts (§14). The
 * shapes are the request plane's wire maps: the frontend, the simulated workers and the real-engine
 * adapter all speak the protocol through these types, without depending on each other.
 */
import { KvrError, describeValue as describe, invalidRequest } from './errors.js';

export interface StopConditions {
  /** Output length; the stream ends with `length` after this many tokens. */
  max_tokens?: number | null;
  /** A generated token in this list ends the stream with `stop` (it is the last token sent). */
  stop_token_ids?: readonly number[] | null;
  /** Ignore `stop_token_ids` (the mocker has no EOS of its own, so these are the only stop tokens). */
  ignore_eos?: boolean | null;
  /** No stop (EOS, stop ids) before this many output tokens. */
  min_tokens?: number | null;
}

/** Dynamo's `output_options`: what the engine returns besides tokens. */
export interface OutputOptions {
  /** Top alternatives per output token: the items then carry `log_probs` (and `top_logprobs` when > 0). */
  logprobs?: number | null;
}

/** Dynamo's `multi_modal_data`: media of the prompt, in order of their placeholders. */
export interface MultiModalData {
  image_url?: { url: string }[];
}

export interface GenerateRequest {
  request_id: string;
  model: string;
  /** Prompt token ids. In-process callers may pass a `Uint32Array`; over msgpack a little-endian `Uint8Array` of u32s is read as such. */
  token_ids: readonly number[] | Uint32Array | Uint8Array;
  dp_rank?: number | null;
  stop_conditions?: StopConditions | null;
  /**
   * temperature, top_p, top_k, min_p, seed, penalties, `logit_bias`, `guided_decoding`
   * ({json | json_object | regex | choice | grammar}), `vllm_xargs`. Simulated workers accept them
   * (tokens are drawn from a seeded generator); the engine adapter forwards them.
   */
  sampling_options?: Record<string, unknown> | null;
  output_options?: OutputOptions | null;
  multi_modal_data?: MultiModalData | null;
  /** The LoRA adapter to run with (a worker's LoRA card `lora.name`); absent = the base model. */
  lora_name?: string | null;
  /** Accepted and ignored (the simulated scheduler is FIFO). */
  priority?: number | null;
  /** Disaggregated decode: the prefill worker's `disaggregated_params` (see `disagg.ts`); refused by aggregated and prefill workers. */
  disagg?: unknown;
}

/**
 * What a prefill worker returns on its last item and a decode worker accepts as `disagg`. In the
 * bootstrap variant the frontend sends decode `{prefill_worker_id, prefill_dp_rank, bootstrap_host,
 * bootstrap_port, bootstrap_room}` before prefill has finished; the decode worker then waits at the
 * bootstrap endpoint for the room (`bootstrap.ts`).
 */
export interface DisaggregatedParams {
  /** The prefill worker (instance id, hex). */
  prefill_worker_id: string;
  prefill_dp_rank: number;
  /** Required unless `bootstrap_room` is given (then the prefill has not finished yet). */
  prompt_tokens?: number;
  /** Bytes moved: prompt_tokens × kv_bytes_per_token. */
  kv_bytes?: number;
  /** Modelled transfer time the prefill worker waited, ms (after the speedup ratio). */
  transfer_ms?: number;
  bootstrap_host?: string | null;
  bootstrap_port?: number | null;
  /** Rendezvous id at the bootstrap endpoint (kvrouter: the request id). */
  bootstrap_room?: string | null;
  /** The prefill worker's `runtime_config.topology_domains` and transfer domain (informational). */
  topology_domains?: Record<string, string>;
  kv_transfer_domain?: string | null;
}

export type FinishReason = 'stop' | 'length' | 'cancelled' | 'error';

export interface GenerateItem {
  token_ids: number[];
  finish_reason?: FinishReason;
  /** kvrouter addition, first item only: prompt tokens served from the engine's prefix cache. */
  cached_tokens?: number;
  /** Prefill workers, last item: the KV transfer parameters to forward to decode as `disagg`. */
  disaggregated_params?: DisaggregatedParams;
  /** With `output_options.logprobs`: the log probability of each of `token_ids`. */
  log_probs?: number[];
  /** With `output_options.logprobs` > 0: per token, the top alternatives (most likely first). */
  top_logprobs?: { token_id: number; logprob: number }[][];
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
  /** What an engine adapter forwards besides the above (absent = nothing asked). */
  extras?: GenerateExtras;
}

/** The payload's sampling, output and media options, validated as maps. */
export interface GenerateExtras {
  samplingOptions: Record<string, unknown> | null;
  minTokens: number | null;
  /** `output_options.logprobs`. */
  logprobs: number | null;
  images: { url: string }[];
  /** `stop_conditions.ignore_eos`: the engine must not stop at its own EOS either. */
  ignoreEos: boolean;
  /** `lora_name`, or null for the base model. */
  loraName?: string | null;
}

const U32_MAX = 0xffffffff;
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** A bad field of a generate payload: `generate <field>: <reason>` (the kernel's `invalidRequest`). */
const invalid = (field: string, reason: string): KvrError => invalidRequest(field, reason, 'generate');

/** An integer in [lo, hi] given as a number or (from a 64-bit msgpack int) a bigint. */
function intField(v: unknown, field: string, lo: number, hi: number): number {
  const n = typeof v === 'bigint' && v >= BigInt(lo) && v <= BigInt(hi) ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < lo || n > hi)
    throw invalid(field, `expected an integer in [${lo}, ${hi}], got ${describe(v)}`);
  return n;
}

function tokenArray(v: unknown, field: string): Uint32Array {
  if (v instanceof Uint32Array) return v;
  if (v instanceof Uint8Array) {
    if (v.byteLength % 4 !== 0)
      throw invalid(field, `a byte array must hold whole u32s, got ${v.byteLength} bytes`);
    // Copy: the bytes may sit at an offset that is not 4-aligned inside a decoded message.
    const out = new Uint32Array(v.byteLength / 4);
    if (!LITTLE_ENDIAN) throw invalid(field, 'the byte form needs a little-endian host');
    new Uint8Array(out.buffer).set(v);
    return out;
  }
  if (!Array.isArray(v)) throw invalid(field, `expected an array of u32, got ${describe(v)}`);
  const out = new Uint32Array(v.length);
  for (let i = 0; i < v.length; i++) out[i] = intField(v[i], `${field}[${i}]`, 0, U32_MAX);
  return out;
}

/** Validates a whole payload before anything is enqueued; the first bad field is named. */
export function parseGenerateRequest(payload: unknown): ParsedGenerate {
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload))
    throw invalid('payload', `expected a map, got ${describe(payload)}`);
  const p = payload as Record<string, unknown>;
  const requestId = p.request_id;
  if (typeof requestId !== 'string' || requestId.length === 0 || requestId.length > 512)
    throw invalid(
      'request_id',
      `expected a non-empty string of at most 512 characters, got ${describe(requestId)}`,
    );
  const model = p.model ?? '';
  if (typeof model !== 'string') throw invalid('model', `expected a string, got ${describe(model)}`);
  const tokenIds = tokenArray(p.token_ids, 'token_ids');
  if (tokenIds.length === 0) throw invalid('token_ids', 'empty prompt');
  const dpRank =
    p.dp_rank === undefined || p.dp_rank === null ? 0 : intField(p.dp_rank, 'dp_rank', 0, U32_MAX);

  let maxTokens: number | null = null;
  let stopTokenIds: Set<number> | null = null;
  const sc = p.stop_conditions;
  if (sc !== undefined && sc !== null) {
    if (typeof sc !== 'object' || Array.isArray(sc))
      throw invalid('stop_conditions', `expected a map, got ${describe(sc)}`);
    const s = sc as Record<string, unknown>;
    if (s.max_tokens !== undefined && s.max_tokens !== null)
      maxTokens = intField(s.max_tokens, 'stop_conditions.max_tokens', 1, U32_MAX);
    const ignoreEos = s.ignore_eos ?? false;
    if (typeof ignoreEos !== 'boolean')
      throw invalid('stop_conditions.ignore_eos', `expected a boolean, got ${describe(ignoreEos)}`);
    if (s.stop_token_ids !== undefined && s.stop_token_ids !== null) {
      const ids = s.stop_token_ids;
      if (!Array.isArray(ids))
        throw invalid('stop_conditions.stop_token_ids', `expected an array of u32, got ${describe(ids)}`);
      const set = new Set<number>();
      for (let i = 0; i < ids.length; i++)
        set.add(intField(ids[i], `stop_conditions.stop_token_ids[${i}]`, 0, U32_MAX));
      if (!ignoreEos && set.size > 0) stopTokenIds = set;
    }
  }
  for (const k of ['sampling_options', 'output_options', 'multi_modal_data'] as const) {
    const v = p[k];
    if (v !== undefined && v !== null && (typeof v !== 'object' || Array.isArray(v)))
      throw invalid(k, `expected a map, got ${describe(v)}`);
  }
  const extras = parseExtras(p);
  if (
    p.priority !== undefined &&
    p.priority !== null &&
    (typeof p.priority !== 'number' || !Number.isFinite(p.priority))
  )
    throw invalid('priority', `expected a number, got ${describe(p.priority)}`);
  if (p.disagg !== undefined && p.disagg !== null)
    throw new KvrError(
      'not_supported',
      'generate disagg: disaggregated serving is not supported by this worker yet (aggregated only)',
      400,
      { field: 'disagg' },
    );
  return {
    requestId,
    model,
    tokenIds,
    dpRank,
    maxTokens,
    stopTokenIds,
    ...(extras ? { extras } : {}),
  };
}

function parseExtras(p: Record<string, unknown>): GenerateExtras | undefined {
  const so = (p.sampling_options ?? null) as Record<string, unknown> | null;
  const sc = (p.stop_conditions ?? null) as Record<string, unknown> | null;
  const oo = (p.output_options ?? null) as Record<string, unknown> | null;
  const mm = (p.multi_modal_data ?? null) as Record<string, unknown> | null;
  const minTokens =
    sc?.min_tokens === undefined || sc.min_tokens === null
      ? null
      : intField(sc.min_tokens, 'stop_conditions.min_tokens', 0, U32_MAX);
  const logprobs =
    oo?.logprobs === undefined || oo.logprobs === null
      ? null
      : intField(oo.logprobs, 'output_options.logprobs', 0, 20);
  const images: { url: string }[] = [];
  if (mm?.image_url !== undefined && mm.image_url !== null) {
    if (!Array.isArray(mm.image_url))
      throw invalid('multi_modal_data.image_url', `expected an array, got ${describe(mm.image_url)}`);
    mm.image_url.forEach((x: unknown, i) => {
      const url = (x as { url?: unknown } | null)?.url;
      if (typeof url !== 'string')
        throw invalid(`multi_modal_data.image_url[${i}].url`, `expected a string, got ${describe(url)}`);
      images.push({ url });
    });
  }
  const hasSampling = so !== null && Object.keys(so).length > 0;
  const ignoreEos = sc?.ignore_eos === true;
  const lora = p.lora_name;
  if (lora !== undefined && lora !== null && (typeof lora !== 'string' || lora.length === 0))
    throw invalid('lora_name', `expected a non-empty string, got ${describe(lora)}`);
  const loraName = typeof lora === 'string' ? lora : null;
  if (
    !hasSampling &&
    minTokens === null &&
    logprobs === null &&
    images.length === 0 &&
    !ignoreEos &&
    !loraName
  )
    return undefined;
  return { samplingOptions: hasSampling ? so : null, minTokens, logprobs, images, ignoreEos, loraName };
}

/** Validates `disagg` of a generate payload; every field is named on failure. */
export function parseDisaggParams(v: unknown, field = 'disagg'): DisaggregatedParams {
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw invalid(field, 'expected a map of transfer parameters');
  const o = v as Record<string, unknown>;
  const id = o.prefill_worker_id;
  if (typeof id !== 'string' || !/^[0-9a-fA-F]{1,16}$/.test(id))
    throw invalid(`${field}.prefill_worker_id`, 'expected a hex worker id');
  const nat = (k: string): number => {
    const x = typeof o[k] === 'bigint' ? Number(o[k]) : o[k];
    if (typeof x !== 'number' || !Number.isFinite(x) || x < 0)
      throw invalid(`${field}.${k}`, 'expected a number >= 0');
    return x;
  };
  const out: DisaggregatedParams = {
    prefill_worker_id: id,
    prefill_dp_rank: o.prefill_dp_rank == null ? 0 : nat('prefill_dp_rank'),
  };
  const str = (k: string): string => {
    const x = o[k];
    if (typeof x !== 'string' || x === '') throw invalid(`${field}.${k}`, 'expected a non-empty string');
    return x;
  };
  if (o.bootstrap_room != null) {
    out.bootstrap_room = str('bootstrap_room');
    out.bootstrap_host = str('bootstrap_host');
    const port = nat('bootstrap_port');
    if (!Number.isInteger(port) || port < 1 || port > 65535)
      throw invalid(`${field}.bootstrap_port`, 'expected a port in [1, 65535]');
    out.bootstrap_port = port;
  } else {
    if (o.bootstrap_host != null) out.bootstrap_host = str('bootstrap_host');
    if (o.bootstrap_port != null) out.bootstrap_port = nat('bootstrap_port');
  }
  // A finished prefill's parameters carry its transfer; a bootstrap room's may not yet.
  for (const k of ['prompt_tokens', 'kv_bytes', 'transfer_ms'] as const)
    if (o[k] != null || out.bootstrap_room == null) out[k] = nat(k);
  if (o.kv_transfer_domain != null) {
    if (typeof o.kv_transfer_domain !== 'string')
      throw invalid(`${field}.kv_transfer_domain`, 'expected a string');
    out.kv_transfer_domain = o.kv_transfer_domain;
  }
  if (o.topology_domains != null) {
    const t = o.topology_domains;
    if (typeof t !== 'object' || Array.isArray(t))
      throw invalid(`${field}.topology_domains`, 'expected a map');
    for (const [k, x] of Object.entries(t as Record<string, unknown>))
      if (typeof x !== 'string') throw invalid(`${field}.topology_domains.${k}`, 'expected a string');
    out.topology_domains = { ...(t as Record<string, string>) };
  }
  return out;
}
