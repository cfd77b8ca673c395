/**
 * Added tokens (special or not) are cut out of the text before normalization and BPE, as Hugging
 * Face `AddedVocabulary::extract_and_normalize` does: leftmost-longest matching (aho-corasick
 * `LeftmostLongest`), with the `single_word`, `lstrip` and `rstrip` rules applied per match.
 * Tokens with `normalized: false` are matched in the raw text first; tokens with `normalized: true`
 * are matched afterwards inside each remaining (normalized) piece.
 */

import { isWhitespace } from './scan.js';

export interface AddedToken {
  id: number;
  content: string;
  special: boolean;
  singleWord: boolean;
  lstrip: boolean;
  rstrip: boolean;
  normalized: boolean;
}

interface Node {
  next: Map<number, Node> | null;
  /** Token id ending here, or -1. */
  id: number;
}

/**
 * Sink of one split: `text(start, end)` for a piece of ordinary text and `token(id, start, end)`
 * for an added token, in order.
 */
export interface SplitSink {
  text(start: number, end: number): void;
  token(id: number, start: number, end: number): void;
}

export class AddedMatcher {
  private readonly root: Node = { next: null, id: -1 };
  private readonly byId = new Map<number, AddedToken>();
  /** Every token starts with this character (indexOf jumps), or ''. */
  private readonly lead: string;
  private readonly firsts: Uint8Array;
  private readonly hasRules: boolean;
  readonly size: number;

  constructor(tokens: readonly AddedToken[]) {
    let lead = -2;
    this.firsts = new Uint8Array(65536);
    let hasRules = false;
    let size = 0;
    for (const t of tokens) {
      if (t.content.length === 0) continue;
      size++;
      this.byId.set(t.id, t);
      if (t.singleWord || t.lstrip || t.rstrip) hasRules = true;
      let n = this.root;
      for (let i = 0; i < t.content.length; i++) {
        const c = t.content.charCodeAt(i);
        n.next ??= new Map();
        let m = n.next.get(c);
        if (!m) n.next.set(c, (m = { next: null, id: -1 }));
        n = m;
      }
      // The first of two tokens with the same content wins (a later duplicate is unreachable).
      if (n.id < 0) n.id = t.id;
      const f = t.content.charCodeAt(0);
      this.firsts[f] = 1;
      lead = lead === -2 || lead === f ? f : -1;
    }
    this.lead = lead < 0 ? '' : String.fromCharCode(lead);
    this.hasRules = hasRules;
    this.size = size;
  }

  /** Whether any token has an lstrip / rstrip / single_word rule. */
  get rules(): boolean {
    return this.hasRules;
  }

  /** Longest token starting at `at`: its id and end, or -1. `out[0]` receives the end. */
  private longestAt(s: string, at: number, end: number, out: Int32Array): number {
    let n: Node | undefined = this.root;
    let best = -1;
    for (let i = at; i < end && n.next !== null; i++) {
      n = n.next.get(s.charCodeAt(i));
      if (n === undefined) break;
      if (n.id >= 0) {
        best = n.id;
        out[0] = i + 1;
      }
    }
    return best;
  }

  private readonly endBox = new Int32Array(1);

  /** Next match start ≥ `from` whose first character could begin a token, or -1. */
  private nextCandidate(s: string, from: number, end: number): number {
    if (this.lead !== '') {
      const i = s.indexOf(this.lead, from);
      return i < 0 || i >= end ? -1 : i;
    }
    const f = this.firsts;
    for (let i = from; i < end; i++) if (f[s.charCodeAt(i)] === 1) return i;
    return -1;
  }

  /** Splits `s[start, end)`; `sink.text` pieces are never empty. */
  split(s: string, start: number, end: number, sink: SplitSink): void {
    if (this.size === 0) {
      if (end > start) sink.text(start, end);
      return;
    }
    let last = start;
    const box = this.endBox;
    for (let at = this.nextCandidate(s, start, end); at >= 0;) {
      const id = this.longestAt(s, at, end, box);
      if (id < 0) {
        at = this.nextCandidate(s, at + 1, end);
        continue;
      }
      let mStart = at;
      let mEnd = box[0]!;
      if (this.hasRules) {
        const t = this.byId.get(id)!;
        if (t.singleWord) {
          const startOk = at === start || !isWordChar(s, at - 1, true);
          const endOk = mEnd === end || !isWordChar(s, mEnd, false);
          if (!startOk || !endOk) {
            at = this.nextCandidate(s, at + 1, end);
            continue;
          }
        }
        if (t.lstrip) {
          let i = mStart;
          while (i > last && isWhitespace(s.charCodeAt(i - 1))) i--;
          mStart = i;
        }
        if (t.rstrip) while (mEnd < end && isWhitespace(s.charCodeAt(mEnd))) mEnd++;
      }
      if (mStart > last) sink.text(last, mStart);
      sink.token(id, mStart, mEnd);
      last = mEnd;
      at = this.nextCandidate(s, mEnd, end);
    }
    if (end > last) sink.text(last, end);
  }
}

const WORD = /^[\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}]$/u;

/** Hugging Face's `is_word_character`-style test on the character ending before / starting at `i`. */
function isWordChar(s: string, i: number, before: boolean): boolean {
  let c = s.charCodeAt(i);
  let ch = s[i]!;
  if (before && c >= 0xdc00 && c < 0xe000 && i > 0) ch = s.slice(i - 1, i + 1);
  else if (!before && c >= 0xd800 && c < 0xdc00) ch = s.slice(i, i + 2);
  c = ch.codePointAt(0)!;
  return c === 95 || WORD.test(ch);
}
