/**
 * The shapes every output parser produces: what one piece of model text becomes in OpenAI's terms.
 * Pure module (no I/O, no clock, no randomness): ids come from an injected factory.
 */

/** One `choices[i].delta.tool_calls[k]` entry: id, type and name on a call's first delta only. */
export interface ToolCallDelta {
  index: number;
  id?: string;
  type?: 'function';
  function: { name?: string; arguments: string };
}

/** What one `push` (or `finish`) releases. */
export interface ParsedOutput {
  content: string;
  reasoning: string;
  toolCalls: ToolCallDelta[];
}

export interface OutputParser {
  /** Text of the next tokens; returns what can be released without seeing more. */
  push(text: string): ParsedOutput;
  /** The generation ended: releases everything held back. */
  finish(): ParsedOutput;
}

/** One complete call, as in a unary `message.tool_calls[k]`. */
export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export const empty = (): ParsedOutput => ({ content: '', reasoning: '', toolCalls: [] });

/**
 * A parser that buffers the text it is given and releases what it can on each step: `step(out, end)`
 * consumes `buf` as far as it safely can (everything when `end`); `flush` runs once after the last step.
 */
export abstract class BufferedParser implements OutputParser {
  protected buf = '';

  push(text: string): ParsedOutput {
    const out = empty();
    this.buf += text;
    this.step(out, false);
    return out;
  }

  finish(): ParsedOutput {
    const out = empty();
    this.step(out, true);
    this.flush(out);
    return out;
  }

  protected abstract step(out: ParsedOutput, end: boolean): void;

  protected flush(_out: ParsedOutput): void {}
}

/** `a` += `b` (mutates and returns `a`). */
export function append(a: ParsedOutput, b: ParsedOutput): ParsedOutput {
  a.content += b.content;
  a.reasoning += b.reasoning;
  for (const t of b.toolCalls) a.toolCalls.push(t);
  return a;
}

/** Deltas of one stream merged into complete calls (ids and names from the first delta of each index). */
export function mergeToolCalls(deltas: readonly ToolCallDelta[]): ToolCall[] {
  const out: ToolCall[] = [];
  for (const d of deltas) {
    let c = out[d.index];
    if (!c) out[d.index] = c = { id: '', type: 'function', function: { name: '', arguments: '' } };
    if (d.id !== undefined) c.id = d.id;
    if (d.function.name !== undefined) c.function.name = d.function.name;
    c.function.arguments += d.function.arguments;
  }
  return out.filter((c) => c !== undefined);
}
