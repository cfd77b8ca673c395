/**
 * The output side of `/v1/messages`: the chat deltas of the model's output parser (text, reasoning,
 * tool calls; openai/choices.ts) → Anthropic content blocks and stream events, the stop reason and
 * the usage. Unary responses are built from the same events as streams, so both agree.
 *
 * One block is open at a time; a delta of another kind closes it and opens the next
 * (`content_block_stop`, `content_block_start`). A thinking block closes with a `signature_delta`
 * (empty: kvrouter signs nothing). A tool call opens a `tool_use` block with `input: {}` and streams
 * its arguments as `input_json_delta`; the unary block carries the parsed arguments.
 */
import type { ChatDelta } from '../openai/choices.js';

export interface TextBlock {
  type: 'text';
  text: string;
}
export interface ThinkingBlock {
  type: 'thinking';
  thinking: string;
  signature: string;
}
export interface ToolUseBlock {
  type: 'tool_use';
  id: string;
  name: string;
  input: unknown;
}
export type ContentBlock = TextBlock | ThinkingBlock | ToolUseBlock;

/** One stream event: its `type` is also the SSE event name. */
export type StreamEvent = { type: string } & Record<string, unknown>;

export type StopReason = 'end_turn' | 'max_tokens' | 'stop_sequence' | 'tool_use';

/** Builds the content blocks of one answer and the events that stream them. */
export class BlockBuilder {
  /** Accumulated blocks (tool_use `input` holds the argument text until `finish`). */
  readonly content: ContentBlock[] = [];
  private open: 'text' | 'thinking' | { call: number } | null = null;
  private readonly args: string[] = [];
  private calls = 0;

  private get index(): number {
    return this.content.length - 1;
  }

  private close(out: StreamEvent[]): void {
    if (this.open === null) return;
    if (this.open === 'thinking')
      out.push({
        type: 'content_block_delta',
        index: this.index,
        delta: { type: 'signature_delta', signature: '' },
      });
    out.push({ type: 'content_block_stop', index: this.index });
    this.open = null;
  }

  private start(out: StreamEvent[], block: ContentBlock): void {
    this.close(out);
    this.content.push(block);
    // The start event carries the block empty; its content follows as deltas.
    const shown =
      block.type === 'text'
        ? { type: 'text', text: '' }
        : block.type === 'thinking'
          ? { type: 'thinking', thinking: '', signature: '' }
          : { type: 'tool_use', id: block.id, name: block.name, input: {} };
    out.push({ type: 'content_block_start', index: this.index, content_block: shown });
  }

  /** The events of one chat delta. */
  push(d: ChatDelta): StreamEvent[] {
    const out: StreamEvent[] = [];
    if (d.reasoning_content) {
      if (this.open !== 'thinking') {
        this.start(out, { type: 'thinking', thinking: '', signature: '' });
        this.open = 'thinking';
      }
      (this.content[this.index] as ThinkingBlock).thinking += d.reasoning_content;
      out.push({
        type: 'content_block_delta',
        index: this.index,
        delta: { type: 'thinking_delta', thinking: d.reasoning_content },
      });
    }
    if (d.content) {
      if (this.open !== 'text') {
        this.start(out, { type: 'text', text: '' });
        this.open = 'text';
      }
      (this.content[this.index] as TextBlock).text += d.content;
      out.push({
        type: 'content_block_delta',
        index: this.index,
        delta: { type: 'text_delta', text: d.content },
      });
    }
    for (const t of d.tool_calls ?? []) {
      const cur = this.open;
      if (typeof cur !== 'object' || cur === null || cur.call !== t.index) {
        // A call's first delta carries its id and name (parsers/types.ts).
        this.start(out, { type: 'tool_use', id: t.id ?? '', name: t.function.name ?? '', input: {} });
        this.open = { call: t.index };
        this.args[this.index] = '';
        this.calls++;
      }
      const piece = t.function.arguments;
      if (piece.length === 0) continue;
      this.args[this.index] += piece;
      out.push({
        type: 'content_block_delta',
        index: this.index,
        delta: { type: 'input_json_delta', partial_json: piece },
      });
    }
    return out;
  }

  /** Closes the open block; tool_use blocks get their parsed input (`{}` when not a JSON object). */
  finish(): StreamEvent[] {
    const out: StreamEvent[] = [];
    this.close(out);
    this.content.forEach((b, i) => {
      if (b.type !== 'tool_use') return;
      const text = this.args[i] ?? '';
      try {
        const v: unknown = text.trim() === '' ? {} : JSON.parse(text);
        b.input = typeof v === 'object' && v !== null && !Array.isArray(v) ? v : {};
      } catch {
        b.input = {};
      }
    });
    return out;
  }

  /** Whether the answer called a tool. */
  get calledTools(): boolean {
    return this.calls > 0;
  }
}

/**
 * Anthropic's stop reason: cut by `max_tokens` → `max_tokens`; a stop sequence → `stop_sequence`;
 * a tool call → `tool_use`; else (EOS, stop token) `end_turn`.
 */
export function stopReason(
  finish: string | null,
  stopSequence: string | undefined,
  calledTools: boolean,
): StopReason {
  if (finish === 'length') return 'max_tokens';
  if (stopSequence !== undefined) return 'stop_sequence';
  if (calledTools) return 'tool_use';
  return 'end_turn';
}

export interface AnthropicUsage {
  input_tokens: number;
  output_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
  /** The created tokens by TTL: all under the last breakpoint's (the engine's cache has none). */
  cache_creation: { ephemeral_5m_input_tokens: number; ephemeral_1h_input_tokens: number };
}

/**
 * Usage in Anthropic's terms, summing to the prompt length: `cache_read_input_tokens` = the prompt
 * tokens the engine reused (its reported prefix hit); `cache_creation_input_tokens` = the tokens of
 * the client's cached prefix (up to the last `cache_control` breakpoint) that were not read from
 * cache, i.e. computed now and kept; `input_tokens` = the rest (after the breakpoint, or everything
 * not reused when there is no breakpoint).
 */
export function usageOf(
  promptTokens: number,
  cachedTokens: number,
  prefixTokens: number,
  outputTokens: number,
  ttl: '5m' | '1h' | null = null,
): AnthropicUsage {
  const read = Math.min(Math.max(cachedTokens, 0), promptTokens);
  const creation = Math.max(0, Math.min(prefixTokens, promptTokens) - read);
  return {
    input_tokens: promptTokens - read - creation,
    output_tokens: outputTokens,
    cache_creation_input_tokens: creation,
    cache_read_input_tokens: read,
    cache_creation: {
      ephemeral_5m_input_tokens: ttl === '1h' ? 0 : creation,
      ephemeral_1h_input_tokens: ttl === '1h' ? creation : 0,
    },
  };
}

/** Length of the common prefix of two token sequences. */
export function commonPrefix(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}
