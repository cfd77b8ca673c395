/**
 * The tokenizer used without `--model-path`: a BPE vocabulary that ships inside an npm package
 * (gpt-tokenizer, cl100k_base), with ChatML special tokens. No download at run time.
 */
import * as cl100k from 'gpt-tokenizer/encoding/cl100k_base';
import { splitSpecials } from './split.js';
import type { TextTokenizer } from './types.js';

/** cl100k_base's special tokens (the ids its tiktoken definition assigns). */
const CL100K_SPECIALS: ReadonlyMap<string, number> = new Map([
  ['<|endoftext|>', 100257],
  ['<|fim_prefix|>', 100258],
  ['<|fim_middle|>', 100259],
  ['<|fim_suffix|>', 100260],
  ['<|im_start|>', 100264],
  ['<|im_end|>', 100265],
  ['<|im_sep|>', 100266],
  ['<|endofprompt|>', 100276],
]);

/**
 * gpt-tokenizer's `decode` runs one module-wide streaming TextDecoder and never flushes it: a call
 * ending inside a multi-byte character leaves its bytes pending and the next call (any request's)
 * starts with garbage. Decoding the token bytes here with a decoder per call makes every call
 * independent (an incomplete tail renders as U+FFFD, as tokenizers.js renders it).
 */
const core = (
  cl100k.default as unknown as {
    bytePairEncodingCoreProcessor: { tryDecodeToken(id: number): Uint8Array | string | undefined };
  }
).bytePairEncodingCoreProcessor;
const utf8In = new TextEncoder();

function decodeBytes(ids: readonly number[]): string {
  const parts: Uint8Array[] = [];
  let n = 0;
  for (const id of ids) {
    const t = core.tryDecodeToken(id);
    if (t === undefined) continue;
    const b = typeof t === 'string' ? utf8In.encode(t) : t;
    parts.push(b);
    n += b.length;
  }
  const all = new Uint8Array(n);
  let o = 0;
  for (const b of parts) {
    all.set(b, o);
    o += b.length;
  }
  return new TextDecoder('utf-8').decode(all);
}

/** Special-looking text inside ordinary chunks is text: the encoder already cut at real specials. */
const AS_TEXT = { disallowedSpecial: new Set<string>() };

export class TiktokenTokenizer implements TextTokenizer {
  readonly name = 'cl100k_base';
  readonly vocabSize = 100277;
  readonly specialTokens = CL100K_SPECIALS;
  readonly eosTokenIds = [100265, 100257];
  readonly bosTokenIds: readonly number[] = [];
  readonly chunkSafe = true;
  private readonly specialIds = new Set(CL100K_SPECIALS.values());

  encodeText(text: string): number[] {
    return text.length === 0 ? [] : cl100k.encode(text, AS_TEXT);
  }

  encode(text: string): number[] {
    const out: number[] = [];
    for (const piece of splitSpecials(text, this.specialTokens)) {
      if (typeof piece === 'number') out.push(piece);
      else for (const id of this.encodeText(piece)) out.push(id);
    }
    return out;
  }

  decode(ids: ArrayLike<number>): string {
    // Ids outside the BPE ranks (specials, the gap below them, foreign engines' ids) are dropped:
    // gpt-tokenizer would throw on them.
    const keep: number[] = [];
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      if (id < 100256 && !this.specialIds.has(id)) keep.push(id);
    }
    return decodeBytes(keep);
  }
}
