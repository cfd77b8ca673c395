/**
 * Incremental detokenization: text deltas for a growing list of ids. A token can end in the middle
 * of a multi-byte character, and decoders render such a prefix differently (U+FFFD at the end, in
 * the middle, or nothing); a delta containing U+FFFD is held back until later tokens complete the
 * character, so streamed deltas concatenate to the full decode. Genuinely invalid byte sequences
 * (random ids from a simulated engine) are released after `MAX_HOLD` tokens.
 */

const MAX_HOLD = 4;
import type { TextTokenizer } from './types.js';

export class DecodeStream {
  private ids: number[] = [];
  /** Ids before `prefix` are already emitted and no longer affect later text. */
  private prefix = 0;
  /** Ids before `read` are emitted. */
  private read = 0;
  text = '';

  constructor(private readonly tok: TextTokenizer) {}

  push(newIds: ArrayLike<number>): string {
    for (let i = 0; i < newIds.length; i++) this.ids.push(newIds[i]!);
    const window = this.ids.slice(this.prefix);
    const before = this.tok.decode(this.ids.slice(this.prefix, this.read));
    const all = this.tok.decode(window);
    const delta = all.length > before.length ? all.slice(before.length) : '';
    if (delta.length > 0 && (!delta.includes('\uFFFD') || this.ids.length - this.read >= MAX_HOLD)) {
      this.prefix = this.read;
      this.read = this.ids.length;
      this.text += delta;
      return delta;
    }
    return '';
  }

  /** Whatever is held back (an incomplete character at the very end) is emitted as is. */
  flush(): string {
    if (this.read >= this.ids.length) return '';
    const before = this.tok.decode(this.ids.slice(this.prefix, this.read));
    const all = this.tok.decode(this.ids.slice(this.prefix));
    this.read = this.ids.length;
    const delta = all.length > before.length ? all.slice(before.length) : '';
    this.text += delta;
    return delta;
  }

  get tokenCount(): number {
    return this.ids.length;
  }
}
