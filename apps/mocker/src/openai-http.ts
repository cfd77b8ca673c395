/**
 * vLLM-compatible mode: one simulated engine behind the OpenAI HTTP API, shaped like `vllm serve`
 * (`/v1/completions`, `/v1/chat/completions`, `/v1/models`, `/health`, `/version`), streaming SSE and
 * unary. What a worker adapter relies on (see apps/worker/README.md):
 * - `prompt` may be token ids (`[1, 2, 3]` or `[[1, 2, 3]]`) or text (see text-tokens.ts);
 * - `return_token_ids: true` puts `token_ids` (and `prompt_token_ids` on the first choice) in every
 *   choice, as vLLM ≥ 0.10.2 does; `ignore_eos`, `stop_token_ids` as vLLM's extra sampling params;
 * - the dp rank comes from the `X-Data-Parallel-Rank` header or a `data_parallel_rank` field
 *   (round-robin over ranks when neither is given);
 * - `usage.prompt_tokens_details.cached_tokens` reports the prefix-cache hit;
 * - a stream that fails after its first byte ends with `data: {"error": …}` and `data: [DONE]`;
 * - the request surface a worker adapter forwards is accepted and checked as vLLM does: sampling
 *   (`temperature`, `top_p`, `top_k`, `min_p`, `seed`, penalties, `logit_bias`), `min_tokens`,
 *   `response_format` / `structured_outputs` / `guided_*`, `logprobs` (+ chat `top_logprobs`) with
 *   well-formed synthetic values (`return_tokens_as_token_ids` gives `token_id:N` strings),
 *   `vllm_xargs` (test hook `mock_output_token_ids`: the answer's ids), image parts of chat
 *   messages and kvrouter's `multi_modal_data` on completions. What shapes the distribution or the
 *   grammar is simulated (tokens stay drawn by the engine) — it is recorded, not dropped:
 *   `GET /debug/requests` returns the last 64 request bodies (tests check what reached the engine).
 * `GET /metrics` has vLLM's `vllm:kv_cache_usage_perc`, `vllm:num_requests_running` and
 * `vllm:num_requests_waiting` gauges per `engine` (dp rank), which the worker adapter turns into
 * `ActiveLoad`. kvrouter addition: `GET /debug/kv_blocks` lists every rank's cached block hashes
 * (tests compare a router's index with it).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { KvrError, invalidRequest as bad } from '@kvrouter/protocols';
import { embedVector, withExtras, type VllmSimEngine } from '@kvrouter/sim-worker';
import type { GenerateExtras, GenerateItem, ParsedGenerate } from '@kvrouter/protocols';
import { chatToText, textToTokens, tokensToText, type ChatMessage } from './text-tokens.js';

export interface OpenAiServerOptions {
  engine: VllmSimEngine;
  modelName: string;
  host: string;
  /** 0 = OS-assigned. */
  port: number;
  /** Reported as `max_model_len`. */
  maxModelLen: number;
  /** LoRA adapters served as models of their own (`--lora-names`). */
  loraNames?: readonly string[];
  /** `--model-type embedding`: `POST /v1/embeddings` answers unit vectors of this length (sim-worker `embedVector`). */
  embeddingDim?: number | null;
}

const MAX_BODY = 32 * 1024 * 1024;
/** OpenAI's default for completions; chat runs to the driver's default (clamped to the KV cache). */
const COMPLETIONS_DEFAULT_MAX_TOKENS = 16;

type Kind = 'completions' | 'chat';

interface ParsedBody {
  kind: Kind;
  gen: ParsedGenerate;
  stream: boolean;
  includeUsage: boolean;
  returnTokenIds: boolean;
  /** `return_tokens_as_token_ids`: logprob tokens as `token_id:N`. */
  tokensAsIds: boolean;
}

function describe(v: unknown): string {
  if (Array.isArray(v)) return 'an array';
  if (v === null) return 'null';
  return typeof v === 'object' ? 'an object' : JSON.stringify(v);
}

function optInt(o: Record<string, unknown>, field: string, lo: number, hi: number): number | null {
  const v = o[field];
  if (v === undefined || v === null) return null;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < lo || v > hi)
    throw bad(field, `expected an integer in [${lo}, ${hi}], got ${describe(v)}`);
  return v;
}

function optBool(o: Record<string, unknown>, field: string): boolean {
  const v = o[field] ?? false;
  if (typeof v !== 'boolean') throw bad(field, `expected a boolean, got ${describe(v)}`);
  return v;
}

function tokenIds(v: unknown, field: string): Uint32Array {
  if (!Array.isArray(v)) throw bad(field, `expected an array of token ids, got ${describe(v)}`);
  const out = new Uint32Array(v.length);
  for (let i = 0; i < v.length; i++) {
    const t: unknown = v[i];
    if (typeof t !== 'number' || !Number.isInteger(t) || t < 0 || t > 0xffffffff)
      throw bad(`${field}[${i}]`, `expected a token id (u32), got ${describe(t)}`);
    out[i] = t;
  }
  return out;
}

function promptTokens(v: unknown): Uint32Array {
  if (typeof v === 'string') return Uint32Array.from(textToTokens(v));
  if (Array.isArray(v)) {
    if (v.length === 1 && typeof v[0] === 'string') return Uint32Array.from(textToTokens(v[0]));
    if (v.length === 1 && Array.isArray(v[0])) return tokenIds(v[0], 'prompt[0]');
    if (v.length > 0 && (typeof v[0] === 'string' || Array.isArray(v[0])))
      throw bad('prompt', 'batched prompts are not supported (one prompt per request)');
    return tokenIds(v, 'prompt');
  }
  throw bad('prompt', `expected a string or an array of token ids, got ${describe(v)}`);
}

function chatMessages(v: unknown): ChatMessage[] {
  if (!Array.isArray(v) || v.length === 0)
    throw bad('messages', `expected a non-empty array, got ${describe(v)}`);
  return v.map((m: unknown, i) => {
    if (typeof m !== 'object' || m === null)
      throw bad(`messages[${i}]`, `expected an object, got ${describe(m)}`);
    const { role, content } = m as Record<string, unknown>;
    if (typeof role !== 'string')
      throw bad(`messages[${i}].role`, `expected a string, got ${describe(role)}`);
    if (typeof content === 'string') return { role, content };
    if (Array.isArray(content)) {
      const parts = content.map((p: unknown, k) => {
        const o = p as Record<string, unknown> | null;
        if (typeof o === 'object' && o !== null && o.type === 'image_url') {
          const iu = o.image_url as { url?: unknown } | undefined;
          if (typeof iu?.url !== 'string')
            throw bad(`messages[${i}].content[${k}].image_url.url`, 'expected a string');
          return `<image:${iu.url}>`;
        }
        if (typeof o !== 'object' || o === null || o.type !== 'text' || typeof o.text !== 'string')
          throw bad(`messages[${i}].content[${k}]`, 'expected a text or image_url part');
        return o.text;
      });
      return { role, content: parts.join('') };
    }
    if (content === null || content === undefined) return { role, content: '' };
    throw bad(
      `messages[${i}].content`,
      `expected a string or an array of text parts, got ${describe(content)}`,
    );
  });
}

export class OpenAiServer {
  private seq = 0;
  private rr = 0;
  /** The last request bodies (`GET /debug/requests`). */
  private readonly recent: unknown[] = [];
  private readonly sockets = new Set<Socket>();

  private constructor(
    private readonly o: OpenAiServerOptions,
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(o: OpenAiServerOptions): Promise<OpenAiServer> {
    let self: OpenAiServer | null = null;
    const server = createServer((req, res) => void self!.handle(req, res));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(o.port, o.host, () => resolve());
    });
    const port = (server.address() as AddressInfo).port;
    const host = o.host === '0.0.0.0' || o.host === '::' ? '127.0.0.1' : o.host;
    self = new OpenAiServer(o, server, `http://${host.includes(':') ? `[${host}]` : host}:${port}`);
    server.on('connection', (s) => {
      self!.sockets.add(s);
      s.once('close', () => self!.sockets.delete(s));
    });
    return self;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** Stops accepting; open connections are cut (the engine is stopped separately). */
  async close(): Promise<void> {
    const done = new Promise<void>((r) => this.server.close(() => r()));
    for (const s of this.sockets) s.destroy();
    await done;
  }

  /** vLLM's `/v1/embeddings` (float): text inputs through the mocker's text tokens, token-id inputs as given. */
  private embeddings(body: unknown, dim: number): Record<string, unknown> {
    const input = (body as { input?: unknown } | null)?.input;
    const one = (x: unknown, i: number): number[] => {
      if (typeof x === 'string') return textToTokens(x);
      if (Array.isArray(x) && x.every((t) => Number.isInteger(t) && (t as number) >= 0)) return x as number[];
      throw new KvrError('invalid_request', `input[${i}]: expected a string or token ids`, 400, {
        field: 'input',
      });
    };
    const list: unknown[] =
      typeof input === 'string' || (Array.isArray(input) && typeof input[0] === 'number')
        ? [input]
        : (input as unknown[]);
    if (!Array.isArray(list) || list.length === 0)
      throw new KvrError('invalid_request', 'input: expected a string or a non-empty array', 400, {
        field: 'input',
      });
    const ids = list.map(one);
    const tokens = ids.reduce((n, x) => n + x.length, 0);
    return {
      object: 'list',
      model: this.o.modelName,
      data: ids.map((x, index) => ({ object: 'embedding', index, embedding: embedVector(x, dim) })),
      usage: { prompt_tokens: tokens, total_tokens: tokens },
    };
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      const path = (req.url ?? '/').split('?')[0];
      if (req.method === 'GET' && path === '/health') return void res.writeHead(200).end();
      if (req.method === 'GET' && path === '/version') return json(res, 200, { version: 'kvrouter-mocker' });
      if (req.method === 'GET' && path === '/v1/models') return json(res, 200, this.models());
      if (req.method === 'GET' && path === '/debug/kv_blocks') return json(res, 200, this.kvBlocks());
      if (req.method === 'GET' && path === '/debug/requests')
        return json(res, 200, { requests: this.recent });
      if (req.method === 'GET' && path === '/metrics') {
        const text = this.metrics();
        return void res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(text);
      }
      if (req.method === 'POST' && (path === '/v1/completions' || path === '/v1/chat/completions')) {
        const body = await readJson(req);
        this.recent.push(body);
        if (this.recent.length > 64) this.recent.shift();
        const p = this.parse(path === '/v1/completions' ? 'completions' : 'chat', body, req);
        return await this.generate(p, res);
      }
      if (req.method === 'POST' && path === '/v1/embeddings' && this.o.embeddingDim)
        return json(res, 200, this.embeddings(await readJson(req), this.o.embeddingDim));
      throw new KvrError('not_found', `no route ${req.method ?? ''} ${path}`, 404);
    } catch (e) {
      if (!res.headersSent) sendError(res, e);
      else res.end();
    }
  }

  private models(): unknown {
    const created = Math.floor(Date.now() / 1000);
    const id = this.o.modelName;
    const entry = (mid: string, parent: string | null) => ({
      id: mid,
      object: 'model',
      created,
      owned_by: 'kvrouter-mocker',
      root: mid,
      parent,
      max_model_len: this.o.maxModelLen,
    });
    // vLLM lists each LoRA adapter as a model whose parent is the base model.
    return { object: 'list', data: [entry(id, null), ...(this.o.loraNames ?? []).map((l) => entry(l, id))] };
  }

  /** The vLLM gauges a worker adapter reads for `ActiveLoad`, per engine (dp rank). */
  private metrics(): string {
    const eng = this.o.engine.engine;
    const model = JSON.stringify(this.o.modelName);
    const total = eng.config.numGpuBlocks;
    const gauge = (name: string, help: string, v: (r: number) => number) =>
      `# HELP ${name} ${help}\n# TYPE ${name} gauge\n` +
      eng.ranks.map((_, r) => `${name}{engine="${r}",model_name=${model}} ${v(r)}\n`).join('');
    return (
      gauge(
        'vllm:kv_cache_usage_perc',
        'KV-cache usage. 1 means 100 percent usage.',
        (r) => eng.load(r).kv_used_blocks / total,
      ) +
      gauge(
        'vllm:num_requests_running',
        'Number of requests in model execution batches.',
        (r) => eng.ranks[r].numRunning,
      ) +
      gauge(
        'vllm:num_requests_waiting',
        'Number of requests waiting to be processed.',
        (r) => eng.ranks[r].numWaiting,
      )
    );
  }

  private kvBlocks(): unknown {
    const eng = this.o.engine.engine;
    return {
      block_size: eng.config.blockSize,
      ranks: eng.ranks.map((_, r) => ({
        dp_rank: r,
        blocks: [...eng.cachedBlocks(r)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)).map(String),
      })),
    };
  }

  private parse(kind: Kind, body: unknown, req: IncomingMessage): ParsedBody {
    if (typeof body !== 'object' || body === null || Array.isArray(body))
      throw bad('body', `expected a JSON object, got ${describe(body)}`);
    const b = body as Record<string, unknown>;
    const lora = typeof b.model === 'string' && (this.o.loraNames ?? []).includes(b.model) ? b.model : null;
    if (b.model !== undefined && b.model !== this.o.modelName && lora === null)
      throw new KvrError('model_not_found', `The model \`${describe(b.model)}\` does not exist.`, 404, {
        field: 'model',
      });
    optInt(b, 'n', 1, 1);
    const tokens =
      kind === 'completions'
        ? promptTokens(b.prompt)
        : Uint32Array.from(textToTokens(chatToText(chatMessages(b.messages))));
    if (tokens.length === 0) throw bad(kind === 'completions' ? 'prompt' : 'messages', 'empty prompt');
    const maxTokens =
      optInt(b, 'max_tokens', 1, 0xffffffff) ??
      (kind === 'chat' ? optInt(b, 'max_completion_tokens', 1, 0xffffffff) : COMPLETIONS_DEFAULT_MAX_TOKENS);
    const ignoreEos = optBool(b, 'ignore_eos');
    const stop =
      b.stop_token_ids === undefined || b.stop_token_ids === null
        ? []
        : tokenIds(b.stop_token_ids, 'stop_token_ids');
    const stream = optBool(b, 'stream');
    const so = b.stream_options;
    if (so !== undefined && so !== null && (typeof so !== 'object' || Array.isArray(so)))
      throw bad('stream_options', `expected an object, got ${describe(so)}`);
    const includeUsage = so ? optBool(so as Record<string, unknown>, 'include_usage') : false;
    const ranks = this.o.engine.engine.ranks.length;
    const header = req.headers['x-data-parallel-rank'];
    let dpRank = optInt(b, 'data_parallel_rank', 0, ranks - 1);
    if (dpRank === null && typeof header === 'string') {
      dpRank = Number(header);
      if (!Number.isInteger(dpRank) || dpRank < 0 || dpRank >= ranks)
        throw bad(
          'X-Data-Parallel-Rank',
          `expected an integer in [0, ${ranks - 1}], got ${JSON.stringify(header)}`,
        );
    }
    dpRank ??= this.rr++ % ranks;
    const id = `${kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${(this.seq++).toString(36)}-${Date.now().toString(36)}`;
    const found = requestExtras(kind, b, maxTokens);
    // A LoRA model: recorded with the request (the simulated engine hashes and times it as the base).
    const extras = lora === null ? found : { ...(found ?? emptyExtras()), loraName: lora };
    return {
      kind,
      stream,
      includeUsage,
      returnTokenIds: optBool(b, 'return_token_ids'),
      tokensAsIds: optBool(b, 'return_tokens_as_token_ids'),
      gen: {
        requestId: id,
        model: this.o.modelName,
        tokenIds: tokens,
        dpRank,
        maxTokens,
        stopTokenIds: ignoreEos || stop.length === 0 ? null : new Set(stop),
        ...(extras ? { extras } : {}),
      },
    };
  }

  private async generate(p: ParsedBody, res: ServerResponse): Promise<void> {
    const ac = new AbortController();
    res.once('close', () => {
      if (!res.writableFinished) ac.abort();
    });
    // Throws (nothing enqueued) on a request the engine refuses, before any byte is sent.
    const submitted = this.o.engine.submit(p.gen, ac.signal);
    const items = p.gen.extras ? withExtras(submitted, p.gen) : submitted;
    const created = Math.floor(Date.now() / 1000);
    const id = p.gen.requestId;
    const object =
      p.kind === 'chat' ? (p.stream ? 'chat.completion.chunk' : 'chat.completion') : 'text_completion';
    const promptLen = p.gen.tokenIds.length;
    const out: number[] = [];
    let cached = 0;
    let finish: string | null = null;
    const lps: number[] = [];
    const tops: { token_id: number; logprob: number }[][] = [];
    const choice = (
      ids: number[],
      fin: string | null,
      first: boolean,
      it?: GenerateItem,
    ): Record<string, unknown> => {
      const text = tokensToText(ids);
      const lp = it ? logprobsOf(p, ids, it.log_probs, it.top_logprobs) : logprobsOf(p, ids, lps, tops);
      const c: Record<string, unknown> =
        p.kind === 'chat'
          ? p.stream
            ? {
                index: 0,
                delta: first ? { role: 'assistant', content: text } : { content: text },
                logprobs: lp,
                finish_reason: fin,
              }
            : { index: 0, message: { role: 'assistant', content: text }, logprobs: lp, finish_reason: fin }
          : { index: 0, text, logprobs: lp, finish_reason: fin, stop_reason: null };
      if (p.returnTokenIds) {
        c.token_ids = ids;
        if (first) c.prompt_token_ids = Array.from(p.gen.tokenIds);
      }
      return c;
    };
    const usage = () => ({
      prompt_tokens: promptLen,
      completion_tokens: out.length,
      total_tokens: promptLen + out.length,
      prompt_tokens_details: { cached_tokens: cached },
    });

    if (!p.stream) {
      for await (const it of items) take(it);
      json(res, 200, {
        id,
        object,
        created,
        model: this.o.modelName,
        choices: [choice(out, finish, true)],
        usage: usage(),
      });
      return;
    }
    res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
    });
    const send = async (o: unknown): Promise<void> => {
      if (!res.write(`data: ${JSON.stringify(o)}\n\n`)) await new Promise((r) => res.once('drain', r));
    };
    let first = true;
    try {
      for await (const it of items) {
        if (res.destroyed) break;
        take(it);
        await send({
          id,
          object,
          created,
          model: this.o.modelName,
          choices: [choice(it.token_ids, it.finish_reason ?? null, first, it)],
          usage: null,
        });
        first = false;
      }
      if (p.includeUsage)
        await send({ id, object, created, model: this.o.modelName, choices: [], usage: usage() });
    } catch (e) {
      if (res.destroyed) return;
      await send(errorBody(e));
    }
    if (!res.destroyed) res.end('data: [DONE]\n\n');

    function take(it: GenerateItem): void {
      if (it.cached_tokens !== undefined) cached = it.cached_tokens;
      for (const t of it.token_ids) out.push(t);
      if (it.log_probs) lps.push(...it.log_probs);
      if (it.top_logprobs) tops.push(...it.top_logprobs);
      if (it.finish_reason !== undefined) finish = it.finish_reason;
    }
  }
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req as AsyncIterable<Buffer>) {
    size += c.length;
    if (size > MAX_BODY)
      throw new KvrError('payload_too_large', `body: larger than ${MAX_BODY} bytes`, 413, { field: 'body' });
    chunks.push(c);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
  } catch (e) {
    throw bad('body', `invalid JSON (${e instanceof Error ? e.message : String(e)})`);
  }
}

function errorBody(e: unknown): {
  error: { object: 'error'; message: string; type: string; param: string | null; code: number };
} {
  const k =
    e instanceof KvrError ? e : new KvrError('internal', e instanceof Error ? e.message : String(e), 500);
  const field = (k.detail as { field?: unknown } | undefined)?.field;
  return {
    error: {
      object: 'error',
      message: k.message,
      type: k.code,
      param: typeof field === 'string' ? field : null,
      code: k.status,
    },
  };
}

function sendError(res: ServerResponse, e: unknown): void {
  const b = errorBody(e);
  json(res, b.error.code, b);
}

function json(res: ServerResponse, status: number, body: unknown): void {
  const s = JSON.stringify(body);
  res
    .writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(s) })
    .end(s);
}

/** vLLM's form of logprobs: chat `{content: [...]}`, completions `{tokens, token_logprobs, ...}`. */
function logprobsOf(
  p: ParsedBody,
  ids: readonly number[],
  lps: readonly number[] | undefined,
  tops: readonly { token_id: number; logprob: number }[][] | undefined,
): unknown {
  if (p.gen.extras?.logprobs == null || !lps) return null;
  const name = (id: number) => (p.tokensAsIds ? `token_id:${id}` : tokensToText([id]));
  if (p.kind === 'chat')
    return {
      content: ids.map((id, i) => ({
        token: name(id),
        logprob: lps[i] ?? 0,
        bytes: Array.from(Buffer.from(name(id))),
        top_logprobs: (tops?.[i] ?? []).map((t) => ({
          token: name(t.token_id),
          logprob: t.logprob,
          bytes: Array.from(Buffer.from(name(t.token_id))),
        })),
      })),
    };
  let offset = 0;
  return {
    tokens: ids.map(name),
    token_logprobs: ids.map((_, i) => lps[i] ?? 0),
    top_logprobs: ids.map((_, i) =>
      Object.fromEntries((tops?.[i] ?? []).map((t) => [name(t.token_id), t.logprob])),
    ),
    text_offset: ids.map((id) => {
      const o = offset;
      offset += name(id).length;
      return o;
    }),
  };
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** The request surface beyond tokens, checked as vLLM checks it; undefined when none is given. */
function requestExtras(
  kind: Kind,
  b: Record<string, unknown>,
  maxTokens: number | null,
): GenerateExtras | undefined {
  const so: Record<string, unknown> = {};
  for (const k of [
    'temperature',
    'top_p',
    'min_p',
    'presence_penalty',
    'frequency_penalty',
    'repetition_penalty',
  ])
    if (b[k] !== undefined && b[k] !== null) {
      if (typeof b[k] !== 'number' || !Number.isFinite(b[k]))
        throw bad(k, `expected a number, got ${describe(b[k])}`);
      so[k] = b[k];
    }
  const topK = optInt(b, 'top_k', -1, 0xffffffff);
  if (topK !== null) so.top_k = topK;
  const seed = optInt(b, 'seed', -Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
  if (seed !== null) so.seed = seed;
  if (b.logit_bias !== undefined && b.logit_bias !== null) {
    if (!isObject(b.logit_bias)) throw bad('logit_bias', `expected an object, got ${describe(b.logit_bias)}`);
    for (const [k, v] of Object.entries(b.logit_bias))
      if (!/^\d+$/.test(k) || typeof v !== 'number' || v < -100 || v > 100)
        throw bad(`logit_bias.${k}`, 'expected token id keys and biases in [-100, 100]');
    so.logit_bias = b.logit_bias;
  }
  const rf = b.response_format;
  if (rf !== undefined && rf !== null) {
    if (!isObject(rf) || !['text', 'json_object', 'json_schema'].includes(String(rf.type)))
      throw bad('response_format', 'expected {"type": "text" | "json_object" | "json_schema"}');
    if (rf.type === 'json_schema' && !isObject(rf.json_schema))
      throw bad('response_format.json_schema', 'expected an object');
    if (rf.type !== 'text') so.response_format = rf;
  }
  if (b.structured_outputs !== undefined && b.structured_outputs !== null) {
    if (!isObject(b.structured_outputs)) throw bad('structured_outputs', 'expected an object');
    so.structured_outputs = b.structured_outputs;
  }
  for (const k of ['guided_json', 'guided_regex', 'guided_choice', 'guided_grammar'])
    if (b[k] !== undefined && b[k] !== null) so[k] = b[k];
  if (b.vllm_xargs !== undefined && b.vllm_xargs !== null) {
    if (!isObject(b.vllm_xargs)) throw bad('vllm_xargs', `expected an object, got ${describe(b.vllm_xargs)}`);
    so.vllm_xargs = b.vllm_xargs;
  }
  const minTokens = optInt(b, 'min_tokens', 0, 0xffffffff);
  if (minTokens !== null && maxTokens !== null && minTokens > maxTokens)
    throw bad('min_tokens', `must be at most max_tokens (${maxTokens})`);
  let logprobs: number | null = null;
  if (kind === 'chat') {
    if (b.logprobs === true) logprobs = optInt(b, 'top_logprobs', 0, 20) ?? 0;
    else if (b.logprobs !== undefined && b.logprobs !== null && b.logprobs !== false)
      throw bad('logprobs', `expected a boolean, got ${describe(b.logprobs)}`);
  } else logprobs = optInt(b, 'logprobs', 0, 20);
  const images: { url: string }[] = [];
  const mm = b.multi_modal_data;
  if (mm !== undefined && mm !== null) {
    const list = isObject(mm) ? mm.image_url : undefined;
    if (!Array.isArray(list)) throw bad('multi_modal_data', 'expected {"image_url": [{"url": ...}]}');
    list.forEach((x: unknown, i) => {
      const url = isObject(x) ? x.url : undefined;
      if (typeof url !== 'string') throw bad(`multi_modal_data.image_url[${i}].url`, 'expected a string');
      images.push({ url });
    });
  }
  const any = Object.keys(so).length > 0;
  if (!any && minTokens === null && logprobs === null && images.length === 0) return undefined;
  return { samplingOptions: any ? so : null, minTokens, logprobs, images, ignoreEos: b.ignore_eos === true };
}

function emptyExtras(): GenerateExtras {
  return { samplingOptions: null, minTokens: null, logprobs: null, images: [], ignoreEos: false };
}
