/**
 * `<think>…</think>` reasoning (DeepSeek-R1, Qwen3, the `basic` parser): the text inside is
 * `reasoning_content`, the rest is content. Whether the answer starts inside the block is decided
 * by the caller: DeepSeek-R1's template opens `<think>` in the generation prompt (so does Qwen3's
 * with `enable_thinking` in its thinking-only variants); the frontend passes whether the rendered
 * prompt ends inside an open block. A `<think>` the model writes itself at the very start is
 * accepted either way. Content right after `</think>` loses its leading whitespace.
 */
import { heldSuffix, skipWs } from './scan.js';
import { BufferedParser, type ParsedOutput } from './types.js';

const THINK_START = '<think>';
const THINK_END = '</think>';

export class ThinkParser extends BufferedParser {
  private state: 'start' | 'reasoning' | 'after' | 'content';
  private startInside: boolean;

  constructor(startsInReasoning: boolean) {
    super();
    this.startInside = startsInReasoning;
    this.state = 'start';
  }

  protected step(out: ParsedOutput, end: boolean): void {
    for (;;) {
      if (this.state === 'start') {
        const j = skipWs(this.buf, 0);
        const rest = this.buf.slice(j);
        if (!end && (rest.length === 0 || (THINK_START.startsWith(rest) && rest !== THINK_START))) return;
        if (rest.startsWith(THINK_START)) {
          this.buf = rest.slice(THINK_START.length);
          this.state = 'reasoning';
        } else this.state = this.startInside ? 'reasoning' : 'content';
        continue;
      }
      if (this.state === 'reasoning') {
        const i = this.buf.indexOf(THINK_END);
        if (i < 0) {
          const hold = end ? 0 : heldSuffix(this.buf, [THINK_END]);
          out.reasoning += this.buf.slice(0, this.buf.length - hold);
          this.buf = this.buf.slice(this.buf.length - hold);
          return;
        }
        out.reasoning += this.buf.slice(0, i);
        this.buf = this.buf.slice(i + THINK_END.length);
        this.state = 'after';
        continue;
      }
      if (this.state === 'after') {
        const j = skipWs(this.buf, 0);
        this.buf = this.buf.slice(j);
        if (this.buf.length === 0) return;
        this.state = 'content';
        continue;
      }
      out.content += this.buf;
      this.buf = '';
      return;
    }
  }
}

/** Whether a rendered prompt leaves a `<think>` block open (the answer starts inside it). */
export function promptOpensThinking(prompt: string): boolean {
  const open = prompt.lastIndexOf(THINK_START);
  return open >= 0 && open > prompt.lastIndexOf(THINK_END);
}
