/**
 * `--model-path` with the exact fast tokenizer (@kvrouter/tokenizer): byte-level BPE tokenizer.json
 * files (Qwen2/3, Llama 3, DeepSeek V3, gpt-oss, ...) compiled once into typed arrays. Its ids equal
 * Hugging Face `tokenizers`' (parity fixtures and property tests in packages/tokenizer); a file it
 * does not support is reported by `tryFastTokenizer` and the caller falls back to `HfTokenizer`.
 */
import {
  compileTokenizer,
  UnsupportedTokenizer,
  type FastTokenizer,
  type PiecesSink,
} from '@kvrouter/tokenizer';
import { cardTokenIds, type HfModelFiles } from './hf.js';
import type { TextTokenizer } from './types.js';

export class FastHfTokenizer implements TextTokenizer {
  readonly name: string;
  readonly vocabSize: number;
  readonly specialTokens: ReadonlyMap<string, number>;
  readonly eosTokenIds: readonly number[];
  readonly bosTokenIds: readonly number[];
  readonly chunkSafe: boolean;
  readonly bosToken: string | null;
  readonly eosToken: string | null;
  readonly fast: FastTokenizer;
  /** Every added token id (decode drops them, as HfTokenizer does). */
  private readonly addedIds: Uint8Array;

  constructor(fast: FastTokenizer, files: HfModelFiles, name: string) {
    this.name = name;
    this.fast = fast;
    this.vocabSize = fast.vocabSize;
    const specials = new Map<string, number>();
    this.addedIds = new Uint8Array(fast.vocabSize);
    for (const t of fast.addedTokens) {
      specials.set(t.content, t.id);
      this.addedIds[t.id] = 1;
    }
    this.specialTokens = specials;
    const card = cardTokenIds(files, specials, (t) => fast.tokenToId(t));
    this.bosToken = card.bosToken;
    this.eosToken = card.eosToken;
    this.bosTokenIds = card.bosTokenIds;
    this.eosTokenIds = card.eosTokenIds;
    // Pieces between added tokens are tokenized independently (normalization included), except
    // that a `single_word` token's match depends on the character before it.
    this.chunkSafe = !fast.addedTokens.some((t) => t.singleWord);
  }

  cutPieces(pieces: readonly string[], sink: PiecesSink): void {
    this.fast.splitAddedPieces(pieces, sink);
  }

  encodeText(text: string): Uint32Array {
    return this.fast.encodeOrdinary(text);
  }

  encode(text: string): Uint32Array {
    return this.fast.encode(text);
  }

  decode(ids: ArrayLike<number>): string {
    const keep: number[] = [];
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      if (id < this.vocabSize && this.addedIds[id] === 0) keep.push(id);
    }
    return this.fast.decode(keep, true);
  }
}

/** The fast tokenizer for these files, or the reason it cannot take them. */
export function tryFastTokenizer(
  files: HfModelFiles,
  name: string,
): { tokenizer: FastHfTokenizer } | { unsupported: string } {
  try {
    return { tokenizer: new FastHfTokenizer(compileTokenizer(files.tokenizerJson), files, name) };
  } catch (e) {
    if (e instanceof UnsupportedTokenizer) return { unsupported: e.reason };
    throw e;
  }
}
