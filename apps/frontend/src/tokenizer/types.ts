import type { TokensPrefix } from '@kvrouter/router';
import type { PiecesSink } from '@kvrouter/tokenizer';

/**
 * The tokenizer seam. Implementations encode *plain text* (no special-token recognition): the
 * prompt encoder (encoder.ts) splits a rendered prompt at the special-token strings itself, so the
 * default and the fastokens paths share one segmentation and give identical ids by construction.
 */
export interface TextTokenizer {
  readonly name: string;
  /** Ids are below this (engines of embedded workers draw output tokens from it). */
  readonly vocabSize: number;
  /** Special token text → id (split points of a rendered prompt). */
  readonly specialTokens: ReadonlyMap<string, number>;
  /** Ids that end a generation unless `ignore_eos`. */
  readonly eosTokenIds: readonly number[];
  /** Prepended to completions prompts (HF `add_special_tokens`); empty for tiktoken-style vocabularies. */
  readonly bosTokenIds: readonly number[];
  /**
   * Whether a text's ids equal the concatenation of its pieces' ids when it is cut at special
   * tokens (true for byte-level BPE; false for normalizers that look across a cut). Chunk caching
   * (fastokens) is only used when true.
   */
  readonly chunkSafe: boolean;
  /**
   * The cut `encode` makes first (text pieces and added-token ids), for tokenizers whose cut is not
   * plain splitSpecials over `specialTokens` (the fast tokenizer matches `normalized` added tokens
   * in a second pass), of the text that `pieces` make when concatenated (a rendered prompt's
   * strings, not joined): text pieces come as runs of those strings' characters (`PiecesSink`).
   * When present, `encode` of a text piece gives that piece's ids.
   */
  cutPieces?(pieces: readonly string[], sink: PiecesSink): void;
  /** Plain text, no special-token recognition (a piece between two specials). */
  encodeText(text: string): number[] | Uint32Array;
  /** Whole text with special tokens recognised (Hugging Face `add_special_tokens=False` semantics). */
  encode(text: string): number[] | Uint32Array;
  /** Unknown ids decode to nothing; special tokens are skipped. */
  decode(ids: ArrayLike<number>): string;
}

/** Plain data that rebuilds the same tokenizer in a worker thread. */
export type TokenizerSpec =
  | { kind: 'tiktoken'; encoding: 'cl100k_base' | 'o200k_base' }
  | { kind: 'hf'; dir: string; engine?: 'fast' | 'hf' };

/** What one `PromptEncoder.encode` did (optional out-parameter). */
export interface EncodeStats {
  /** Characters tokenized by this call (not covered by a cached prefix). */
  tokenizedChars: number;
  offloaded: boolean;
  /** Ids taken from the prefix cache. */
  cachedTokens?: number;
  /**
   * The prefix-cache entries the ids extend and end in (fastokens, on the thread that asked: a
   * tokenizer thread's names are its own and are not passed on), for the router's hash chains.
   */
  prefix?: TokensPrefix;
}

/** Default of `--tokenizer-prefix-cache-tokens`: ids one prompt encoder's prefix cache holds (64 MB). */
export const DEFAULT_PREFIX_CACHE_TOKENS = 16 * 1024 * 1024;
