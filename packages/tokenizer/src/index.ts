export {
  FastTokenizer,
  UnsupportedTokenizer,
  compileTokenizer,
  compileModel,
  type CompiledModel,
  addedTokensOf,
  type CompileOptions,
} from './tokenizer.js';
export { AddedMatcher, type AddedToken, type PiecesSink, type SplitSink } from './added.js';
export { MergeTable, Merger } from './bpe.js';
export { translatePattern, UnsupportedPattern } from './regex.js';
export { RegexPreTokenizer, preTokenizerFor, type PreTokenizer } from './pretokenize.js';
