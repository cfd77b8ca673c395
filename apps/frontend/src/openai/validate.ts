/**
 * Validation of OpenAI chat-completions and completions bodies. The whole body is checked before
 * anything happens (no routing, no booking), and the first problem is reported as a 400 naming the
 * field (`param`), e.g. `messages[2].content: expected a string or an array of content parts`.
 */
import { parseNvext, type Nvext } from '@kvrouter/protocols';
import { badRequest } from '../errors.js';

export const CHAT_ROLES = ['system', 'developer', 'user', 'assistant', 'tool', 'function'] as const;
export type ChatRole = (typeof CHAT_ROLES)[number];

export interface ChatMessage {
  role: ChatRole;
  /** Text parts joined; null only for an assistant turn that carries tool calls. */
  content: string | null;
  name?: string;
  tool_calls?: unknown[];
  tool_call_id?: string;
}

/** Sampling fields forwarded to the engine as `sampling_options` (the simulated engine ignores them). */
export interface SamplingOptions {
  temperature?: number;
  top_p?: number;
  top_k?: number;
  seed?: number;
  presence_penalty?: number;
  frequency_penalty?: number;
  repetition_penalty?: number;
}

interface CommonRequest {
  model: string;
  stream: boolean;
  /** `stream_options.include_usage`. */
  includeUsage: boolean;
  /** Null: up to the context length. */
  maxTokens: number | null;
  ignoreEos: boolean;
  /** Stop strings (at most 4, as OpenAI). */
  stop: string[];
  stopTokenIds: number[];
  sampling: SamplingOptions;
  nvext: Nvext;
  user?: string;
}

export interface ChatRequest extends CommonRequest {
  kind: 'chat';
  messages: ChatMessage[];
  tools?: unknown[];
  toolChoice?: unknown;
  /** vLLM's `chat_template_kwargs`, passed to the template. */
  templateKwargs?: Record<string, unknown>;
  addGenerationPrompt: boolean;
}

export interface CompletionRequest extends CommonRequest {
  kind: 'completions';
  /** Text prompt, or null when the prompt is token ids. */
  prompt: string | null;
  promptTokens: Uint32Array | null;
  echo: boolean;
}

export type InferenceRequest = ChatRequest | CompletionRequest;

const U32_MAX = 0xffffffff;

const isObj = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
const present = (v: unknown): boolean => v !== undefined && v !== null;

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'string') return v.length > 40 ? `a string "${v.slice(0, 40)}…"` : `"${v}"`;
  if (typeof v === 'object') return 'an object';
  if (typeof v === 'bigint') return v.toString();
  return String(v as number | boolean | undefined);
}

function num(v: unknown, field: string, lo: number, hi: number): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < lo || v > hi)
    throw badRequest(field, `${field}: expected a number between ${lo} and ${hi}, got ${describe(v)}`);
  return v;
}

function int(v: unknown, field: string, lo: number, hi: number): number {
  const n = typeof v === 'bigint' && v >= BigInt(lo) && v <= BigInt(hi) ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < lo || n > hi)
    throw badRequest(field, `${field}: expected an integer between ${lo} and ${hi}, got ${describe(v)}`);
  return n;
}

function bool(v: unknown, field: string): boolean {
  if (typeof v !== 'boolean') throw badRequest(field, `${field}: expected a boolean, got ${describe(v)}`);
  return v;
}

function str(v: unknown, field: string): string {
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
  if (present(b.n) && int(b.n, 'n', 1, 128) !== 1) throw badRequest('n', 'n: only n = 1 is supported');
  if (present(b.best_of) && int(b.best_of, 'best_of', 1, 128) !== 1)
    throw badRequest('best_of', 'best_of: only best_of = 1 is supported');
  if (present(b.logprobs) && b.logprobs !== false && b.logprobs !== 0)
    throw badRequest('logprobs', 'logprobs: not supported by kvrouter');
  const sampling: SamplingOptions = {};
  if (present(b.temperature)) sampling.temperature = num(b.temperature, 'temperature', 0, 2);
  if (present(b.top_p)) sampling.top_p = num(b.top_p, 'top_p', 0, 1);
  if (present(b.top_k)) sampling.top_k = int(b.top_k, 'top_k', -1, U32_MAX);
  if (present(b.seed)) sampling.seed = int(b.seed, 'seed', -Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
  if (present(b.presence_penalty))
    sampling.presence_penalty = num(b.presence_penalty, 'presence_penalty', -2, 2);
  if (present(b.frequency_penalty))
    sampling.frequency_penalty = num(b.frequency_penalty, 'frequency_penalty', -2, 2);
  if (present(b.repetition_penalty))
    sampling.repetition_penalty = num(b.repetition_penalty, 'repetition_penalty', 0, Number.MAX_VALUE);
  const out: CommonRequest = {
    model,
    stream,
    includeUsage,
    maxTokens,
    ignoreEos,
    stop,
    stopTokenIds,
    sampling,
    nvext: parseNvext(b.nvext),
  };
  if (present(b.user)) out.user = str(b.user, 'user');
  return out;
}

function contentOf(v: unknown, field: string, role: ChatRole, hasToolCalls: boolean): string | null {
  if (typeof v === 'string') return v;
  if (v === null || v === undefined) {
    if (role === 'assistant' && hasToolCalls) return null;
    throw badRequest(field, `${field}: required for role ${role}`);
  }
  if (!Array.isArray(v))
    throw badRequest(field, `${field}: expected a string or an array of content parts, got ${describe(v)}`);
  let text = '';
  for (let i = 0; i < v.length; i++) {
    const p: unknown = v[i];
    const f = `${field}[${i}]`;
    if (!isObj(p)) throw badRequest(f, `${f}: expected a content part object, got ${describe(p)}`);
    if (p.type !== 'text')
      throw badRequest(
        `${f}.type`,
        `${f}.type: only "text" content parts are supported, got ${describe(p.type)}`,
      );
    text += str(p.text, `${f}.text`);
  }
  return text;
}

function messages(v: unknown): ChatMessage[] {
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
      content: contentOf(m.content, `${f}.content`, r, toolCalls !== undefined),
    };
    if (present(m.name)) msg.name = str(m.name, `${f}.name`);
    if (toolCalls) msg.tool_calls = toolCalls;
    if (present(m.tool_call_id)) msg.tool_call_id = str(m.tool_call_id, `${f}.tool_call_id`);
    out[i] = msg;
  }
  return out;
}

function body(raw: unknown): Record<string, unknown> {
  if (!isObj(raw)) throw badRequest('body', `request body: expected a JSON object, got ${describe(raw)}`);
  return raw;
}

export function parseChatRequest(raw: unknown): ChatRequest {
  const b = body(raw);
  const c = common(b);
  // nvext.token_data makes the messages optional (the prompt is given as tokens).
  const msgs = c.nvext.token_data && !present(b.messages) ? [] : messages(b.messages);
  const req: ChatRequest = { kind: 'chat', ...c, messages: msgs, addGenerationPrompt: true };
  if (present(b.tools)) {
    if (!Array.isArray(b.tools))
      throw badRequest('tools', `tools: expected an array, got ${describe(b.tools)}`);
    req.tools = b.tools;
  }
  if (present(b.tool_choice)) req.toolChoice = b.tool_choice;
  if (present(b.chat_template_kwargs)) {
    if (!isObj(b.chat_template_kwargs))
      throw badRequest(
        'chat_template_kwargs',
        `chat_template_kwargs: expected an object, got ${describe(b.chat_template_kwargs)}`,
      );
    req.templateKwargs = b.chat_template_kwargs;
  }
  if (present(b.add_generation_prompt))
    req.addGenerationPrompt = bool(b.add_generation_prompt, 'add_generation_prompt');
  return req;
}

export function parseCompletionRequest(raw: unknown): CompletionRequest {
  const b = body(raw);
  const c = common(b);
  let prompt: string | null = null;
  let promptTokens: Uint32Array | null = null;
  const p = b.prompt;
  if (!present(p)) {
    if (!c.nvext.token_data) throw badRequest('prompt', 'prompt: required');
  } else if (typeof p === 'string') prompt = p;
  else if (Array.isArray(p)) {
    if (p.length === 0) throw badRequest('prompt', 'prompt: must not be empty');
    if (typeof p[0] === 'string') {
      if (p.length > 1)
        throw badRequest(
          'prompt',
          'prompt: batches of several prompts are not supported; send one per request',
        );
      prompt = p[0];
    } else if (Array.isArray(p[0])) {
      if (p.length > 1)
        throw badRequest(
          'prompt',
          'prompt: batches of several prompts are not supported; send one per request',
        );
      promptTokens = tokenIds(p[0], 'prompt[0]');
    } else promptTokens = tokenIds(p, 'prompt');
    if (promptTokens?.length === 0) throw badRequest('prompt', 'prompt: must not be empty');
  } else
    throw badRequest(
      'prompt',
      `prompt: expected a string, an array of strings or token ids, got ${describe(p)}`,
    );
  if (present(b.suffix)) throw badRequest('suffix', 'suffix: not supported by kvrouter');
  const echo = present(b.echo) ? bool(b.echo, 'echo') : false;
  return { kind: 'completions', ...c, prompt, promptTokens, echo };
}
