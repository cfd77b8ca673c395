/** Hand-written pre-tokenizer scanners for the patterns of known tokenizer families. */
import type { PreTokenizer } from './pretokenize.js';

export type Scanner = PreTokenizer;

/** JSON of the pattern chain → scanner factory. */
export const SCANNERS = new Map<string, () => Scanner>();
