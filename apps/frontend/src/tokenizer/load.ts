/** Builds a tokenizer (and its chat template) from a spec; shared by the main thread and the pool's workers. */
import path from 'node:path';
import { ChatMlTemplate, JinjaChatTemplate, specialTokensMap, type ChatTemplate } from './template.js';
import { tryFastTokenizer } from './fast.js';
import { HfTokenizer, readHfModel } from './hf.js';
import { TiktokenTokenizer } from './tiktoken.js';
import type { TextTokenizer, TokenizerSpec } from './types.js';

export interface LoadedTokenizer {
  spec: TokenizerSpec;
  tokenizer: TextTokenizer;
  template: ChatTemplate;
  /** Which implementation encodes: the exact fast tokenizer, @huggingface/tokenizers, or cl100k. */
  engine: 'fast' | 'hf' | 'tiktoken';
}

/** Where the one fallback line goes (stderr by default; worker threads pass a no-op). */
export type NoticeSink = (line: string) => void;
const stderrLine: NoticeSink = (line) => void process.stderr.write(`${line}\n`);

export function specFor(modelPath: string | null): TokenizerSpec {
  return modelPath ? { kind: 'hf', dir: modelPath } : { kind: 'tiktoken', encoding: 'cl100k_base' };
}

/**
 * A Hugging Face tokenizer.json is encoded by the exact fast tokenizer (@kvrouter/tokenizer) unless
 * it uses a feature that one does not implement (then @huggingface/tokenizers, said once through
 * `notice`) or the spec asks for `engine: 'hf'`.
 */
export function loadTokenizer(spec: TokenizerSpec, notice: NoticeSink = stderrLine): LoadedTokenizer {
  if (spec.kind === 'tiktoken')
    return { spec, tokenizer: new TiktokenTokenizer(), template: new ChatMlTemplate(), engine: 'tiktoken' };
  const files = readHfModel(spec.dir);
  const name = path.basename(path.resolve(spec.dir));
  const fast = spec.engine === 'hf' ? null : tryFastTokenizer(files, name);
  let tok: TextTokenizer & { bosToken: string | null; eosToken: string | null };
  if (fast !== null && 'tokenizer' in fast) tok = fast.tokenizer;
  else {
    tok = new HfTokenizer(files, name);
    if (fast !== null)
      notice(
        `tokenizer: ${name}: tokenizer.json uses ${fast.unsupported}, which the fast tokenizer does not implement; using @huggingface/tokenizers`,
      );
  }
  // A model without a template of its own is prompted with ChatML (what most recent chat models use).
  const template = files.chatTemplate
    ? new JinjaChatTemplate(files.chatTemplate, specialTokensMap(files.config))
    : new ChatMlTemplate();
  if (template instanceof JinjaChatTemplate && template.compiledFallback !== null)
    notice(
      `chat template: ${name}: rendered by the interpreter (${template.compiledFallback} is not compiled)`,
    );
  return { spec, tokenizer: tok, template, engine: tok instanceof HfTokenizer ? 'hf' : 'fast' };
}
