/**
 * Refusing prompts that cannot fit the model's context before tokenizing them (issue 17): a 50 MB
 * prompt would otherwise hold a tokenizer thread for minutes while everyone else waits.
 *
 * The bound: every token covers at most `maxTokenChars` UTF-16 units of the text (the longest
 * decoded vocabulary entry or special token), so a text of n units has at least
 * ceil(n / maxTokenChars) tokens. When that is already at or over the context length, the prompt
 * is refused with the same 400 the exact check gives, without tokenizing. The exact check after
 * tokenizing stays. The bound assumes the tokenizer keeps the text (byte-level BPE, SentencePiece,
 * tiktoken); a normalizer that deletes characters could make it refuse a prompt whose real token
 * count fits, so it uses `SAFETY` times the longest entry.
 */
import { badRequest } from './errors.js';
import type { TextTokenizer } from './tokenizer/types.js';

/** Headroom over the longest vocabulary entry. */
const SAFETY = 2;

const longest = new WeakMap<TextTokenizer, number>();

/** The most UTF-16 units one token of `tok` can stand for (computed once per tokenizer). */
export function maxTokenChars(tok: TextTokenizer): number {
  let m = longest.get(tok);
  if (m !== undefined) return m;
  m = 1;
  for (const s of tok.specialTokens.keys()) m = Math.max(m, s.length);
  const one = [0];
  for (let id = 0; id < tok.vocabSize; id++) {
    one[0] = id;
    let s: string;
    try {
      s = tok.decode(one);
    } catch {
      continue; // an id the tokenizer does not use
    }
    if (s.length > m) m = s.length;
  }
  longest.set(tok, m);
  return m;
}

/** The fewest tokens `text` can encode to (a lower bound; 0 when cheap to skip). */
export function minTokens(
  text: { readonly length: number },
  tok: TextTokenizer,
  contextLength: number,
): number {
  // The bound never exceeds the text's length: only a text longer than the context can be
  // refused, so shorter ones never pay for `maxTokenChars`.
  if (text.length < contextLength) return 0;
  return Math.ceil(text.length / (SAFETY * maxTokenChars(tok)));
}

/** Throws the context-length 400 (naming `field`) when `text` cannot fit `contextLength` tokens. */
export function refuseIfCannotFit(
  /** The text, or its length (a prompt rendered as pieces). */
  text: { readonly length: number },
  tok: TextTokenizer,
  contextLength: number,
  field: string,
): void {
  const least = minTokens(text, tok, contextLength);
  if (least >= contextLength)
    throw badRequest(
      field,
      `This model's maximum context length is ${contextLength} tokens. However, your prompt has at least ${least} tokens (${text.length} characters), refused before tokenization.`,
    );
}
