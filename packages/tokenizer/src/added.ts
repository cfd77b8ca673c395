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

/**
 * Sink of a split of a text given as consecutive strings (`splitPieces`): `text(s, start, end)` is
 * ordinary text `s[start, end)` (never empty) that continues the current text piece, which may run
 * over several strings; `token(id)` is an added token and ends the current text piece. The text
 * pieces and tokens are those of the split of the strings' concatenation.
 */
export interface PiecesSink {
  text(s: string, start: number, end: number): void;
  token(id: number): void;
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

  /**
   * Longest token starting at `pieces[p][at]` and running on into the following strings: its id,
   * or -1. `out` receives the string index and the offset in it where the token ends.
   */
  private longestAcross(pieces: readonly string[], p: number, at: number, out: Int32Array): number {
    let n: Node | undefined = this.root;
    let best = -1;
    let s = pieces[p]!;
    for (let i = at; n.next !== null; i++) {
      while (i >= s.length) {
        if (++p >= pieces.length) return best;
        s = pieces[p]!;
        i = 0;
      }
      n = n.next.get(s.charCodeAt(i));
      if (n === undefined) break;
      if (n.id >= 0) {
        best = n.id;
        out[0] = p;
        out[1] = i + 1;
      }
    }
    return best;
  }

  private readonly posBox = new Int32Array(2);

  /**
   * `split` of the concatenation of `pieces` without concatenating them: the same text pieces
   * (delivered as runs of `pieces`' characters) and tokens; a token may start in one string and end
   * in a later one. Only for matchers without lstrip / rstrip / single_word rules (`rules` false):
   * those look at characters around a match, and callers join the strings instead.
   */
  splitPieces(pieces: readonly string[], sink: PiecesSink): void {
    if (this.hasRules) throw new Error('splitPieces: tokens with lstrip / rstrip / single_word rules');
    const n = pieces.length;
    if (this.size === 0) {
      for (const s of pieces) if (s.length > 0) sink.text(s, 0, s.length);
      return;
    }
    const box = this.posBox;
    // The text since the last token starts at pieces[lastP][lastO].
    let lastP = 0;
    let lastO = 0;
    let p = 0;
    let from = 0;
    while (p < n) {
      const s = pieces[p]!;
      let at = from < s.length ? this.nextCandidate(s, from, s.length) : -1;
      let id = -1;
      while (at >= 0) {
        id = this.longestAcross(pieces, p, at, box);
        if (id >= 0) break;
        at = this.nextCandidate(s, at + 1, s.length);
      }
      if (at < 0) {
        p++;
        from = 0;
        continue;
      }
      // The text from (lastP, lastO) up to (p, at), then the token.
      for (let q = lastP; q <= p; q++) {
        const t = pieces[q]!;
        const a = q === lastP ? lastO : 0;
        const b = q === p ? at : t.length;
        if (b > a) sink.text(t, a, b);
      }
      sink.token(id);
      p = lastP = box[0]!;
      from = lastO = box[1]!;
    }
    for (let q = lastP; q < n; q++) {
      const t = pieces[q]!;
      const a = q === lastP ? lastO : 0;
      if (t.length > a) sink.text(t, a, t.length);
    }
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
