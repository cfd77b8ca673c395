/**
 * The adapter's only way into the engine: its OpenAI HTTP API. A `generate` request (docs/protocol.md
 * §5.7) becomes one streaming `/v1/completions` call with the token ids as `prompt`, and the SSE
 * chunks become `{token_ids, finish_reason?}` items. Requirements on the engine (vLLM ≥ 0.10.2, the
 * vLLM-compatible mocker): token-id prompts, `return_token_ids: true` (token ids in every choice),
 * `ignore_eos` / `stop_token_ids`, the `X-Data-Parallel-Rank` header for the router's dp rank.
 *
 * The rest of the request surface is forwarded in vLLM's names (`engineBody`): sampling options,
 * `logit_bias`, `min_tokens`, guided decoding (`response_format` for JSON, `structured_outputs`
 * for regex / choice / grammar), `vllm_xargs`, `logprobs` (with `return_tokens_as_token_ids`, so
 * the chunks' logprobs come back as `{log_probs, top_logprobs}` by id) and images as
 * `multi_modal_data` (a kvrouter extension the vLLM-compatible mocker reads). A sampling option
 * the adapter does not know is refused with 400 naming it, never dropped.
 *
 * Errors carry the request-plane codes migration matches on (§14): the engine unreachable or
 * answering 503 → `engine_shutdown`; the stream cut before its end → `disconnected` (both
 * migratable); 4xx → the engine's refusal, not migratable; abort → `cancelled`.
 */
import { KvrError, type GenerateExtras } from '@kvrouter/protocols';
import type {
  EmbedItem,
  EmbedRequest,
  FinishReason,
  GenerateItem,
  ParsedGenerate,
} from '@kvrouter/protocols';

export interface EngineClientOptions {
  /** Base URL, e.g. `http://127.0.0.1:8000`. */
  baseUrl: string;
  /** Model name the engine serves (`model` of every request). */
  model: string;
  /**
   * The engine's `max_model_len`: a request without `max_tokens` gets what is left of it after the
   * prompt (the generate contract is "until a stop or the context ends"; an OpenAI completions
   * endpoint would otherwise stop at its default of 16 tokens).
   */
  maxModelLen?: number | null;
  /** A response that has not started within this long fails with `connection_timeout`; default 30 s. */
  headersTimeoutMs?: number;
}

interface Choice {
  token_ids?: unknown;
  finish_reason?: unknown;
  logprobs?: unknown;
}

/** Sampling options forwarded to vLLM under the same name. */
const SAME_NAME = [
  'temperature',
  'top_p',
  'top_k',
  'min_p',
  'seed',
  'presence_penalty',
  'frequency_penalty',
  'repetition_penalty',
  'logit_bias',
  'vllm_xargs',
] as const;

/** The payload's extras in vLLM's `/v1/completions` names. */
function engineBody(x: GenerateExtras | undefined): Record<string, unknown> {
  if (!x) return {};
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(x.samplingOptions ?? {})) {
    if (v === undefined || v === null) continue;
    if ((SAME_NAME as readonly string[]).includes(k)) out[k] = v;
    else if (k === 'guided_decoding') {
      const g = v as {
        json?: unknown;
        json_object?: boolean;
        regex?: string;
        choice?: string[];
        grammar?: string;
      };
      if (g.json !== undefined)
        out.response_format = { type: 'json_schema', json_schema: { name: 'schema', schema: g.json } };
      else if (g.json_object) out.response_format = { type: 'json_object' };
      else if (g.regex !== undefined) out.structured_outputs = { regex: g.regex };
      else if (g.choice !== undefined) out.structured_outputs = { choice: g.choice };
      else if (g.grammar !== undefined) out.structured_outputs = { grammar: g.grammar };
    } else
      throw new KvrError(
        'invalid_request',
        `generate sampling_options.${k}: not supported by the engine adapter`,
        400,
        { field: `sampling_options.${k}` },
      );
  }
  if (x.minTokens !== null) out.min_tokens = x.minTokens;
  if (x.logprobs !== null) {
    out.logprobs = x.logprobs;
    out.return_tokens_as_token_ids = true;
  }
  if (x.images.length > 0) out.multi_modal_data = { image_url: x.images };
  if (x.ignoreEos) out.ignore_eos = true;
  return out;
}

/** `token_id:N` (vLLM's `return_tokens_as_token_ids`) → N. */
function idOf(t: unknown): number | null {
  if (typeof t !== 'string' || !t.startsWith('token_id:')) return null;
  const n = Number(t.slice(9));
  return Number.isInteger(n) && n >= 0 ? n : null;
}

/** A completions chunk's `logprobs` → the item's `log_probs` / `top_logprobs` (most likely first). */
function logprobsOf(lp: unknown, n: number): Pick<GenerateItem, 'log_probs' | 'top_logprobs'> {
  if (typeof lp !== 'object' || lp === null) return {};
  const o = lp as { token_logprobs?: unknown; top_logprobs?: unknown };
  if (!Array.isArray(o.token_logprobs) || o.token_logprobs.length !== n) return {};
  const out: Pick<GenerateItem, 'log_probs' | 'top_logprobs'> = {
    log_probs: o.token_logprobs.map((x) => (typeof x === 'number' ? x : 0)),
  };
  if (Array.isArray(o.top_logprobs))
    out.top_logprobs = o.top_logprobs.map((m: unknown) =>
      Object.entries((m ?? {}) as Record<string, unknown>)
        .map(([k, v]) => ({ token_id: idOf(k), logprob: typeof v === 'number' ? v : 0 }))
        .filter((t): t is { token_id: number; logprob: number } => t.token_id !== null)
        .sort((a, b) => b.logprob - a.logprob),
    );
  return out;
}

const FINISH: Record<string, FinishReason> = {
  stop: 'stop',
  length: 'length',
  abort: 'cancelled',
  error: 'error',
};

function engineError(code: string, status: number, message: string): KvrError {
  return KvrError.relay(code, message, status);
}

/** The engine's JSON error (`{error: {message, type, code}}` or vLLM's flat `{message, type, code}`) → a KvrError. */
function fromEngineError(status: number, body: unknown): KvrError {
  const o = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>;
  const e = (typeof o.error === 'object' && o.error !== null ? o.error : o) as Record<string, unknown>;
  const message = typeof e.message === 'string' ? e.message : `engine answered HTTP ${status}`;
  const code = typeof e.code === 'number' ? e.code : status;
  if (code === 503 || e.type === 'engine_shutdown')
    return engineError('engine_shutdown', 503, `engine: ${message}`);
  if (code >= 500) return engineError('engine_error', 502, `engine: ${message}`);
  const type = typeof e.type === 'string' && /^[a-z_]+$/.test(e.type) ? e.type : 'invalid_request';
  return engineError(type, code >= 400 && code < 500 ? code : 400, `engine: ${message}`);
}

export class EngineClient {
  private readonly completionsUrl: string;

  constructor(private readonly o: EngineClientOptions) {
    this.completionsUrl = new URL('/v1/completions', o.baseUrl).toString();
  }

  /**
   * One `embed` request (docs/protocol.md §5.7) as the engine's `POST /v1/embeddings` with token-id
   * inputs and float encoding; the vectors come back in input order.
   */
  async embed(p: EmbedRequest, signal: AbortSignal): Promise<EmbedItem> {
    let res: Response;
    try {
      res = await fetch(new URL('/v1/embeddings', this.o.baseUrl), {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-request-id': p.request_id },
        body: JSON.stringify({ model: this.o.model, input: p.inputs, encoding_format: 'float' }),
        signal,
      });
    } catch (e) {
      if (signal.aborted) throw new KvrError('cancelled', 'request cancelled', 499);
      throw engineError('engine_shutdown', 503, `engine unreachable at ${this.o.baseUrl}: ${causeOf(e)}`);
    }
    const text = await res.text();
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = { message: text.slice(0, 200) };
    }
    if (!res.ok) throw fromEngineError(res.status, body);
    const o = body as {
      data?: { index?: unknown; embedding?: unknown }[];
      usage?: { prompt_tokens?: unknown };
    };
    const data = Array.isArray(o?.data) ? o.data : [];
    const embeddings: number[][] = new Array<number[]>(p.inputs.length);
    for (const d of data) {
      const i = typeof d.index === 'number' ? d.index : -1;
      if (i >= 0 && i < embeddings.length && Array.isArray(d.embedding))
        embeddings[i] = d.embedding as number[];
    }
    if (embeddings.some((v) => v === undefined) || data.length !== p.inputs.length)
      throw engineError(
        'engine_error',
        502,
        `engine returned ${data.length} embeddings for ${p.inputs.length} inputs`,
      );
    const pt = o.usage?.prompt_tokens;
    return {
      embeddings,
      prompt_tokens: typeof pt === 'number' ? pt : p.inputs.reduce((n, x) => n + x.length, 0),
    };
  }

  /** Streams one request; ends after the item with a finish reason. */
  async *generate(req: ParsedGenerate, signal: AbortSignal): AsyncGenerator<GenerateItem> {
    // A field the engine cannot take fails here, before anything is sent.
    const extra = engineBody(req.extras);
    const ac = new AbortController();
    const onAbort = () => ac.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    const timer = setTimeout(() => ac.abort(new Error('headers timeout')), this.o.headersTimeoutMs ?? 30_000);
    try {
      let res: Response;
      try {
        res = await fetch(this.completionsUrl, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'x-data-parallel-rank': String(req.dpRank),
            'x-request-id': req.requestId,
          },
          body: JSON.stringify({
            // A LoRA adapter is served by vLLM as a model of its own name.
            model: req.extras?.loraName ?? this.o.model,
            prompt: Array.from(req.tokenIds),
            ...maxTokens(req, this.o.maxModelLen ?? null),
            stream: true,
            return_token_ids: true,
            // The router sends the model's EOS ids as stop tokens (§5.7); without them the engine decides.
            ...(req.stopTokenIds !== null ? { stop_token_ids: [...req.stopTokenIds], ignore_eos: true } : {}),
            ...extra,
          }),
          signal: ac.signal,
        });
      } catch (e) {
        if (signal.aborted) throw new KvrError('cancelled', 'request cancelled', 499);
        if (ac.signal.aborted)
          throw engineError(
            'connection_timeout',
            504,
            `engine did not answer within ${this.o.headersTimeoutMs ?? 30_000} ms`,
          );
        throw engineError('engine_shutdown', 503, `engine unreachable at ${this.o.baseUrl}: ${causeOf(e)}`);
      } finally {
        clearTimeout(timer);
      }
      if (!res.ok) {
        const text = await res.text().catch(() => '');
        let body: unknown = null;
        try {
          body = JSON.parse(text);
        } catch {
          body = { message: text.slice(0, 200) };
        }
        throw fromEngineError(res.status, body);
      }
      if (res.body === null) throw engineError('disconnected', 502, 'engine sent no body');
      yield* this.items(res.body, signal);
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      // Ends the HTTP request when the caller went away (or stopped reading): the engine cancels it.
      ac.abort();
    }
  }

  private async *items(body: ReadableStream<Uint8Array>, signal: AbortSignal): AsyncGenerator<GenerateItem> {
    const decoder = new TextDecoder();
    let buf = '';
    let finished = false;
    const reader = body.getReader();
    try {
      for (;;) {
        let chunk: Awaited<ReturnType<typeof reader.read>>;
        try {
          chunk = await reader.read();
        } catch (e) {
          if (signal.aborted) throw new KvrError('cancelled', 'request cancelled', 499);
          throw engineError('disconnected', 502, `engine stream broke: ${causeOf(e)}`);
        }
        if (chunk.done) break;
        buf += decoder.decode(chunk.value, { stream: true });
        let cut: number;
        while ((cut = buf.indexOf('\n\n')) >= 0) {
          const event = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          for (const line of event.split('\n')) {
            if (!line.startsWith('data:')) continue;
            const data = line.slice(5).trim();
            if (data === '[DONE]') {
              if (!finished)
                throw engineError('disconnected', 502, 'engine stream ended without a finish reason');
              return;
            }
            const item = this.parseChunk(data);
            if (item === null) continue;
            yield item;
            if (item.finish_reason !== undefined) finished = true;
          }
        }
      }
      if (!finished) throw engineError('disconnected', 502, 'engine stream closed before its end');
    } finally {
      reader.cancel().catch(() => undefined);
    }
  }

  private parseChunk(data: string): GenerateItem | null {
    let o: Record<string, unknown>;
    try {
      o = JSON.parse(data) as Record<string, unknown>;
    } catch {
      throw engineError('protocol_error', 502, `engine sent a malformed SSE chunk: ${data.slice(0, 80)}`);
    }
    if (o.error !== undefined) throw fromEngineError(500, o);
    const choices = o.choices;
    if (!Array.isArray(choices) || choices.length === 0) return null; // the usage chunk
    const c = choices[0] as Choice;
    const ids = c.token_ids;
    if (!Array.isArray(ids) || !ids.every((t) => typeof t === 'number'))
      throw engineError(
        'protocol_error',
        502,
        'engine chunk without token_ids: the adapter needs an engine that honours return_token_ids (vLLM >= 0.10.2)',
      );
    const item: GenerateItem = { token_ids: ids as number[], ...logprobsOf(c.logprobs, ids.length) };
    if (typeof c.finish_reason === 'string') item.finish_reason = FINISH[c.finish_reason] ?? 'stop';
    // vLLM's first chunk may carry only prompt_token_ids.
    return ids.length === 0 && item.finish_reason === undefined ? null : item;
  }
}

function maxTokens(req: ParsedGenerate, maxModelLen: number | null): { max_tokens?: number } {
  if (req.maxTokens !== null) return { max_tokens: req.maxTokens };
  if (maxModelLen === null) return {};
  return { max_tokens: Math.max(1, maxModelLen - req.tokenIds.length) };
}

function causeOf(e: unknown): string {
  const c = (e as { cause?: { code?: string; message?: string } } | null)?.cause;
  if (c?.code) return c.code;
  if (c?.message) return c.message;
  return e instanceof Error ? e.message : String(e);
}
