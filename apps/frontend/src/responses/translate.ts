/**
 * A Responses API body (`POST /v1/responses`) as the chat-completions body the existing pipeline
 * serves: `instructions` → a leading system message, `input` (a string or items: messages with
 * text / image parts, `function_call`, `function_call_output`) → chat messages, function tools →
 * chat tools, `max_output_tokens` → `max_tokens`, `reasoning.effort` → `reasoning_effort`,
 * `text.format` → `response_format`. Errors name the Responses field (`input[2].call_id`); the
 * conversation of `previous_response_id` is prepended by the caller.
 */
import { badRequest } from '../errors.js';
import { isObj, present } from '../openai/validate.js';

type Obj = Record<string, unknown>;

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'string') return v.length > 40 ? `a string "${v.slice(0, 40)}…"` : `"${v}"`;
  if (typeof v === 'object') return 'an object';
  return String(v as number | boolean | undefined);
}

function str(v: unknown, field: string): string {
  if (typeof v !== 'string') throw badRequest(field, `${field}: expected a string, got ${describe(v)}`);
  return v;
}

/** One chat message in the raw chat-completions body shape. */
export type ChatBodyMessage = Obj & { role: string };

/** The Responses-level settings echoed in the response object. */
export interface ResponsesParams {
  model: string;
  stream: boolean;
  /** `store` (default true): keep the response for `previous_response_id`. */
  store: boolean;
  instructions: string | null;
  previousResponseId: string | null;
  maxOutputTokens: number | null;
  temperature: number | null;
  topP: number | null;
  tools: Obj[];
  toolChoice: unknown;
  parallelToolCalls: boolean;
  reasoning: { effort: string | null; summary: string | null } | null;
  textFormat: Obj;
  metadata: Obj;
  user: string | null;
  truncation: string;
}

export interface Translated {
  params: ResponsesParams;
  /** The conversation of this turn (without instructions and without the previous response's). */
  input: ChatBodyMessage[];
  /** Chat body fields besides `model` and `messages`. */
  chat: Obj;
}

const ROLES = ['user', 'system', 'developer', 'assistant'] as const;
const EFFORTS = ['none', 'minimal', 'low', 'medium', 'high'] as const;

/** Message content: a string, or parts (`input_text`, `output_text`, `input_image`) as chat parts. */
function content(v: unknown, field: string): string | Obj[] {
  if (typeof v === 'string') return v;
  if (!Array.isArray(v))
    throw badRequest(field, `${field}: expected a string or an array of content parts, got ${describe(v)}`);
  const parts: Obj[] = [];
  v.forEach((p: unknown, i) => {
    const f = `${field}[${i}]`;
    if (!isObj(p)) throw badRequest(f, `${f}: expected a content part object, got ${describe(p)}`);
    if (p.type === 'input_text' || p.type === 'output_text' || p.type === 'text')
      parts.push({ type: 'text', text: str(p.text, `${f}.text`) });
    else if (p.type === 'refusal') parts.push({ type: 'text', text: str(p.refusal, `${f}.refusal`) });
    else if (p.type === 'input_image') {
      const url = p.image_url;
      if (typeof url !== 'string')
        throw badRequest(
          `${f}.image_url`,
          `${f}.image_url: expected an image URL (file_id images are not supported), got ${describe(url)}`,
        );
      parts.push({ type: 'image_url', image_url: { url } });
    } else
      throw badRequest(
        `${f}.type`,
        `${f}.type: expected input_text, output_text or input_image (files and audio are not supported), got ${describe(p.type)}`,
      );
  });
  // Text-only parts as one string: every chat template renders that.
  if (parts.every((p) => p.type === 'text')) return parts.map((p) => p.text as string).join('');
  return parts;
}

/** `input` items → chat messages; consecutive `function_call` items form one assistant turn. */
function inputMessages(v: unknown): ChatBodyMessage[] {
  if (typeof v === 'string') return [{ role: 'user', content: v }];
  if (!Array.isArray(v))
    throw badRequest('input', `input: expected a string or an array of input items, got ${describe(v)}`);
  const out: ChatBodyMessage[] = [];
  v.forEach((it: unknown, i) => {
    const f = `input[${i}]`;
    if (!isObj(it)) throw badRequest(f, `${f}: expected an input item object, got ${describe(it)}`);
    const type = it.type ?? 'message';
    if (type === 'message') {
      const role = it.role;
      if (typeof role !== 'string' || !(ROLES as readonly string[]).includes(role))
        throw badRequest(
          `${f}.role`,
          `${f}.role: expected one of ${ROLES.join(', ')}, got ${describe(role)}`,
        );
      out.push({ role, content: content(it.content, `${f}.content`) });
    } else if (type === 'function_call') {
      const call = {
        id: str(it.call_id, `${f}.call_id`),
        type: 'function',
        function: { name: str(it.name, `${f}.name`), arguments: str(it.arguments, `${f}.arguments`) },
      };
      const last = out[out.length - 1];
      if (last && last.role === 'assistant' && Array.isArray(last.tool_calls))
        (last.tool_calls as unknown[]).push(call);
      else out.push({ role: 'assistant', content: null, tool_calls: [call] });
    } else if (type === 'function_call_output') {
      const output = it.output;
      out.push({
        role: 'tool',
        tool_call_id: str(it.call_id, `${f}.call_id`),
        content: typeof output === 'string' ? output : content(output, `${f}.output`),
      });
    } else if (type === 'reasoning') {
      // Earlier reasoning is not shown to the model again (as chat templates drop it).
    } else
      throw badRequest(
        `${f}.type`,
        `${f}.type: expected message, function_call, function_call_output or reasoning, got ${describe(type)}`,
      );
  });
  return out;
}

function tools(v: unknown): { responses: Obj[]; chat: Obj[] } {
  if (!Array.isArray(v)) throw badRequest('tools', `tools: expected an array, got ${describe(v)}`);
  const responses: Obj[] = [];
  const chat: Obj[] = [];
  v.forEach((t: unknown, i) => {
    const f = `tools[${i}]`;
    if (!isObj(t) || t.type !== 'function')
      throw badRequest(
        `${f}.type`,
        `${f}.type: only function tools are supported (built-in tools need OpenAI's servers), got ${describe(isObj(t) ? t.type : t)}`,
      );
    const name = str(t.name, `${f}.name`);
    const fn: Obj = { name };
    if (present(t.description)) fn.description = str(t.description, `${f}.description`);
    if (present(t.parameters)) {
      if (!isObj(t.parameters))
        throw badRequest(`${f}.parameters`, `${f}.parameters: expected a JSON schema object`);
      fn.parameters = t.parameters;
    }
    if (present(t.strict)) fn.strict = t.strict;
    responses.push({
      type: 'function',
      name,
      description: fn.description ?? null,
      parameters: fn.parameters ?? null,
      strict: t.strict ?? null,
    });
    chat.push({ type: 'function', function: fn });
  });
  return { responses, chat };
}

function toolChoice(v: unknown): unknown {
  if (v === 'auto' || v === 'none' || v === 'required') return v;
  if (isObj(v) && v.type === 'function')
    return { type: 'function', function: { name: str(v.name, 'tool_choice.name') } };
  throw badRequest(
    'tool_choice',
    `tool_choice: expected "auto", "none", "required" or {"type": "function", "name": ...}, got ${describe(v)}`,
  );
}

function textFormat(v: unknown): { echo: Obj; chat: Obj | null } {
  if (!isObj(v)) throw badRequest('text', `text: expected an object, got ${describe(v)}`);
  if (!present(v.format)) return { echo: { type: 'text' }, chat: null };
  const fmt = v.format;
  if (!isObj(fmt)) throw badRequest('text.format', `text.format: expected an object, got ${describe(fmt)}`);
  if (fmt.type === 'text') return { echo: { type: 'text' }, chat: null };
  if (fmt.type === 'json_object') return { echo: fmt, chat: { type: 'json_object' } };
  if (fmt.type === 'json_schema')
    return {
      echo: fmt,
      chat: {
        type: 'json_schema',
        json_schema: { name: str(fmt.name, 'text.format.name'), schema: fmt.schema ?? {} },
      },
    };
  throw badRequest(
    'text.format.type',
    `text.format.type: expected text, json_object or json_schema, got ${describe(fmt.type)}`,
  );
}

/** Validates a Responses body and builds the chat body parts (everything but the message history). */
export function translateResponses(raw: unknown): Translated {
  if (!isObj(raw)) throw badRequest('body', `request body: expected a JSON object, got ${describe(raw)}`);
  const b = raw;
  if (!present(b.model)) throw badRequest('model', 'model: required');
  const model = str(b.model, 'model');
  if (!present(b.input)) throw badRequest('input', 'input: required');
  const input = inputMessages(b.input);
  const chat: Obj = {};
  const bool = (k: string, dflt: boolean): boolean => {
    if (!present(b[k])) return dflt;
    if (typeof b[k] !== 'boolean') throw badRequest(k, `${k}: expected a boolean, got ${describe(b[k])}`);
    return b[k];
  };
  const stream = bool('stream', false);
  const store = bool('store', true);
  const parallelToolCalls = bool('parallel_tool_calls', true);
  let maxOutputTokens: number | null = null;
  if (present(b.max_output_tokens)) {
    const m = b.max_output_tokens;
    if (typeof m !== 'number' || !Number.isInteger(m) || m < 1 || m > 0xffffffff)
      throw badRequest(
        'max_output_tokens',
        `max_output_tokens: expected a positive integer, got ${describe(m)}`,
      );
    maxOutputTokens = m;
    chat.max_tokens = m;
  }
  const numIn = (k: string, lo: number, hi: number): number | null => {
    if (!present(b[k])) return null;
    const x = b[k];
    if (typeof x !== 'number' || !Number.isFinite(x) || x < lo || x > hi)
      throw badRequest(k, `${k}: expected a number between ${lo} and ${hi}, got ${describe(x)}`);
    chat[k] = x;
    return x;
  };
  const temperature = numIn('temperature', 0, 2);
  const topP = numIn('top_p', 0, 1);
  let resTools: Obj[] = [];
  if (present(b.tools)) {
    const t = tools(b.tools);
    resTools = t.responses;
    if (t.chat.length > 0) chat.tools = t.chat;
  }
  let tc: unknown = resTools.length > 0 ? 'auto' : 'none';
  if (present(b.tool_choice)) {
    chat.tool_choice = toolChoice(b.tool_choice);
    tc = b.tool_choice;
  }
  if (resTools.length > 0 || present(b.tool_choice)) chat.parallel_tool_calls = parallelToolCalls;
  let reasoning: ResponsesParams['reasoning'] = null;
  if (present(b.reasoning)) {
    const r = b.reasoning;
    if (!isObj(r)) throw badRequest('reasoning', `reasoning: expected an object, got ${describe(r)}`);
    let effort: string | null = null;
    if (present(r.effort)) {
      effort = str(r.effort, 'reasoning.effort');
      if (!(EFFORTS as readonly string[]).includes(effort))
        throw badRequest(
          'reasoning.effort',
          `reasoning.effort: expected one of ${EFFORTS.join(', ')}, got ${describe(effort)}`,
        );
      // Chat templates know low / medium / high; none and minimal ask for the least there is.
      chat.reasoning_effort = effort === 'none' || effort === 'minimal' ? 'low' : effort;
    }
    const summary = present(r.summary) ? str(r.summary, 'reasoning.summary') : null;
    reasoning = { effort, summary };
  }
  let fmt: Obj = { type: 'text' };
  if (present(b.text)) {
    const t = textFormat(b.text);
    fmt = t.echo;
    if (t.chat) chat.response_format = t.chat;
  }
  let metadata: Obj = {};
  if (present(b.metadata)) {
    if (!isObj(b.metadata))
      throw badRequest('metadata', `metadata: expected an object, got ${describe(b.metadata)}`);
    metadata = b.metadata;
  }
  const truncation = present(b.truncation) ? str(b.truncation, 'truncation') : 'disabled';
  if (truncation !== 'disabled' && truncation !== 'auto')
    throw badRequest('truncation', `truncation: expected disabled or auto, got ${describe(truncation)}`);
  if (present(b.background) && b.background !== false)
    throw badRequest('background', 'background: background responses are not supported');
  // Passed through as the chat endpoint takes them (seed, vLLM's test hooks, nvext routing hints).
  for (const k of ['seed', 'vllm_xargs', 'nvext', 'top_k', 'stop'] as const)
    if (present(b[k])) chat[k] = b[k];
  const user = present(b.user) ? str(b.user, 'user') : null;
  if (user !== null) chat.user = user;
  return {
    params: {
      model,
      stream,
      store,
      instructions: present(b.instructions) ? str(b.instructions, 'instructions') : null,
      previousResponseId: present(b.previous_response_id)
        ? str(b.previous_response_id, 'previous_response_id')
        : null,
      maxOutputTokens,
      temperature,
      topP,
      tools: resTools,
      toolChoice: tc,
      parallelToolCalls,
      reasoning,
      textFormat: fmt,
      metadata,
      user,
      truncation,
    },
    input,
    chat,
  };
}
