/**
 * Tool-call parsers, one per model family's output format (names as Dynamo's
 * `--dyn-tool-call-parser` values), each a streaming state machine over the model's content text:
 *
 * - `hermes` (Qwen 2.5 / Qwen3, Hermes): `<tool_call>\n{"name": "f", "arguments": {…}}\n</tool_call>`, repeated.
 * - `llama3_json`: the whole answer is `{"name": "f", "parameters": {…}}` (optionally after
 *   `<|python_tag|>`), several separated by `;`. Only an answer that starts with one is parsed.
 * - `mistral`: `[TOOL_CALLS][{"name": "f", "arguments": {…}}, …]`, or the v11 form `[TOOL_CALLS]f[ARGS]{…}`.
 * - `deepseek_v3`: `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{…}\n```<｜tool▁call▁end｜>…<｜tool▁calls▁end｜>`;
 *   `deepseek_v3_1`: the same with `<｜tool▁call▁begin｜>f<｜tool▁sep｜>{…}<｜tool▁call▁end｜>` (each parser reads both).
 * - harmony (gpt-oss) is in harmony.ts: it carries reasoning and calls in one channel structure.
 *
 * Text that turns out not to be a call is released as content. A marker split across pieces is
 * held back until it is complete or ruled out.
 */
import { Calls, ContentGate, JsonCall, JsonCallArray, type IdFactory } from './calls.js';
import { findFirst, heldSuffix, scanValue, skipWs, INCOMPLETE } from './scan.js';
import { BufferedParser, empty, type OutputParser, type ParsedOutput } from './types.js';

abstract class ToolParserBase extends BufferedParser {
  protected readonly calls: Calls;
  protected readonly gate: ContentGate;

  constructor(newId: IdFactory) {
    super();
    this.calls = new Calls(newId);
    this.gate = new ContentGate(this.calls);
  }

  protected override flush(out: ParsedOutput): void {
    this.gate.finish(out);
  }

  /** Consume as much of `buf` as possible; at `end`, everything. */

  /** Content up to a start marker; false when none was found (the rest is released or held). */
  protected contentUntil(out: ParsedOutput, markers: readonly string[], end: boolean): string | null {
    const f = findFirst(this.buf, markers);
    if (f) {
      this.gate.emit(out, this.buf.slice(0, f[0]));
      this.buf = this.buf.slice(f[0] + f[1].length);
      return f[1];
    }
    const hold = end ? 0 : heldSuffix(this.buf, markers);
    this.gate.emit(out, this.buf.slice(0, this.buf.length - hold));
    this.buf = this.buf.slice(this.buf.length - hold);
    return null;
  }
}

export class HermesToolParser extends ToolParserBase {
  static readonly START = '<tool_call>';
  static readonly END = '</tool_call>';
  private state: 'content' | 'call' | 'after' | 'raw' = 'content';
  private call: JsonCall | null = null;
  private rawStart = '';

  protected step(out: ParsedOutput, end: boolean): void {
    const { START, END } = HermesToolParser;
    for (;;) {
      if (this.state === 'content') {
        if (this.contentUntil(out, [START], end) === null) return;
        this.state = 'call';
        this.call = new JsonCall(this.calls, ['arguments', 'parameters']);
        continue;
      }
      if (this.state === 'call') {
        const j = skipWs(this.buf, 0);
        if (j >= this.buf.length) {
          if (end) this.buf = '';
          return;
        }
        const r = this.buf[j] === '{' ? this.call!.update(out, this.buf.slice(j)) : null;
        if (r && r.status === 'open' && !end) return;
        if (r && r.status === 'done') {
          this.buf = this.buf.slice(j + r.end);
          this.state = 'after';
          continue;
        }
        // Not a call (or cut off before its name): the text is content.
        if (!this.call!.started) {
          this.rawStart = START;
          this.state = 'raw';
          continue;
        }
        this.buf = '';
        return;
      }
      if (this.state === 'after' || this.state === 'raw') {
        const i = this.buf.indexOf(END);
        if (i < 0) {
          if (end) {
            if (this.state === 'raw') this.gate.emit(out, this.rawStart + this.buf);
            this.buf = '';
          }
          return;
        }
        if (this.state === 'raw') this.gate.emit(out, this.rawStart + this.buf.slice(0, i + END.length));
        this.buf = this.buf.slice(i + END.length);
        this.state = 'content';
      }
    }
  }
}

export class Llama3JsonToolParser extends ToolParserBase {
  static readonly TAG = '<|python_tag|>';
  private state: 'start' | 'call' | 'between' | 'content' = 'start';
  private call: JsonCall | null = null;
  private skipped = '';

  protected step(out: ParsedOutput, end: boolean): void {
    const TAG = Llama3JsonToolParser.TAG;
    for (;;) {
      if (this.state === 'content') {
        this.gate.emit(out, this.buf.replace(/<\|eo[mt]_id\|>/g, ''));
        this.buf = '';
        return;
      }
      if (this.state === 'start' || this.state === 'between') {
        let j = skipWs(this.buf, 0);
        if (this.state === 'between' && this.buf[j] === ';') j = skipWs(this.buf, j + 1);
        const rest = this.buf.slice(j);
        if (rest.length === 0 || (!end && TAG.startsWith(rest))) {
          if (end && this.state === 'start') this.gate.emit(out, this.buf);
          if (end) this.buf = '';
          return;
        }
        const tagged = rest.startsWith(TAG);
        const body = tagged ? rest.slice(TAG.length) : rest;
        const k = skipWs(body, 0);
        if (k >= body.length && !end) return;
        if (body[k] !== '{') {
          this.state = 'content';
          continue;
        }
        this.skipped = this.buf.slice(0, this.buf.length - body.length + k);
        this.buf = body.slice(k);
        this.call = new JsonCall(this.calls, ['parameters', 'arguments']);
        this.state = 'call';
        continue;
      }
      // call
      const r = this.call!.update(out, this.buf);
      if (r.status === 'open' && !end) return;
      if (r.status === 'done') {
        this.buf = this.buf.slice(r.end);
        this.state = 'between';
        continue;
      }
      if (!this.call!.started) {
        // Not a call after all: the answer is plain text.
        this.buf = this.skipped + this.buf;
        this.state = 'content';
        continue;
      }
      this.buf = '';
      return;
    }
  }
}

export class MistralToolParser extends ToolParserBase {
  static readonly START = '[TOOL_CALLS]';
  static readonly ARGS = '[ARGS]';
  private state: 'content' | 'calls' | 'array' | 'name' | 'args' = 'content';
  private array: JsonCallArray | null = null;
  private index = -1;
  private sent = 0;

  protected step(out: ParsedOutput, end: boolean): void {
    const { START, ARGS } = MistralToolParser;
    for (;;) {
      switch (this.state) {
        case 'content':
          if (this.contentUntil(out, [START], end) === null) return;
          this.state = 'calls';
          continue;
        case 'calls': {
          const j = skipWs(this.buf, 0);
          if (j >= this.buf.length) {
            if (end) this.buf = '';
            return;
          }
          this.buf = this.buf.slice(j);
          if (this.buf[0] === '[') {
            this.array = new JsonCallArray(this.calls, ['arguments', 'parameters']);
            this.state = 'array';
          } else this.state = 'name';
          continue;
        }
        case 'array': {
          const r = this.array!.update(out, this.buf);
          if (r.status === 'open' && !end) return;
          if (r.status === 'done') {
            this.buf = this.buf.slice(r.end);
            this.state = 'content';
            continue;
          }
          if (this.calls.count === 0) this.gate.emit(out, START + this.buf);
          this.buf = '';
          this.state = 'content';
          return;
        }
        case 'name': {
          const i = this.buf.indexOf(ARGS);
          if (i < 0) {
            if (end) {
              this.gate.emit(out, START + this.buf);
              this.buf = '';
            }
            return;
          }
          this.index = this.calls.start(out, this.buf.slice(0, i).trim());
          this.buf = this.buf.slice(i + ARGS.length);
          this.sent = 0;
          this.state = 'args';
          continue;
        }
        case 'args': {
          const j = skipWs(this.buf, 0);
          const e = j < this.buf.length ? scanValue(this.buf, j) : INCOMPLETE;
          const upTo = e >= 0 ? e : this.buf.length;
          if (this.sent < j) this.sent = j;
          this.calls.args(out, this.index, this.buf.slice(this.sent, upTo));
          this.sent = upTo;
          if (e === INCOMPLETE && !end) return;
          this.buf = this.buf.slice(upTo);
          this.state = 'content';
          continue;
        }
      }
    }
  }
}

/** DeepSeek V3 and V3.1 markers (full-width bars, U+2581 between words). */
const DS = {
  callsBegin: '<｜tool▁calls▁begin｜>',
  callsEnd: '<｜tool▁calls▁end｜>',
  callBegin: '<｜tool▁call▁begin｜>',
  callEnd: '<｜tool▁call▁end｜>',
  sep: '<｜tool▁sep｜>',
} as const;

export class DeepSeekV3ToolParser extends ToolParserBase {
  private state: 'content' | 'calls' | 'head' | 'v3name' | 'v3args' | 'v31args' | 'tail' = 'content';
  private index = -1;
  private argsStarted = false;

  protected step(out: ParsedOutput, end: boolean): void {
    for (;;) {
      switch (this.state) {
        case 'content':
          if (this.contentUntil(out, [DS.callsBegin], end) === null) return;
          this.state = 'calls';
          continue;
        case 'calls': {
          const j = skipWs(this.buf, 0);
          const rest = this.buf.slice(j);
          if (rest.startsWith(DS.callBegin)) {
            this.buf = rest.slice(DS.callBegin.length);
            this.state = 'head';
            continue;
          }
          if (rest.startsWith(DS.callsEnd)) {
            this.buf = rest.slice(DS.callsEnd.length);
            this.state = 'content';
            continue;
          }
          if (!end && (DS.callBegin.startsWith(rest) || DS.callsEnd.startsWith(rest))) return;
          // Anything else inside the calls block: back to content.
          this.state = 'content';
          continue;
        }
        case 'head': {
          const i = this.buf.indexOf(DS.sep);
          if (i < 0) {
            if (end) this.buf = '';
            return;
          }
          const pre = this.buf.slice(0, i).trim();
          this.buf = this.buf.slice(i + DS.sep.length);
          if (pre === 'function') this.state = 'v3name';
          else {
            this.index = this.calls.start(out, pre);
            this.argsStarted = false;
            this.state = 'v31args';
          }
          continue;
        }
        case 'v3name': {
          const j = skipWs(this.buf, 0);
          if (j >= this.buf.length && !end) return;
          if (this.buf[j] === '{' || this.buf[j] === '[') {
            // V3.1 with a function named "function".
            this.index = this.calls.start(out, 'function');
            this.argsStarted = false;
            this.state = 'v31args';
            continue;
          }
          const f = this.buf.indexOf('```json');
          if (f < 0) {
            if (end) {
              this.buf = '';
              return;
            }
            return;
          }
          const nl = this.buf.indexOf('\n', f + 7);
          if (nl < 0 && !end) return;
          this.index = this.calls.start(out, this.buf.slice(0, f).trim());
          this.buf = nl < 0 ? '' : this.buf.slice(nl + 1);
          this.state = 'v3args';
          continue;
        }
        case 'v3args':
        case 'v31args': {
          const stop = this.state === 'v3args' ? ['\n```', '```'] : [DS.callEnd];
          const f = findFirst(this.buf, stop);
          const upTo = f ? f[0] : end ? this.buf.length : this.buf.length - heldSuffix(this.buf, stop);
          let piece = this.buf.slice(0, upTo);
          if (!this.argsStarted) piece = piece.replace(/^\s+/, '');
          if (piece.length > 0) this.argsStarted = true;
          this.calls.args(out, this.index, f ? piece.replace(/\s+$/, '') : piece);
          this.buf = this.buf.slice(f ? f[0] + f[1].length : upTo);
          if (!f) return;
          this.state = this.state === 'v3args' ? 'tail' : 'calls';
          continue;
        }
        case 'tail': {
          const i = this.buf.indexOf(DS.callEnd);
          if (i < 0) {
            if (end) this.buf = '';
            return;
          }
          this.buf = this.buf.slice(i + DS.callEnd.length);
          this.state = 'calls';
          continue;
        }
      }
    }
  }
}

/** `tool_choice: {"type": "function", "function": {"name": f}}`: the engine is guided to emit f's arguments as JSON; the whole answer is them. */
export class NamedToolParser implements OutputParser {
  private index = -1;
  private readonly calls: Calls;
  private lead = true;

  constructor(
    private readonly name: string,
    newId: IdFactory,
  ) {
    this.calls = new Calls(newId);
  }

  push(text: string): ParsedOutput {
    const out = empty();
    if (this.index < 0) this.index = this.calls.start(out, this.name);
    if (this.lead) {
      text = text.replace(/^\s+/, '');
      if (text.length > 0) this.lead = false;
    }
    this.calls.args(out, this.index, text);
    return out;
  }

  finish(): ParsedOutput {
    const out = empty();
    if (this.index < 0) {
      this.index = this.calls.start(out, this.name);
      this.calls.args(out, this.index, '{}');
    }
    return out;
  }
}

/** `tool_choice: "required"`: the engine is guided to emit `[{"name": f, "parameters": {…}}, …]`. */
export class RequiredToolParser extends ToolParserBase {
  private array: JsonCallArray | null = null;
  private done = false;

  protected step(out: ParsedOutput, end: boolean): void {
    if (this.done) {
      if (end) this.buf = '';
      return;
    }
    if (!this.array) {
      const j = skipWs(this.buf, 0);
      if (j >= this.buf.length) return;
      if (this.buf[j] !== '[') {
        this.done = true;
        this.gate.emit(out, this.buf);
        this.buf = '';
        return;
      }
      this.buf = this.buf.slice(j);
      this.array = new JsonCallArray(this.calls, ['parameters', 'arguments']);
    }
    const r = this.array.update(out, this.buf);
    if (r.status === 'open' && !end) return;
    if (r.status === 'invalid' && this.calls.count === 0) this.gate.emit(out, this.buf);
    this.done = true;
    this.buf = '';
  }
}
