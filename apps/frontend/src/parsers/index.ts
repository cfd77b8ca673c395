/**
 * Output parsers: model text → OpenAI `content`, `reasoning_content` and `tool_calls`, streaming
 * (deltas) and unary (the same machine run once). Pure: no I/O, no clock, ids injected.
 *
 * The parser of a model comes from its card (`runtime_config.tool_call_parser` /
 * `reasoning_parser`, as Dynamo's workers publish them from `--dyn-tool-call-parser` /
 * `--dyn-reasoning-parser`), overridden by the same flags on the frontend.
 */
import type { IdFactory } from './calls.js';
import { HarmonyParser } from './harmony.js';
import { ThinkParser } from './reasoning.js';
import {
  DeepSeekV3ToolParser,
  HermesToolParser,
  Llama3JsonToolParser,
  MistralToolParser,
  NamedToolParser,
  RequiredToolParser,
} from './tools.js';
import {
  append,
  empty,
  mergeToolCalls,
  type OutputParser,
  type ParsedOutput,
  type ToolCall,
} from './types.js';

export { promptOpensThinking } from './reasoning.js';
export type { IdFactory } from './calls.js';
export type { OutputParser, ToolCall, ToolCallDelta } from './types.js';
export { mergeToolCalls } from './types.js';

export const TOOL_CALL_PARSERS = [
  'hermes',
  'llama3_json',
  'mistral',
  'deepseek_v3',
  'deepseek_v3_1',
  'harmony',
] as const;
export type ToolCallParserName = (typeof TOOL_CALL_PARSERS)[number];

export const REASONING_PARSERS = ['basic', 'deepseek_r1', 'qwen3', 'gpt_oss'] as const;
export type ReasoningParserName = (typeof REASONING_PARSERS)[number];

/** What the request asked of tools, after validation. */
export type ToolChoice = 'none' | 'auto' | 'required' | { name: string };

export interface OutputParserOptions {
  toolCallParser: ToolCallParserName | null;
  reasoningParser: ReasoningParserName | null;
  /** Null: the request has no tools (nothing is parsed as a call). */
  toolChoice: ToolChoice | null;
  /** The rendered prompt leaves a `<think>` block open. */
  promptOpensThinking: boolean;
  newId: IdFactory;
}

export const isToolCallParser = (s: string): s is ToolCallParserName =>
  (TOOL_CALL_PARSERS as readonly string[]).includes(s);
export const isReasoningParser = (s: string): s is ReasoningParserName =>
  (REASONING_PARSERS as readonly string[]).includes(s);

/** Reasoning first, then calls in the content that remains. */
class Chain implements OutputParser {
  constructor(
    private readonly reasoning: OutputParser | null,
    private readonly tools: OutputParser | null,
  ) {}

  private then(r: ParsedOutput, last: boolean): ParsedOutput {
    if (!this.tools) return r;
    const out = empty();
    out.reasoning = r.reasoning;
    append(out, this.tools.push(r.content));
    if (last) append(out, this.tools.finish());
    return out;
  }

  push(text: string): ParsedOutput {
    return this.then(this.reasoning ? this.reasoning.push(text) : { ...empty(), content: text }, false);
  }

  finish(): ParsedOutput {
    return this.then(this.reasoning ? this.reasoning.finish() : empty(), true);
  }
}

/** The parser for one choice, or null when the text passes through unchanged. */
export function createOutputParser(o: OutputParserOptions): OutputParser | null {
  const choice = o.toolChoice;
  const callsWanted = choice !== null && choice !== 'none';
  if (o.reasoningParser === 'gpt_oss' || o.toolCallParser === 'harmony') {
    if (typeof choice === 'object' && choice !== null) return new NamedToolParser(choice.name, o.newId);
    return new HarmonyParser(o.newId);
  }
  let reasoning: OutputParser | null = null;
  if (o.reasoningParser !== null)
    reasoning = new ThinkParser(o.reasoningParser === 'deepseek_r1' || o.promptOpensThinking);
  let tools: OutputParser | null = null;
  if (callsWanted) {
    if (typeof choice === 'object') tools = new NamedToolParser(choice.name, o.newId);
    else if (choice === 'required') tools = new RequiredToolParser(o.newId);
    else if (o.toolCallParser !== null) tools = toolParser(o.toolCallParser, o.newId);
  }
  if (!reasoning && !tools) return null;
  return new Chain(reasoning, tools);
}

function toolParser(name: Exclude<ToolCallParserName, 'harmony'>, newId: IdFactory): OutputParser {
  switch (name) {
    case 'hermes':
      return new HermesToolParser(newId);
    case 'llama3_json':
      return new Llama3JsonToolParser(newId);
    case 'mistral':
      return new MistralToolParser(newId);
    case 'deepseek_v3':
    case 'deepseek_v3_1':
      return new DeepSeekV3ToolParser(newId);
  }
}

export interface ParsedMessage {
  content: string | null;
  reasoning: string | null;
  toolCalls: ToolCall[];
}

/** A whole answer through a parser (unary responses): the same machine as streaming, run once. */
export function parseWhole(p: OutputParser, text: string): ParsedMessage {
  const all = append(p.push(text), p.finish());
  const toolCalls = mergeToolCalls(all.toolCalls);
  return {
    content: toolCalls.length > 0 && all.content.trim() === '' ? null : all.content,
    reasoning: all.reasoning.length > 0 ? all.reasoning : null,
    toolCalls,
  };
}
