/**
 * Prompt text → token ids, the two `--tokenizer` paths:
 * - `default`: the whole rendered prompt through the tokenizer (Hugging Face semantics);
 * - `fastokens`: the prompt is cut at special tokens and each piece's ids come from an LRU cache
 *   keyed by the piece's text. Chat prompts are `special, text, special, ...` with one piece per
 *   message, so a multi-turn conversation re-tokenizes only its newest messages. The cut is where
 *   the tokenizer itself splits (special tokens are matched before BPE), so both paths give the
 *   same ids; tokenizers whose normalizer could look across a cut (`chunkSafe` false) always take
 *   the default path.
 * Either way, uncached text above `offloadChars` is tokenized in a worker thread.
 */
import { splitSpecials } from './split.js';
import type { TokenizerPool } from './pool.js';
import type { TextTokenizer } from './types.js';

export interface PromptEncoderOptions {
  tokenizer: TextTokenizer;
  mode: 'default' | 'fastokens';
  pool?: TokenizerPool | null;
  /** Uncached characters above which a thread does the work (default 65 536: ~16k tokens, a few ms of BPE on common text, far more on rare words). */
  offloadChars?: number;
  /** Characters of cached pieces kept (default 32 M). */
  cacheChars?: number;
}

export interface EncodeStats {
  /** Characters tokenized by this call (cache misses). */
  tokenizedChars: number;
  offloaded: boolean;
}

export class PromptEncoder {
  readonly tokenizer: TextTokenizer;
  readonly mode: 'default' | 'fastokens';
  private readonly pool: TokenizerPool | null;
  private readonly offloadChars: number;
  private readonly cacheChars: number;
  private readonly cache = new Map<string, Uint32Array>();
  private cachedChars = 0;
  /** Pieces shorter than this are tokenized directly: a cache entry would cost more than it saves. */
  private static readonly MIN_CACHED = 64;

  constructor(o: PromptEncoderOptions) {
    this.tokenizer = o.tokenizer;
    this.mode = o.mode === 'fastokens' && o.tokenizer.chunkSafe ? 'fastokens' : 'default';
    this.pool = o.pool ?? null;
    this.offloadChars = o.offloadChars ?? 65_536;
    this.cacheChars = o.cacheChars ?? 32 * 1024 * 1024;
  }

  async encode(text: string, stats?: EncodeStats): Promise<Uint32Array> {
    return this.mode === 'fastokens' ? this.encodeCached(text, stats) : this.encodeWhole(text, stats);
  }

  private async encodeWhole(text: string, stats?: EncodeStats): Promise<Uint32Array> {
    if (stats) stats.tokenizedChars = text.length;
    if (this.pool && text.length > this.offloadChars) {
      if (stats) stats.offloaded = true;
      return (await this.pool.encode([text], true))[0]!;
    }
    return Uint32Array.from(this.tokenizer.encode(text));
  }

  private async encodeCached(text: string, stats?: EncodeStats): Promise<Uint32Array> {
    const pieces = splitSpecials(text, this.tokenizer.specialTokens);
    const parts = new Array<Uint32Array | number>(pieces.length);
    let missChars = 0;
    let misses: number[] | null = null;
    for (let i = 0; i < pieces.length; i++) {
      const p = pieces[i]!;
      if (typeof p === 'number') {
        parts[i] = p;
        continue;
      }
      const hit = p.length >= PromptEncoder.MIN_CACHED ? this.cache.get(p) : undefined;
      if (hit) {
        // Refresh the LRU position.
        this.cache.delete(p);
        this.cache.set(p, hit);
        parts[i] = hit;
      } else {
        (misses ??= []).push(i);
        missChars += p.length;
      }
    }
    if (stats) stats.tokenizedChars = missChars;
    if (misses) {
      let encoded: Uint32Array[];
      if (this.pool && missChars > this.offloadChars) {
        if (stats) stats.offloaded = true;
        encoded = await this.pool.encode(
          misses.map((i) => pieces[i] as string),
          false,
        );
      } else encoded = misses.map((i) => Uint32Array.from(this.tokenizer.encodeText(pieces[i] as string)));
      for (let k = 0; k < misses.length; k++) {
        const i = misses[k]!;
        const ids = encoded[k]!;
        parts[i] = ids;
        const p = pieces[i] as string;
        if (p.length >= PromptEncoder.MIN_CACHED) this.remember(p, ids);
      }
    }
    let n = 0;
    for (const x of parts) n += typeof x === 'number' ? 1 : x.length;
    const out = new Uint32Array(n);
    let o = 0;
    for (const x of parts) {
      if (typeof x === 'number') out[o++] = x;
      else {
        out.set(x, o);
        o += x.length;
      }
    }
    return out;
  }

  private remember(piece: string, ids: Uint32Array): void {
    if (piece.length > this.cacheChars / 4 || this.cache.has(piece)) return;
    this.cache.set(piece, ids);
    this.cachedChars += piece.length;
    for (const k of this.cache.keys()) {
      if (this.cachedChars <= this.cacheChars) break;
      this.cache.delete(k);
      this.cachedChars -= k.length;
    }
  }

  get cacheEntries(): number {
    return this.cache.size;
  }
}
