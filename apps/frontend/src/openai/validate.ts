/**
 * Validation of OpenAI chat-completions and completions bodies. The whole body is checked before
 * anything happens (no routing, no booking), and the first problem is reported as a 400 naming the
 * field (`param`), e.g. `messages[2].content: expected a string or an array of content parts`.
 */
import { parseNvext, type Nvext } from '@kvrouter/protocols';
import { badRequest } from '../errors.js';

export const CHAT_ROLES = ['system', 'developer', 'user', 'assistant', 'tool', 'function'] as const;
export type ChatRole = (typeof CHAT_ROLES)[number];

/** A content part as the client sent it (validated): text, or an image by URL. */
export type ContentPart =
  { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string; detail?: string } };

export interface ChatMessage {
  role: ChatRole;
  /**
   * As sent: a string, the parts (templates that iterate parts get them; the others get the text
   * with image placeholders), or null only for an assistant turn that carries tool calls.
   */
  content: string | ContentPart[] | null;
  name?: string;
  tool_calls?: unknown[];
  tool_call_id?: string;
  /** Reasoning of an earlier assistant turn (templates that keep it render it). */
  reasoning_content?: string;
}

/** Guided decoding (Dynamo's `guided_decoding`): exactly one kind. */
export interface GuidedDecoding {
  json?: unknown;
  json_object?: true;
  regex?: string;
  choice?: string[];
  grammar?: string;
}

/**
 * Sampling fields forwarded to the engine as `sampling_options` (the simulated engine accepts and
 * ignores what only shapes the distribution).
 */
export interface SamplingOptions {
  temperature?: number;
  top_p?: number;
  top_k?: number;
  min_p?: number;
  seed?: number;
  presence_penalty?: number;
  frequency_penalty?: number;
  repetition_penalty?: number;
  /** Token id (decimal string) → bias in [-100, 100]. */
  logit_bias?: Record<string, number>;
  guided_decoding?: GuidedDecoding;
  /** vLLM's `vllm_xargs` (custom extensions; the mocker reads its test hooks here). */
  vllm_xargs?: Record<string, unknown>;
}

interface CommonRequest {
  model: string;
  stream: boolean;
  /** `stream_options.include_usage`. */
  includeUsage: boolean;
  /** Null: up to the context length. */
  maxTokens: number | null;
  /** `min_tokens`: the engine does not stop (EOS, stop ids) before this many; null = 0. */
  minTokens: number | null;
  ignoreEos: boolean;
  /** Stop strings (at most 4, as OpenAI). */
  stop: string[];
  stopTokenIds: number[];
  sampling: SamplingOptions;
  /** Choices per prompt (`n`). */
  n: number;
  /**
   * Top alternatives per generated token (chat `top_logprobs`, completions `logprobs`); null =
   * no logprobs. Forwarded as `output_options.logprobs`.
   */
  logprobs: number | null;
  /** vLLM's `skip_special_tokens` (default true); set false by the frontend when a parser needs the markers. */
  skipSpecialTokens: boolean;
  /** Set by the frontend when `model` names a LoRA adapter: its name and the workers that serve it. */
  lora?: { name: string; workerIds: readonly bigint[] };
  nvext: Nvext;
  user?: string;
}

/** A tool the client declared (`tools[i]`, type function). */
export interface ToolSpec {
  type: 'function';
  function: { name: string; description?: string; parameters?: unknown; strict?: boolean };
}

/** `tool_choice` normalised: a named function, or one of the three modes. */
export type ToolChoice = 'none' | 'auto' | 'required' | { name: string };

export interface ChatRequest extends CommonRequest {
  kind: 'chat';
  messages: ChatMessage[];
  /** The tools the template is given (absent when none were sent, or `tool_choice` is none). */
  tools?: ToolSpec[];
  /** Raw `tool_choice` as sent (templates may read it). */
  toolChoice?: unknown;
  /** Normalised tool choice; null when the request has no tools or `tool_choice` is none. */
  toolMode: ToolChoice | null;
  /** `parallel_tool_calls` (default true): false keeps only the first call. */
  parallelToolCalls: boolean;
  /** vLLM's `chat_template_kwargs`, passed to the template. */
  templateKwargs?: Record<string, unknown>;
  addGenerationPrompt: boolean;
  /** transformers' `continue_final_message`. */
  continueFinalMessage: boolean;
  /** RAG documents for templates that take them. */
  documents?: unknown[];
  /** Image parts in order of appearance (they reach the engine as `multi_modal_data`). */
  images: { url: string }[];
}

/** One prompt of a completions request: text, or token ids. */
export interface CompletionPrompt {
  prompt: string | null;
  promptTokens: Uint32Array | null;
}

export interface CompletionRequest extends CommonRequest {
  kind: 'completions';
  /** Text prompt, or null when the prompt is token ids. The first of `batch`. */
  prompt: string | null;
  promptTokens: Uint32Array | null;
  /** Every prompt of a batched request (`prompt: ["a", "b"]`), in order; length 1 otherwise. */
  batch: CompletionPrompt[];
  /** Fill-in-the-middle text after the completion (`suffix`), or null. */
  suffix: string | null;
  echo: boolean;
}

export type InferenceRequest = ChatRequest | CompletionRequest;

const U32_MAX = 0xffffffff;

/** Field checkers shared by the request validators (chat, Anthropic Messages): each 400 names its field. */
export const isObj = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
export const present = (v: unknown): boolean => v !== undefined && v !== null;

export function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'string') return v.length > 40 ? `a string "${v.slice(0, 40)}…"` : `"${v}"`;
  if (typeof v === 'object') return 'an object';
  if (typeof v === 'bigint') return v.toString();
  return String(v as number | boolean | undefined);
}

export function num(v: unknown, field: string, lo: number, hi: number): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < lo || v > hi)
    throw badRequest(field, `${field}: expected a number between ${lo} and ${hi}, got ${describe(v)}`);
  return v;
}

export function int(v: unknown, field: string, lo: number, hi: number): number {
  const n = typeof v === 'bigint' && v >= BigInt(lo) && v <= BigInt(hi) ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < lo || n > hi)
    throw badRequest(field, `${field}: expected an integer between ${lo} and ${hi}, got ${describe(v)}`);
  return n;
}

export function bool(v: unknown, field: string): boolean {
  if (typeof v !== 'boolean') throw badRequest(field, `${field}: expected a boolean, got ${describe(v)}`);
  return v;
}

export function str(v: unknown, field: string): string {
  if (typeof v !== 'string') throw badRequest(field, `${field}: expected a string, got ${describe(v)}`);
  return v;
}

function tokenIds(v: unknown, field: string): Uint32Array {
  if (!Array.isArray(v))
    throw badRequest(field, `${field}: expected an array of token ids, got ${describe(v)}`);
  const out = new Uint32Array(v.length);
  for (let i = 0; i < v.length; i++) out[i] = int(v[i], `${field}[${i}]`, 0, U32_MAX);
  return out;
}

function common(b: Record<string, unknown>): CommonRequest {
  if (!present(b.model)) throw badRequest('model', 'model: required');
  const model = str(b.model, 'model');
  if (model.length === 0) throw badRequest('model', 'model: must be a non-empty string');
  const stream = present(b.stream) ? bool(b.stream, 'stream') : false;
  let includeUsage = false;
  if (present(b.stream_options)) {
    if (!isObj(b.stream_options))
      throw badRequest(
        'stream_options',
        `stream_options: expected an object, got ${describe(b.stream_options)}`,
      );
    if (!stream) throw badRequest('stream_options', 'stream_options: only allowed when stream is true');
    const iu = b.stream_options.include_usage;
    if (present(iu)) includeUsage = bool(iu, 'stream_options.include_usage');
  }
  // max_completion_tokens is the newer name; when both are given the newer wins (as OpenAI).
  let maxTokens: number | null = null;
  for (const f of ['max_tokens', 'max_completion_tokens'] as const)
    if (present(b[f])) maxTokens = int(b[f], f, 1, U32_MAX);
  const ignoreEos = present(b.ignore_eos) ? bool(b.ignore_eos, 'ignore_eos') : false;
  let stop: string[] = [];
  if (present(b.stop)) {
    if (typeof b.stop === 'string') stop = [b.stop];
    else if (Array.isArray(b.stop)) stop = b.stop.map((s, i) => str(s, `stop[${i}]`));
    else throw badRequest('stop', `stop: expected a string or an array of strings, got ${describe(b.stop)}`);
    if (stop.length > 4) throw badRequest('stop', `stop: at most 4 sequences, got ${stop.length}`);
    if (stop.some((s) => s.length === 0)) throw badRequest('stop', 'stop: sequences must be non-empty');
  }
  const stopTokenIds = present(b.stop_token_ids)
    ? Array.from(tokenIds(b.stop_token_ids, 'stop_token_ids'))
    : [];
  const n = present(b.n) ? int(b.n, 'n', 1, 128) : 1;
  if (present(b.best_of) && int(b.best_of, 'best_of', 1, 128) !== 1)
    throw badRequest('best_of', 'best_of: only best_of = 1 is supported (use n for several choices)');
  if (present(b.use_beam_search) && b.use_beam_search !== false)
    throw badRequest('use_beam_search', 'use_beam_search: beam search is not supported');
  let minTokens: number | null = null;
  if (present(b.min_tokens)) {
    minTokens = int(b.min_tokens, 'min_tokens', 0, U32_MAX);
    if (maxTokens !== null && minTokens > maxTokens)
      throw badRequest('min_tokens', `min_tokens: ${minTokens} is more than max_tokens (${maxTokens})`);
  }
  const sampling: SamplingOptions = {};
  if (present(b.temperature)) sampling.temperature = num(b.temperature, 'temperature', 0, 2);
  if (present(b.top_p)) sampling.top_p = num(b.top_p, 'top_p', 0, 1);
  if (present(b.top_k)) sampling.top_k = int(b.top_k, 'top_k', -1, U32_MAX);
  if (present(b.min_p)) sampling.min_p = num(b.min_p, 'min_p', 0, 1);
  if (present(b.seed)) sampling.seed = int(b.seed, 'seed', -Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
  if (present(b.presence_penalty))
    sampling.presence_penalty = num(b.presence_penalty, 'presence_penalty', -2, 2);
  if (present(b.frequency_penalty))
    sampling.frequency_penalty = num(b.frequency_penalty, 'frequency_penalty', -2, 2);
  if (present(b.repetition_penalty))
    sampling.repetition_penalty = num(b.repetition_penalty, 'repetition_penalty', 0, Number.MAX_VALUE);
  if (present(b.logit_bias)) sampling.logit_bias = logitBias(b.logit_bias);
  const guided = guidedDecoding(b);
  if (guided) sampling.guided_decoding = guided;
  if (present(b.vllm_xargs)) {
    if (!isObj(b.vllm_xargs))
      throw badRequest('vllm_xargs', `vllm_xargs: expected an object, got ${describe(b.vllm_xargs)}`);
    sampling.vllm_xargs = b.vllm_xargs;
  }
  const skipSpecialTokens = present(b.skip_special_tokens)
    ? bool(b.skip_special_tokens, 'skip_special_tokens')
    : true;
  const out: CommonRequest = {
    model,
    stream,
    includeUsage,
    maxTokens,
    minTokens,
    ignoreEos,
    stop,
    stopTokenIds,
    sampling,
    n,
    logprobs: null,
    skipSpecialTokens,
    nvext: parseNvext(b.nvext),
  };
  if (present(b.user)) out.user = str(b.user, 'user');
  return out;
}

function logitBias(v: unknown): Record<string, number> {
  if (!isObj(v)) throw badRequest('logit_bias', `logit_bias: expected an object, got ${describe(v)}`);
  const out: Record<string, number> = {};
  for (const [k, x] of Object.entries(v)) {
    if (!/^\d+$/.test(k) || Number(k) > U32_MAX)
      throw badRequest(`logit_bias.${k}`, `logit_bias: keys must be token ids, got ${describe(k)}`);
    out[k] = num(x, `logit_bias.${k}`, -100, 100);
  }
  return out;
}

/** `response_format`, vLLM's `guided_*` and `structured_outputs` → one guided-decoding spec. */
function guidedDecoding(b: Record<string, unknown>): GuidedDecoding | null {
  const found: [string, GuidedDecoding][] = [];
  const rf = b.response_format;
  if (present(rf)) {
    if (!isObj(rf))
      throw badRequest('response_format', `response_format: expected an object, got ${describe(rf)}`);
    const t = rf.type;
    if (t === 'json_object') found.push(['response_format', { json_object: true }]);
    else if (t === 'json_schema') {
      const js = rf.json_schema;
      if (!isObj(js))
        throw badRequest(
          'response_format.json_schema',
          `response_format.json_schema: expected an object with name and schema, got ${describe(js)}`,
        );
      str(js.name, 'response_format.json_schema.name');
      const schema = js.schema ?? {};
      if (!isObj(schema))
        throw badRequest(
          'response_format.json_schema.schema',
          `response_format.json_schema.schema: expected a JSON schema object, got ${describe(schema)}`,
        );
      found.push(['response_format', { json: schema }]);
    } else if (t !== 'text')
      throw badRequest(
        'response_format.type',
        `response_format.type: expected one of text, json_object, json_schema, got ${describe(t)}`,
      );
  }
  const so = isObj(b.structured_outputs) ? b.structured_outputs : null;
  if (present(b.structured_outputs) && !so)
    throw badRequest(
      'structured_outputs',
      `structured_outputs: expected an object, got ${describe(b.structured_outputs)}`,
    );
  for (const [field, key] of [
    ['guided_json', 'json'],
    ['guided_regex', 'regex'],
    ['guided_choice', 'choice'],
    ['guided_grammar', 'grammar'],
  ] as const) {
    for (const [name, v] of [
      [field, b[field]],
      [`structured_outputs.${key}`, so?.[key]],
    ] as const) {
      if (!present(v)) continue;
      if (key === 'json') {
        const j = typeof v === 'string' ? parseJsonField(v, name) : v;
        if (!isObj(j)) throw badRequest(name, `${name}: expected a JSON schema object, got ${describe(v)}`);
        found.push([name, { json: j }]);
      } else if (key === 'choice') {
        if (!Array.isArray(v) || v.length === 0)
          throw badRequest(name, `${name}: expected a non-empty array of strings, got ${describe(v)}`);
        found.push([name, { choice: v.map((c, i) => str(c, `${name}[${i}]`)) }]);
      } else found.push([name, { [key]: str(v, name) }]);
    }
  }
  if (so && so.json_object === true) found.push(['structured_outputs.json_object', { json_object: true }]);
  if (found.length > 1)
    throw badRequest(
      found[1]![0],
      `${found[1]![0]}: only one kind of guided decoding per request (also given: ${found[0]![0]})`,
    );
  return found[0]?.[1] ?? null;
}

function parseJsonField(v: string, field: string): unknown {
  try {
    return JSON.parse(v) as unknown;
  } catch {
    throw badRequest(field, `${field}: not valid JSON`);
  }
}

function contentOf(
  v: unknown,
  field: string,
  role: ChatRole,
  hasToolCalls: boolean,
  images: { url: string }[],
): string | ContentPart[] | null {
  if (typeof v === 'string') return v;
  if (v === null || v === undefined) {
    if (role === 'assistant' && hasToolCalls) return null;
    throw badRequest(field, `${field}: required for role ${role}`);
  }
  if (!Array.isArray(v))
    throw badRequest(field, `${field}: expected a string or an array of content parts, got ${describe(v)}`);
  const out: ContentPart[] = [];
  for (let i = 0; i < v.length; i++) {
    const p: unknown = v[i];
    const f = `${field}[${i}]`;
    if (!isObj(p)) throw badRequest(f, `${f}: expected a content part object, got ${describe(p)}`);
    if (p.type === 'text') out.push({ type: 'text', text: str(p.text, `${f}.text`) });
    else if (p.type === 'image_url') {
      const iu = p.image_url;
      const url = isObj(iu) ? iu.url : iu;
      if (typeof url !== 'string' || !/^(https?:\/\/|data:image\/)/.test(url))
        throw badRequest(
          `${f}.image_url.url`,
          `${f}.image_url.url: expected an http(s) URL or a data:image/... URL, got ${describe(url)}`,
        );
      const part: ContentPart = { type: 'image_url', image_url: { url } };
      if (isObj(iu) && present(iu.detail)) part.image_url.detail = str(iu.detail, `${f}.image_url.detail`);
      out.push(part);
      images.push({ url });
    } else
      throw badRequest(
        `${f}.type`,
        `${f}.type: expected "text" or "image_url" (audio, video and file parts are not supported), got ${describe(p.type)}`,
      );
  }
  return out;
}

function messages(v: unknown, images: { url: string }[]): ChatMessage[] {
  if (!present(v)) throw badRequest('messages', 'messages: required');
  if (!Array.isArray(v)) throw badRequest('messages', `messages: expected an array, got ${describe(v)}`);
  if (v.length === 0) throw badRequest('messages', 'messages: must contain at least one message');
  const out: ChatMessage[] = new Array<ChatMessage>(v.length);
  for (let i = 0; i < v.length; i++) {
    const m: unknown = v[i];
    const f = `messages[${i}]`;
    if (!isObj(m)) throw badRequest(f, `${f}: expected an object, got ${describe(m)}`);
    const role = m.role;
    if (typeof role !== 'string' || !(CHAT_ROLES as readonly string[]).includes(role))
      throw badRequest(
        `${f}.role`,
        `${f}.role: expected one of ${CHAT_ROLES.join(', ')}, got ${describe(role)}`,
      );
    const r = role as ChatRole;
    let toolCalls: unknown[] | undefined;
    if (present(m.tool_calls)) {
      if (!Array.isArray(m.tool_calls))
        throw badRequest(
          `${f}.tool_calls`,
          `${f}.tool_calls: expected an array, got ${describe(m.tool_calls)}`,
        );
      toolCalls = m.tool_calls;
    }
    const msg: ChatMessage = {
      role: r,
      content: contentOf(m.content, `${f}.content`, r, toolCalls !== undefined, images),
    };
    if (present(m.name)) msg.name = str(m.name, `${f}.name`);
    if (toolCalls) msg.tool_calls = toolCalls;
    if (present(m.tool_call_id)) msg.tool_call_id = str(m.tool_call_id, `${f}.tool_call_id`);
    if (present(m.reasoning_content))
      msg.reasoning_content = str(m.reasoning_content, `${f}.reasoning_content`);
    out[i] = msg;
  }
  return out;
}

function body(raw: unknown): Record<string, unknown> {
  if (!isObj(raw)) throw badRequest('body', `request body: expected a JSON object, got ${describe(raw)}`);
  return raw;
}

function tools(v: unknown): ToolSpec[] {
  if (!Array.isArray(v)) throw badRequest('tools', `tools: expected an array, got ${describe(v)}`);
  return v.map((t: unknown, i) => {
    const f = `tools[${i}]`;
    if (!isObj(t) || t.type !== 'function' || !isObj(t.function))
      throw badRequest(
        f,
        `${f}: expected {"type": "function", "function": {"name": ...}}, got ${describe(t)}`,
      );
    const fn = t.function;
    const name = str(fn.name, `${f}.function.name`);
    if (!/^[A-Za-z0-9_.-]{1,64}$/.test(name))
      throw badRequest(
        `${f}.function.name`,
        `${f}.function.name: letters, digits, _ . - only, at most 64 characters, got ${describe(name)}`,
      );
    if (present(fn.parameters) && !isObj(fn.parameters))
      throw badRequest(
        `${f}.function.parameters`,
        `${f}.function.parameters: expected a JSON schema object, got ${describe(fn.parameters)}`,
      );
    return { ...t, type: 'function', function: { ...fn, name } } as ToolSpec;
  });
}

function toolChoice(v: unknown, declared: ToolSpec[] | undefined): ToolChoice | null {
  if (!present(v)) return declared && declared.length > 0 ? 'auto' : null;
  if (!declared || declared.length === 0) {
    if (v === 'none') return null;
    throw badRequest('tool_choice', 'tool_choice: only allowed when tools are given');
  }
  if (v === 'none') return null;
  if (v === 'auto' || v === 'required') return v;
  if (isObj(v) && v.type === 'function' && isObj(v.function) && typeof v.function.name === 'string') {
    const name = v.function.name;
    if (!declared.some((t) => t.function.name === name))
      throw badRequest(
        'tool_choice.function.name',
        `tool_choice.function.name: ${describe(name)} is not one of the tools`,
      );
    return { name };
  }
  throw badRequest(
    'tool_choice',
    `tool_choice: expected "none", "auto", "required" or {"type": "function", "function": {"name": ...}}, got ${describe(v)}`,
  );
}

/**
 * `required` and a named choice are enforced by guided decoding, as vLLM does: a named function's
 * parameters schema, or an array of `{name, parameters}` over all tools.
 */
function toolGuidance(mode: ToolChoice, declared: ToolSpec[]): GuidedDecoding {
  const params = (t: ToolSpec): unknown => t.function.parameters ?? { type: 'object' };
  if (typeof mode === 'object') return { json: params(declared.find((t) => t.function.name === mode.name)!) };
  return {
    json: {
      type: 'array',
      minItems: 1,
      items: {
        anyOf: declared.map((t) => ({
          type: 'object',
          properties: { name: { type: 'string', enum: [t.function.name] }, parameters: params(t) },
          required: ['name', 'parameters'],
        })),
      },
    },
  };
}

export function parseChatRequest(raw: unknown): ChatRequest {
  const b = body(raw);
  const c = common(b);
  const images: { url: string }[] = [];
  // nvext.token_data makes the messages optional (the prompt is given as tokens).
  const msgs = c.nvext.token_data && !present(b.messages) ? [] : messages(b.messages, images);
  if (present(b.logprobs)) {
    if (bool(b.logprobs, 'logprobs')) c.logprobs = 0;
  }
  if (present(b.top_logprobs)) {
    const k = int(b.top_logprobs, 'top_logprobs', 0, 20);
    if (c.logprobs === null) throw badRequest('top_logprobs', 'top_logprobs: requires logprobs: true');
    c.logprobs = k;
  }
  const declared = present(b.tools) ? tools(b.tools) : undefined;
  const mode = toolChoice(b.tool_choice, declared);
  const req: ChatRequest = {
    kind: 'chat',
    ...c,
    messages: msgs,
    addGenerationPrompt: true,
    continueFinalMessage: false,
    toolMode: mode,
    parallelToolCalls: present(b.parallel_tool_calls)
      ? bool(b.parallel_tool_calls, 'parallel_tool_calls')
      : true,
    images,
  };
  // tool_choice none: the model is not shown the tools (so it cannot call them).
  if (declared && mode !== null) req.tools = declared;
  if (present(b.tool_choice)) req.toolChoice = b.tool_choice;
  if (mode === 'required' || (mode !== null && typeof mode === 'object')) {
    if (c.sampling.guided_decoding)
      throw badRequest(
        'tool_choice',
        'tool_choice: "required" or a named function cannot be combined with response_format / guided decoding',
      );
    req.sampling.guided_decoding = toolGuidance(mode, declared!);
  }
  if (present(b.chat_template_kwargs)) {
    if (!isObj(b.chat_template_kwargs))
      throw badRequest(
        'chat_template_kwargs',
        `chat_template_kwargs: expected an object, got ${describe(b.chat_template_kwargs)}`,
      );
    req.templateKwargs = b.chat_template_kwargs;
  }
  if (present(b.reasoning_effort)) {
    const e = str(b.reasoning_effort, 'reasoning_effort');
    if (!['low', 'medium', 'high'].includes(e))
      throw badRequest(
        'reasoning_effort',
        `reasoning_effort: expected low, medium or high, got ${describe(e)}`,
      );
    req.templateKwargs = { reasoning_effort: e, ...(req.templateKwargs ?? {}) };
  }
  if (present(b.add_generation_prompt))
    req.addGenerationPrompt = bool(b.add_generation_prompt, 'add_generation_prompt');
  if (present(b.continue_final_message)) {
    req.continueFinalMessage = bool(b.continue_final_message, 'continue_final_message');
    if (req.continueFinalMessage && present(b.add_generation_prompt) && req.addGenerationPrompt)
      throw badRequest(
        'continue_final_message',
        'continue_final_message: cannot be combined with add_generation_prompt: true',
      );
    if (req.continueFinalMessage) req.addGenerationPrompt = false;
  }
  if (present(b.documents)) {
    if (!Array.isArray(b.documents))
      throw badRequest('documents', `documents: expected an array, got ${describe(b.documents)}`);
    req.documents = b.documents;
  }
  return req;
}

function onePrompt(p: unknown, field: string): CompletionPrompt {
  if (typeof p === 'string') return { prompt: p, promptTokens: null };
  const t = tokenIds(p, field);
  if (t.length === 0) throw badRequest(field, `${field}: must not be empty`);
  return { prompt: null, promptTokens: t };
}

export function parseCompletionRequest(raw: unknown): CompletionRequest {
  const b = body(raw);
  const c = common(b);
  let batch: CompletionPrompt[];
  const p = b.prompt;
  if (!present(p)) {
    if (!c.nvext.token_data) throw badRequest('prompt', 'prompt: required');
    batch = [{ prompt: null, promptTokens: null }];
  } else if (typeof p === 'string') batch = [{ prompt: p, promptTokens: null }];
  else if (Array.isArray(p)) {
    if (p.length === 0) throw badRequest('prompt', 'prompt: must not be empty');
    if (typeof p[0] === 'string' || Array.isArray(p[0])) {
      // A batch: several prompts, each its own choices (index = prompt * n + choice).
      if (p.length > 64)
        throw badRequest('prompt', `prompt: at most 64 prompts per request, got ${p.length}`);
      batch = p.map((x, i) => {
        if (typeof x !== 'string' && !Array.isArray(x))
          throw badRequest(`prompt[${i}]`, `prompt[${i}]: expected a string or token ids like prompt[0]`);
        return onePrompt(x, `prompt[${i}]`);
      });
    } else batch = [onePrompt(p, 'prompt')];
  } else
    throw badRequest(
      'prompt',
      `prompt: expected a string, an array of strings or token ids, got ${describe(p)}`,
    );
  const suffix = present(b.suffix) ? str(b.suffix, 'suffix') : null;
  const echo = present(b.echo) ? bool(b.echo, 'echo') : false;
  if (present(b.logprobs) && b.logprobs !== false) c.logprobs = int(b.logprobs, 'logprobs', 0, 20);
  if (echo && c.logprobs !== null)
    throw badRequest('echo', 'echo: cannot be combined with logprobs (prompt logprobs are not returned)');
  if (suffix !== null && batch.some((x) => x.prompt === null))
    throw badRequest('suffix', 'suffix: needs a text prompt');
  const first = batch[0]!;
  return {
    kind: 'completions',
    ...c,
    prompt: first.prompt,
    promptTokens: first.promptTokens,
    batch,
    suffix,
    echo,
  };
}
