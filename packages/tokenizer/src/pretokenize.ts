/**
 * Pre-tokenization: the `Split` steps of a tokenizer.json `pre_tokenizer` (behavior `Isolated`),
 * applied in order, each inside the pieces of the one before, as Hugging Face does. Pieces are
 * reported as `[start, end)` offsets of the (normalized) segment; no substring is made for the
 * first step, and none at all on the hand-written scanner paths (scan.ts).
 */
import type { PieceSink, PreTokenizer } from './piece.js';
import { compilePattern } from './regex.js';
import { SCANNERS, type Scanner } from './scan.js';

/** GPT-2's pattern, used by a `ByteLevel` pre-tokenizer with `use_regex: true`. */
export const GPT2_PATTERN =
  "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

export type { PreTokenizer };

/**
 * The chain of regexes, generic path. Each pattern is run sticky (`y`) with `test()`, which
 * reports the match end in `lastIndex` without allocating a match array; where the sticky match
 * fails (text between matches) a global copy finds the next match.
 */
export class RegexPreTokenizer implements PreTokenizer {
  readonly kind = 'regex';
  private readonly sticky: RegExp[];
  private readonly global: RegExp[];

  constructor(patterns: readonly string[]) {
    this.global = patterns.map((p) => compilePattern({ Regex: p }));
    this.sticky = this.global.map((r) => new RegExp(r.source, 'yu'));
  }

  run(s: string, emit: PieceSink): void {
    this.step(0, s, 0, emit);
  }

  private step(k: number, s: string, offset: number, emit: PieceSink): void {
    if (k === this.sticky.length) {
      if (s.length > 0) emit(offset, offset + s.length);
      return;
    }
    const y = this.sticky[k]!;
    const last1 = k + 1 === this.sticky.length;
    const len = s.length;
    let pos = 0;
    while (pos < len) {
      y.lastIndex = pos;
      let at: number;
      let end: number;
      if (y.test(s) && y.lastIndex > pos) {
        at = pos;
        end = y.lastIndex;
      } else {
        // No (non-empty) match here: the next one further on, if any.
        const g = this.global[k]!;
        g.lastIndex = pos;
        let m = g.exec(s);
        while (m !== null && m[0].length === 0) {
          g.lastIndex = m.index + 1;
          m = g.exec(s);
        }
        if (m === null) break;
        at = m.index;
        end = at + m[0].length;
        if (last1) emit(offset + pos, offset + at);
        else this.step(k + 1, s.slice(pos, at), offset + pos, emit);
      }
      if (last1) emit(offset + at, offset + end);
      else this.step(k + 1, s.slice(at, end), offset + at, emit);
      pos = end;
    }
    if (pos < len) {
      if (last1) emit(offset + pos, offset + len);
      else this.step(k + 1, pos === 0 ? s : s.slice(pos), offset + pos, emit);
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
