/**
 * gpt-oss (OpenAI harmony) output: messages `<|channel|>{channel}[ to={recipient}][ <|constrain|>json]<|message|>{body}`
 * ended by `<|end|>` (more follow after `<|start|>assistant…`), `<|call|>` (a tool call) or
 * `<|return|>` (done). The generation prompt ends with `<|start|>assistant`, so the answer begins
 * with a header. Channels: `analysis` → reasoning; `final` → content; a recipient
 * `functions.{name}` (in the header, or before `<|channel|>`) → a tool call whose arguments are
 * the body; `commentary` without a recipient (a preamble) → content.
 *
 * Needs the special tokens in the decoded text (the frontend decodes with them for this parser).
 * Output with no harmony marker at all is released as content at the end.
 */
import { Calls, type IdFactory } from './calls.js';
import { findFirst, heldSuffix } from './scan.js';
import { BufferedParser, type ParsedOutput } from './types.js';

const MESSAGE = '<|message|>';
const ENDS = ['<|end|>', '<|call|>', '<|return|>'] as const;
const START = '<|start|>';

type Route = { kind: 'reasoning' } | { kind: 'content' } | { kind: 'call'; index: number };

export class HarmonyParser extends BufferedParser {
  private state: 'header' | 'body' = 'header';
  private route: Route = { kind: 'content' };
  private readonly calls: Calls;
  private sawMarker = false;
  private lead = true;

  constructor(newId: IdFactory) {
    super();
    this.calls = new Calls(newId);
  }

  private emit(out: ParsedOutput, s: string): void {
    if (s.length === 0) return;
    const r = this.route;
    if (r.kind === 'call') {
      if (this.lead) s = s.replace(/^\s+/, '');
      if (s.length > 0) this.lead = false;
      this.calls.args(out, r.index, s);
    } else if (r.kind === 'reasoning') out.reasoning += s;
    else out.content += s;
  }

  protected step(out: ParsedOutput, end: boolean): void {
    for (;;) {
      if (this.state === 'header') {
        const i = this.buf.indexOf(MESSAGE);
        if (i < 0) {
          if (end) {
            // No message marker: not harmony-shaped output (or cut in a header).
            if (!this.sawMarker) out.content += this.buf;
            this.buf = '';
          }
          return;
        }
        this.sawMarker = true;
        this.route = this.header(out, this.buf.slice(0, i));
        this.buf = this.buf.slice(i + MESSAGE.length);
        this.state = 'body';
        this.lead = true;
        continue;
      }
      const f = findFirst(this.buf, ENDS);
      if (!f) {
        const hold = end ? 0 : heldSuffix(this.buf, ENDS);
        this.emit(out, this.buf.slice(0, this.buf.length - hold));
        this.buf = this.buf.slice(this.buf.length - hold);
        return;
      }
      this.emit(out, this.buf.slice(0, f[0]));
      this.buf = this.buf.slice(f[0] + f[1].length);
      const s = this.buf.indexOf(START);
      // The next message's header starts after `<|start|>` (role, then `<|channel|>…`).
      if (s >= 0) this.buf = this.buf.slice(s + START.length);
      this.state = 'header';
    }
  }

  /** `assistant to=functions.f<|channel|>commentary <|constrain|>json` and the like. */
  private header(out: ParsedOutput, h: string): Route {
    this.sawMarker = true;
    const to = /to=([^\s<]+)/.exec(h)?.[1];
    const channel = /<\|channel\|>\s*([A-Za-z_]+)/.exec(h)?.[1] ?? '';
    if (to !== undefined && to.startsWith('functions.'))
      return { kind: 'call', index: this.calls.start(out, to.slice('functions.'.length)) };
    if (channel === 'analysis') return { kind: 'reasoning' };
    return { kind: 'content' };
  }
}
