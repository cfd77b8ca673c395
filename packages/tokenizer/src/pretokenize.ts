/**
 * Pre-tokenization: the `Split` steps of a tokenizer.json `pre_tokenizer` (behavior `Isolated`),
 * applied in order, each inside the pieces of the one before, as Hugging Face does. Pieces are
 * reported as `[start, end)` offsets of the (normalized) segment; no substring is made for the
 * first step, and none at all on the hand-written scanner paths (scan.ts).
 */
import { compilePattern } from './regex.js';
import { SCANNERS, type Scanner } from './scan.js';

/** GPT-2's pattern, used by a `ByteLevel` pre-tokenizer with `use_regex: true`. */
export const GPT2_PATTERN =
  "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

export type PieceSink = (start: number, end: number) => void;

export interface PreTokenizer {
  /** Names the path taken (generic regex or a scanner), for logs and benchmarks. */
  readonly kind: string;
  run(s: string, emit: PieceSink): void;
}

/** The chain of regexes, generic path. */
export class RegexPreTokenizer implements PreTokenizer {
  readonly kind = 'regex';
  private readonly res: RegExp[];

  constructor(patterns: readonly string[]) {
    this.res = patterns.map((p) => compilePattern({ Regex: p }));
  }

  run(s: string, emit: PieceSink): void {
    this.step(0, s, 0, emit);
  }

  private step(k: number, s: string, offset: number, emit: PieceSink): void {
    if (k === this.res.length) {
      if (s.length > 0) emit(offset, offset + s.length);
      return;
    }
    const re = this.res[k]!;
    re.lastIndex = 0;
    let last = 0;
    const last1 = k + 1 === this.res.length;
    for (let m = re.exec(s); m !== null; m = re.exec(s)) {
      const at = m.index;
      const end = at + m[0].length;
      if (end === at) {
        re.lastIndex = at + 1;
        continue;
      }
      if (at > last) {
        if (last1) emit(offset + last, offset + at);
        else this.step(k + 1, s.slice(last, at), offset + last, emit);
      }
      if (last1) emit(offset + at, offset + end);
      else this.step(k + 1, m[0], offset + at, emit);
      last = end;
    }
    if (last < s.length) {
      if (last1) emit(offset + last, offset + s.length);
      else this.step(k + 1, s.slice(last), offset + last, emit);
    }
  }
}

/** A hand-written scanner for a known chain of patterns, or the generic regex path. */
export function preTokenizerFor(patterns: readonly string[], allowScanner = true): PreTokenizer {
  if (allowScanner) {
    const key = JSON.stringify(patterns);
    const make: (() => Scanner) | undefined = SCANNERS.get(key);
    if (make) return make();
  }
  return new RegexPreTokenizer(patterns);
}
