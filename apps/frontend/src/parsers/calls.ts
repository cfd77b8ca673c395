/**
 * Building blocks of the tool-call parsers: call numbering and ids, content that is only
 * whitespace around tool calls, and a JSON call object (`{"name": …, "arguments": {…}}`) streamed
 * as it grows: the first delta carries id, type and name once the name is complete, later deltas
 * carry the raw text of the arguments value as it arrives (so the deltas concatenate to it).
 */
import { INCOMPLETE, INVALID, scanObject, scanValue, skipWs } from './scan.js';
import type { ParsedOutput, ToolCallDelta } from './types.js';

export type IdFactory = () => string;

/** Numbers calls and issues the first delta of each. */
export class Calls {
  count = 0;
  onStart: (() => void) | null = null;
  constructor(private readonly newId: IdFactory) {}

  start(out: ParsedOutput, name: string): number {
    this.onStart?.();
    const index = this.count++;
    out.toolCalls.push({ index, id: this.newId(), type: 'function', function: { name, arguments: '' } });
    return index;
  }

  args(out: ParsedOutput, index: number, text: string): void {
    if (text.length === 0) return;
    const last: ToolCallDelta | undefined = out.toolCalls[out.toolCalls.length - 1];
    // Consecutive argument pieces of one call in one release merge into one delta.
    if (last && last.index === index && last.function.name === undefined) last.function.arguments += text;
    else out.toolCalls.push({ index, function: { arguments: text } });
  }
}

/**
 * Content next to tool calls: whitespace is held until text follows; whitespace right before a
 * call (a model writes `\n\n` before `<tool_call>`) or after the last one is dropped, so an answer
 * of only calls has no content.
 */
export class ContentGate {
  private pendingWs = '';
  private afterCall = false;
  constructor(private readonly calls: Calls) {
    calls.onStart = () => {
      this.pendingWs = '';
      this.afterCall = true;
    };
  }

  emit(out: ParsedOutput, s: string): void {
    if (s.length === 0) return;
    if (s.trim().length === 0) {
      this.pendingWs += s;
      return;
    }
    // Trailing whitespace is held too: it is dropped if a call comes next.
    const body = s.replace(/\s+$/, '');
    if (this.afterCall) {
      out.content += body.replace(/^\s+/, '');
      this.afterCall = false;
    } else out.content += this.pendingWs + body;
    this.pendingWs = s.slice(body.length);
  }

  /** End of output: held whitespace is content only if no call came. */
  finish(out: ParsedOutput): void {
    if (this.calls.count === 0) out.content += this.pendingWs;
    this.pendingWs = '';
  }
}

export type StreamStatus = 'open' | 'done' | 'invalid';

/** One JSON call object; `update` is given the whole object text seen so far (starting at `{`). */
export class JsonCall {
  index = -1;
  private sent = 0;
  private argsDone = false;

  constructor(
    private readonly calls: Calls,
    private readonly argKeys: readonly string[],
  ) {}

  get started(): boolean {
    return this.index >= 0;
  }

  /** Returns the status and, when done, the object's end offset in `s`. */
  update(out: ParsedOutput, s: string): { status: StreamStatus; end: number } {
    const o = scanObject(s, 0);
    if (o.end === INVALID) return { status: 'invalid', end: 0 };
    const nameField = o.fields.find((f) => f.key === 'name');
    if (!this.started && nameField && nameField.end >= 0) {
      let name: unknown;
      try {
        name = JSON.parse(s.slice(nameField.start, nameField.end));
      } catch {
        return { status: 'invalid', end: 0 };
      }
      if (typeof name !== 'string') return { status: 'invalid', end: 0 };
      this.index = this.calls.start(out, name);
    }
    const args = o.fields.find((f) => this.argKeys.includes(f.key));
    if (this.started && args && !this.argsDone) {
      if (s[args.start] === '"') {
        // Arguments given as a JSON-encoded string: released whole, decoded.
        if (args.end >= 0) {
          let text: unknown;
          try {
            text = JSON.parse(s.slice(args.start, args.end));
          } catch {
            return { status: 'invalid', end: 0 };
          }
          this.calls.args(out, this.index, typeof text === 'string' ? text : JSON.stringify(text));
          this.argsDone = true;
        }
      } else {
        const upTo = args.end >= 0 ? args.end : s.length;
        this.calls.args(out, this.index, s.slice(args.start + this.sent, upTo));
        this.sent = upTo - args.start;
        if (args.end >= 0) this.argsDone = true;
      }
    }
    if (o.end === INCOMPLETE) return { status: 'open', end: 0 };
    if (!this.started) return { status: 'invalid', end: 0 };
    if (!args) this.calls.args(out, this.index, '{}');
    return { status: 'done', end: o.end };
  }
}

/**
 * A JSON array of call objects (`[{…}, {…}]`, Mistral's `[TOOL_CALLS]` and the `required`
 * tool-choice output), given the whole array text seen so far (starting at `[`).
 */
export class JsonCallArray {
  private pos = 1;
  private cur: JsonCall | null = null;

  constructor(
    private readonly calls: Calls,
    private readonly argKeys: readonly string[],
  ) {}

  update(out: ParsedOutput, s: string): { status: StreamStatus; end: number } {
    for (;;) {
      if (this.cur) {
        const r = this.cur.update(out, s.slice(this.pos));
        if (r.status !== 'done') return r;
        this.pos += r.end;
        this.cur = null;
      }
      const j = skipWs(s, this.pos);
      if (j >= s.length) return { status: 'open', end: 0 };
      const c = s[j];
      if (c === ']') return { status: 'done', end: j + 1 };
      if (c === ',') {
        this.pos = j + 1;
        continue;
      }
      if (c !== '{') {
        // Not a call object: the array is not tool calls.
        const e = scanValue(s, j);
        return { status: e === INCOMPLETE ? 'open' : 'invalid', end: 0 };
      }
      this.pos = j;
      this.cur = new JsonCall(this.calls, this.argKeys);
    }
  }
}
