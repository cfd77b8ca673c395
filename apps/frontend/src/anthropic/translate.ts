/**
 * Anthropic Messages request → the internal chat request (`ChatRequest` of openai/validate.ts), so
 * `/v1/messages` runs through the same pipeline as chat completions (template, tokenizer, router,
 * engine, output parsers). The whole body is checked first, and the first problem is a 400 naming
 * the field in Anthropic's dotted form (`messages.1.content.0.tool_use_id`).
 *
 * Translation: `system` → a leading system message; user `tool_result` blocks → `tool` messages
 * (before the user's other blocks, with the tool's name looked up from the earlier `tool_use`);
 * assistant `tool_use` → `tool_calls`, `thinking` → `reasoning_content`; `image` → an image part;
 * tools → function tools (`input_schema` = `parameters`); `tool_choice` auto / any / tool / none →
 * auto / required / named / none (`disable_parallel_tool_use` → `parallel_tool_calls: false`);
 * `thinking` → `chat_template_kwargs` `enable_thinking` / `thinking`; `metadata.user_id` → `user`;
 * a final assistant turn is continued (prefill). `cache_control` breakpoints: see `CacheHints`.
 */
import { parseNvext } from '@kvrouter/protocols';
import { badRequest } from '../errors.js';
import type { ChatMessage, ChatRequest, ContentPart } from '../openai/validate.js';
import { bool, describe, int, isObj, num, parseChatRequest, present, str } from '../openai/validate.js';

/** Where the last `cache_control` breakpoint sits (Anthropic's prefix order: tools, system, messages). */
type Breakpoint =
  { at: 'tools' } | { at: 'system'; block: number } | { at: 'message'; index: number; block: number };

export interface CacheHints {
  /** Blocks marked with `cache_control` (top-level `cache_control` counts as one on the last block). */
  breakpoints: number;
  /** TTL of the last breakpoint (`5m` unless given). */
  ttl: '5m' | '1h' | null;
  /**
   * The conversation cut right after the last breakpoint, rendered without a generation prompt:
   * its tokens that the full prompt shares are the prefix the client asked to keep. Null: no breakpoint.
   */
  prefix: ChatRequest | null;
}

export interface MessagesRequest {
  chat: ChatRequest;
  /** `max_tokens: 0`: prefill the prompt (warm the routed worker's cache) and return no content. */
  prewarm: boolean;
  cache: CacheHints;
}

const U32_MAX = 0xffffffff;
const MAX_BREAKPOINTS = 4;
const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

function arr(v: unknown, field: string): unknown[] {
  if (!Array.isArray(v)) throw badRequest(field, `${field}: expected an array, got ${describe(v)}`);
  return v;
}

function obj(v: unknown, field: string): Record<string, unknown> {
  if (!isObj(v)) throw badRequest(field, `${field}: expected an object, got ${describe(v)}`);
  return v;
}

/** Counts breakpoints while the body is walked. */
class Marks {
  count = 0;
  last: Breakpoint | null = null;
  ttl: '5m' | '1h' | null = null;

  /** Validates `b.cache_control` (when present) and records `at` as the latest breakpoint. */
  check(b: Record<string, unknown>, field: string, at: Breakpoint): void {
    if (!present(b.cache_control)) return;
    const f = field === '' ? 'cache_control' : `${field}.cache_control`;
    const c = obj(b.cache_control, f);
    if (c.type !== 'ephemeral')
      throw badRequest(`${f}.type`, `${f}.type: expected "ephemeral", got ${describe(c.type)}`);
    let ttl: '5m' | '1h' = '5m';
    if (present(c.ttl)) {
      if (c.ttl !== '5m' && c.ttl !== '1h')
        throw badRequest(`${f}.ttl`, `${f}.ttl: expected "5m" or "1h", got ${describe(c.ttl)}`);
      ttl = c.ttl;
    }
    this.count++;
    if (this.count > MAX_BREAKPOINTS)
      throw badRequest(
        f,
        `${f}: a maximum of ${MAX_BREAKPOINTS} blocks with cache_control may be provided (this is number ${this.count})`,
      );
    this.last = at;
    this.ttl = ttl;
  }
}

/** `image` block → an OpenAI image part (base64 → data URL). */
function imagePart(b: Record<string, unknown>, field: string): ContentPart {
  const f = `${field}.source`;
  const s = obj(b.source, f);
  if (s.type === 'base64') {
    const mt = str(s.media_type, `${f}.media_type`);
    if (!/^image\/(jpeg|png|gif|webp)$/.test(mt))
      throw badRequest(
        `${f}.media_type`,
        `${f}.media_type: expected image/jpeg, image/png, image/gif or image/webp, got ${describe(mt)}`,
      );
    return { type: 'image_url', image_url: { url: `data:${mt};base64,${str(s.data, `${f}.data`)}` } };
  }
  if (s.type === 'url') {
    const url = str(s.url, `${f}.url`);
    if (!/^https?:\/\//.test(url))
      throw badRequest(`${f}.url`, `${f}.url: expected an http(s) URL, got ${describe(url)}`);
    return { type: 'image_url', image_url: { url } };
  }
  throw badRequest(`${f}.type`, `${f}.type: expected "base64" or "url", got ${describe(s.type)}`);
}

function textOf(b: Record<string, unknown>, field: string): string {
  return str(b.text, `${field}.text`);
}

/** A block list (or string) of content: the blocks, each checked to be an object with a type. */
function blocks(v: unknown, field: string): Record<string, unknown>[] {
  return arr(v, field).map((b, j) => {
    const f = `${field}.${j}`;
    const o = obj(b, f);
    if (typeof o.type !== 'string') throw badRequest(`${f}.type`, `${f}.type: required`);
    return o;
  });
}

/** `tool_result.content`: a string, or text / image blocks. */
function toolResultContent(v: unknown, field: string): string | ContentPart[] {
  if (!present(v)) return '';
  if (typeof v === 'string') return v;
  return blocks(v, field).map((b, k) => {
    const f = `${field}.${k}`;
    if (b.type === 'text') return { type: 'text', text: textOf(b, f) };
    if (b.type === 'image') return imagePart(b, f);
    throw badRequest(
      `${f}.type`,
      `${f}.type: expected "text" or "image" in a tool result, got ${describe(b.type)}`,
    );
  });
}

interface Converted {
  messages: ChatMessage[];
  /** The last assistant turn is continued (Anthropic's prefill). */
  continueFinal: boolean;
}

/**
 * `system` and `messages` (both as given, possibly cut for the breakpoint prefix) → chat messages.
 * `marks`: null when the breakpoints were counted already (the prefix cut).
 */
function convert(system: unknown, messages: unknown[], marks: Marks | null): Converted {
  const out: ChatMessage[] = [];
  if (present(system)) {
    if (typeof system === 'string') out.push({ role: 'system', content: system });
    else {
      const parts: ContentPart[] = blocks(system, 'system').map((b, j) => {
        const f = `system.${j}`;
        if (b.type !== 'text')
          throw badRequest(`${f}.type`, `${f}.type: expected "text", got ${describe(b.type)}`);
        marks?.check(b, f, { at: 'system', block: j });
        return { type: 'text', text: textOf(b, f) };
      });
      out.push({ role: 'system', content: parts });
    }
  }
  const toolNames = new Map<string, string>();
  for (let i = 0; i < messages.length; i++) {
    const f = `messages.${i}`;
    const m = obj(messages[i], f);
    const role = m.role;
    if (role !== 'user' && role !== 'assistant' && role !== 'system')
      throw badRequest(`${f}.role`, `${f}.role: expected "user" or "assistant", got ${describe(role)}`);
    if (!present(m.content)) throw badRequest(`${f}.content`, `${f}.content: required`);
    if (typeof m.content === 'string') {
      out.push({ role, content: m.content });
      continue;
    }
    const bs = blocks(m.content, `${f}.content`);
    if (role === 'assistant') {
      let text = '';
      let reasoning = '';
      const calls: unknown[] = [];
      bs.forEach((b, j) => {
        const bf = `${f}.content.${j}`;
        marks?.check(b, bf, { at: 'message', index: i, block: j });
        if (b.type === 'text') text += textOf(b, bf);
        else if (b.type === 'thinking') reasoning += str(b.thinking, `${bf}.thinking`);
        else if (b.type === 'redacted_thinking') return;
        else if (b.type === 'tool_use') {
          const id = str(b.id, `${bf}.id`);
          const name = str(b.name, `${bf}.name`);
          const input = present(b.input) ? obj(b.input, `${bf}.input`) : {};
          toolNames.set(id, name);
          calls.push({ id, type: 'function', function: { name, arguments: JSON.stringify(input) } });
        } else
          throw badRequest(
            `${bf}.type`,
            `${bf}.type: expected "text", "thinking", "redacted_thinking" or "tool_use" in an assistant turn, got ${describe(b.type)}`,
          );
      });
      const msg: ChatMessage = { role: 'assistant', content: text === '' && calls.length > 0 ? null : text };
      if (calls.length > 0) msg.tool_calls = calls;
      if (reasoning !== '') msg.reasoning_content = reasoning;
      out.push(msg);
      continue;
    }
    // user (or system): tool results first (as tool messages), then the other blocks as one message.
    const parts: ContentPart[] = [];
    bs.forEach((b, j) => {
      const bf = `${f}.content.${j}`;
      marks?.check(b, bf, { at: 'message', index: i, block: j });
      if (b.type === 'text') parts.push({ type: 'text', text: textOf(b, bf) });
      else if (b.type === 'image' && role === 'user') parts.push(imagePart(b, bf));
      else if (b.type === 'tool_result' && role === 'user') {
        const id = str(b.tool_use_id, `${bf}.tool_use_id`);
        if (present(b.is_error)) bool(b.is_error, `${bf}.is_error`);
        const msg: ChatMessage = {
          role: 'tool',
          tool_call_id: id,
          content: toolResultContent(b.content, `${bf}.content`),
        };
        const name = toolNames.get(id);
        if (name !== undefined) msg.name = name;
        out.push(msg);
      } else
        throw badRequest(
          `${bf}.type`,
          `${bf}.type: expected "text", "image" or "tool_result" (documents, search results and server tool blocks are not supported), got ${describe(b.type)}`,
        );
    });
    if (parts.length > 0 || bs.length === 0) out.push({ role, content: parts });
  }
  const last = messages[messages.length - 1] as { role?: unknown } | undefined;
  return { messages: out, continueFinal: last?.role === 'assistant' };
}

interface FunctionTool {
  type: 'function';
  function: { name: string; parameters: Record<string, unknown>; description?: string };
}

function tools(v: unknown, marks: Marks): FunctionTool[] {
  return arr(v, 'tools').map((t, i) => {
    const f = `tools.${i}`;
    const o = obj(t, f);
    if (present(o.type) && o.type !== 'custom')
      throw badRequest(
        `${f}.type`,
        `${f}.type: only client tools (type "custom" or none) are supported, got ${describe(o.type)}`,
      );
    const name = str(o.name, `${f}.name`);
    if (!TOOL_NAME.test(name))
      throw badRequest(
        `${f}.name`,
        `${f}.name: letters, digits, _ and - only, 1 to 64 characters, got ${describe(name)}`,
      );
    if (!present(o.input_schema)) throw badRequest(`${f}.input_schema`, `${f}.input_schema: required`);
    const schema = obj(o.input_schema, `${f}.input_schema`);
    marks.check(o, f, { at: 'tools' });
    // OpenAI's key order (templates print the tools as JSON).
    const description = present(o.description) ? str(o.description, `${f}.description`) : undefined;
    return {
      type: 'function',
      function: { name, ...(description !== undefined ? { description } : {}), parameters: schema },
    };
  });
}

function toolChoice(v: unknown, names: readonly string[]): { choice: unknown; parallel: boolean } {
  const hasTools = names.length > 0;
  const f = 'tool_choice';
  const o = obj(v, f);
  const parallel = present(o.disable_parallel_tool_use)
    ? !bool(o.disable_parallel_tool_use, `${f}.disable_parallel_tool_use`)
    : true;
  if (o.type === 'none') return { choice: 'none', parallel };
  if (!hasTools) throw badRequest(f, `${f}: only allowed when tools are given`);
  if (o.type === 'auto') return { choice: 'auto', parallel };
  if (o.type === 'any') return { choice: 'required', parallel };
  if (o.type === 'tool') {
    const name = str(o.name, `${f}.name`);
    if (!names.includes(name))
      throw badRequest(`${f}.name`, `${f}.name: ${describe(name)} is not one of the tools`);
    return { choice: { type: 'function', function: { name } }, parallel };
  }
  throw badRequest(`${f}.type`, `${f}.type: expected auto, any, tool or none, got ${describe(o.type)}`);
}

/** `thinking` → template kwargs (Qwen3's `enable_thinking`, DeepSeek V3.1's `thinking`). */
function thinking(v: unknown, maxTokens: number | null): boolean {
  const f = 'thinking';
  const o = obj(v, f);
  if (o.type === 'disabled') return false;
  if (o.type === 'adaptive') return true;
  if (o.type === 'enabled') {
    if (!present(o.budget_tokens)) throw badRequest(`${f}.budget_tokens`, `${f}.budget_tokens: required`);
    const b = int(o.budget_tokens, `${f}.budget_tokens`, 1024, U32_MAX);
    if (maxTokens !== null && b >= maxTokens)
      throw badRequest(
        `${f}.budget_tokens`,
        `${f}.budget_tokens: must be less than max_tokens (${maxTokens}), got ${b}`,
      );
    return true;
  }
  throw badRequest(`${f}.type`, `${f}.type: expected enabled, adaptive or disabled, got ${describe(o.type)}`);
}

/** Cuts `system` / `messages` right after breakpoint `bp` (the client's cached prefix). */
function cut(system: unknown, messages: unknown[], bp: Breakpoint): { system: unknown; messages: unknown[] } {
  if (bp.at === 'tools') return { system: undefined, messages: [] };
  if (bp.at === 'system') return { system: (system as unknown[]).slice(0, bp.block + 1), messages: [] };
  const m = messages[bp.index] as Record<string, unknown>;
  const content = Array.isArray(m.content) ? m.content.slice(0, bp.block + 1) : m.content;
  return { system, messages: [...messages.slice(0, bp.index), { ...m, content }] };
}

/**
 * Validates an Anthropic body and builds the internal chat request. `count`: the count_tokens body
 * (no `max_tokens`, nothing generated).
 */
export function parseMessagesRequest(raw: unknown, count = false): MessagesRequest {
  if (!isObj(raw)) throw badRequest('body', `request body: expected a JSON object, got ${describe(raw)}`);
  const b = raw;
  if (!present(b.model)) throw badRequest('model', 'model: Field required');
  const model = str(b.model, 'model');
  if (model.length === 0) throw badRequest('model', 'model: must be a non-empty string');
  let maxTokens: number | null = null;
  if (!count) {
    if (!present(b.max_tokens)) throw badRequest('max_tokens', 'max_tokens: Field required');
    maxTokens = int(b.max_tokens, 'max_tokens', 0, U32_MAX);
  }
  if (!present(b.messages)) throw badRequest('messages', 'messages: Field required');
  const messages = arr(b.messages, 'messages');
  if (messages.length === 0) throw badRequest('messages', 'messages: at least one message is required');
  if (present(b.system) && typeof b.system !== 'string') arr(b.system, 'system');

  const marks = new Marks();
  const oa: Record<string, unknown> = { model };
  // Anthropic's prefix order (tools, system, messages) is the order breakpoints are counted in.
  const toolList = present(b.tools) ? tools(b.tools, marks) : undefined;
  const conv = convert(b.system, messages, marks);
  if (present(b.cache_control)) {
    // Top-level cache_control: the breakpoint goes on the last block of the last message.
    const lastIdx = messages.length - 1;
    const lastMsg = messages[lastIdx] as Record<string, unknown>;
    const n = Array.isArray(lastMsg.content) ? lastMsg.content.length : 0;
    marks.check(b, '', { at: 'message', index: lastIdx, block: Math.max(0, n - 1) });
  }
  oa.messages = conv.messages;
  if (conv.continueFinal) oa.continue_final_message = true;
  if (toolList && toolList.length > 0) oa.tools = toolList;
  if (present(b.tool_choice)) {
    const names = (toolList ?? []).map((t) => t.function.name);
    const tc = toolChoice(b.tool_choice, names);
    if (toolList && toolList.length > 0) oa.tool_choice = tc.choice;
    if (!tc.parallel) oa.parallel_tool_calls = false;
  }
  const prewarm = maxTokens === 0;
  if (maxTokens !== null) oa.max_tokens = prewarm ? 1 : maxTokens;
  if (present(b.stream)) oa.stream = bool(b.stream, 'stream');
  if (present(b.temperature)) oa.temperature = num(b.temperature, 'temperature', 0, 1);
  if (present(b.top_p)) oa.top_p = num(b.top_p, 'top_p', 0, 1);
  if (present(b.top_k)) oa.top_k = int(b.top_k, 'top_k', 0, U32_MAX);
  let stop: string[] = [];
  if (present(b.stop_sequences))
    stop = arr(b.stop_sequences, 'stop_sequences').map((s, i) => {
      const v = str(s, `stop_sequences.${i}`);
      if (v.length === 0)
        throw badRequest(`stop_sequences.${i}`, `stop_sequences.${i}: must be a non-empty string`);
      return v;
    });
  if (present(b.metadata)) {
    const md = obj(b.metadata, 'metadata');
    if (present(md.user_id)) {
      const u = str(md.user_id, 'metadata.user_id');
      if (u.length > 256)
        throw badRequest('metadata.user_id', `metadata.user_id: at most 256 characters, got ${u.length}`);
      oa.user = u;
    }
  }
  if (present(b.thinking)) {
    const on = thinking(b.thinking, maxTokens);
    oa.chat_template_kwargs = { enable_thinking: on, thinking: on };
  }
  // vLLM's `vllm_xargs` passes through as on chat completions (the mocker reads its test hooks there).
  if (present(b.vllm_xargs)) oa.vllm_xargs = obj(b.vllm_xargs, 'vllm_xargs');
  // kvrouter's extension: nvext as on chat completions; breakpoints add a routing hint (see README).
  const nvext = present(b.nvext) ? parseNvext(b.nvext) : {};
  if (marks.count > 0 && nvext.agent_hints?.kv_overlap_score_credit === undefined)
    nvext.agent_hints = { ...nvext.agent_hints, kv_overlap_score_credit: 1 };
  const chat = parseChatRequest(oa);
  chat.nvext = nvext;
  // Anthropic allows more stop sequences than OpenAI's four; the frontend applies them all.
  chat.stop = stop;
  let prefix: ChatRequest | null = null;
  if (marks.last) {
    const c = cut(b.system, messages, marks.last);
    prefix = {
      ...chat,
      messages: convert(c.system, c.messages, null).messages,
      addGenerationPrompt: false,
      continueFinalMessage: false,
    };
  }
  return { chat, prewarm, cache: { breakpoints: marks.count, ttl: marks.ttl, prefix } };
}
