/** Builds a tokenizer (and its chat template) from a spec; shared by the main thread and the pool's workers. */
import path from 'node:path';
import { ChatMlTemplate, JinjaChatTemplate, type ChatTemplate } from './template.js';
import { HfTokenizer, readHfModel } from './hf.js';
import { TiktokenTokenizer } from './tiktoken.js';
import type { TextTokenizer, TokenizerSpec } from './types.js';

export interface LoadedTokenizer {
  spec: TokenizerSpec;
  tokenizer: TextTokenizer;
  template: ChatTemplate;
}

export function specFor(modelPath: string | null): TokenizerSpec {
  return modelPath ? { kind: 'hf', dir: modelPath } : { kind: 'tiktoken', encoding: 'cl100k_base' };
}

export function loadTokenizer(spec: TokenizerSpec): LoadedTokenizer {
  if (spec.kind === 'tiktoken')
    return { spec, tokenizer: new TiktokenTokenizer(), template: new ChatMlTemplate() };
  const files = readHfModel(spec.dir);
  const tok = new HfTokenizer(files, path.basename(path.resolve(spec.dir)));
  // A model without a template of its own is prompted with ChatML (what most recent chat models use).
  const template = files.chatTemplate
    ? new JinjaChatTemplate(files.chatTemplate, { bos_token: tok.bosToken, eos_token: tok.eosToken })
    : new ChatMlTemplate();
  return { spec, tokenizer: tok, template };
}
