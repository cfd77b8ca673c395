/**
 * Incremental detokenization: text deltas for a growing list of ids (vLLM's
 * `detokenize_incrementally` scheme). The text of the new ids is the decode of a small window
 * (`prefix`..end) minus the decode of its already-emitted head (`prefix`..`read`): decoding a
 * window, not single ids, keeps what depends on neighbours right (SentencePiece's leading space,
 * byte-level merges across a character).
 *
 * Invariants (tests: detok.test.ts, per tokenizer kind):
 * - a character is never split: a token can end in the middle of a multi-byte UTF-8 character,
 *   which decoders render as a trailing U+FFFD, a lone surrogate or nothing; such a tail is held
 *   back until later ids complete it, and only the text before it is released. So the deltas
 *   concatenate to the full decode.
 * - the tokenizer is never asked to decode an empty list (@huggingface/tokenizers throws on it).
 * - ids that never form a valid character (random ids from a simulated engine) are released as
 *   U+FFFD once `MAX_HOLD` ids are pending, so the window stays small.
 */

import type { TextTokenizer } from './types.js';

/**
 * Pending ids after which an unfinished tail is given up as invalid bytes. The stable text before
 * a tail is released at every push, so this only bounds the window (decode cost) for id streams
 * that keep ending inside a character; real text ends a character every few ids.
 */
const MAX_HOLD = 64;
const REPLACEMENT = 0xfffd;

/**
 * `s` without what may still change when more ids arrive: a trailing U+FFFD run (an incomplete
 * character as tokenizers.js renders it) or a trailing lone high surrogate (gpt-tokenizer renders
 * the first bytes of a 4-byte character as one; it renders shorter prefixes as nothing).
 */
function stableLength(s: string): number {
  let n = s.length;
  for (;;) {
    const c = n > 0 ? s.charCodeAt(n - 1) : 0;
    if (c === REPLACEMENT || (c >= 0xd800 && c <= 0xdbff)) n--;
    else return n;
  }
}

export class DecodeStream {
  private ids: number[] = [];
  /** Ids before `prefix` are emitted and no longer affect later text. */
  private prefix = 0;
  /** Ids before `read` are emitted in full. */
  private read = 0;
  /** decode(ids[prefix..read]); null = not computed yet. */
  private headText: string | null = '';
  /** Characters of decode(ids[prefix..]) beyond `headText` already emitted (the stable part of a held tail). */
  private partial = 0;
  text = '';

  constructor(private readonly tok: TextTokenizer) {}

  private decode(from: number, to: number): string {
    return to > from ? this.tok.decode(this.ids.slice(from, to)) : '';
  }

  push(newIds: ArrayLike<number>): string {
    for (let i = 0; i < newIds.length; i++) this.ids.push(newIds[i]!);
    if (this.ids.length === this.read) return '';
    const head = (this.headText ??= this.decode(this.prefix, this.read));
    const all = this.decode(this.prefix, this.ids.length);
    const done = head.length + this.partial;
    const stable = stableLength(all);
    if (stable < all.length && this.ids.length - this.read < MAX_HOLD) {
      // An unfinished character at the end: release only what precedes it.
      if (stable <= done) return '';
      const delta = all.slice(done, stable);
      this.partial += delta.length;
      this.text += delta;
      return delta;
    }
    const delta = all.length > done ? all.slice(done) : '';
    if (all.length < head.length + this.partial) {
      // The decoder rewrote earlier text (e.g. whitespace cleanup): nothing to add, keep the window.
      return '';
    }
    this.prefix = this.read;
    this.read = this.ids.length;
    this.headText = null;
    this.partial = 0;
    this.text += delta;
    return delta;
  }

  /** Whatever is held back (an incomplete character at the very end) is emitted as is. */
  flush(): string {
    if (this.read >= this.ids.length) return '';
    const head = (this.headText ??= this.decode(this.prefix, this.read));
    const all = this.decode(this.prefix, this.ids.length);
    const done = head.length + this.partial;
    this.prefix = this.read;
    this.read = this.ids.length;
    this.headText = null;
    this.partial = 0;
    const delta = all.length > done ? all.slice(done) : '';
    this.text += delta;
    return delta;
  }

  get tokenCount(): number {
    return this.ids.length;
  }
}
