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
 *
 * The piece cache is a CLOCK approximation of LRU: a hit only marks its entry, eviction walks the
 * insertion order and gives marked entries a second round. Keys are the cache's own flat copies:
 * a piece is a slice of the whole rendered prompt, and a slice as a Map key would keep that ~40 kB
 * prompt alive for as long as the entry lives (a 300-char question pinning 40 kB of old space).
 */
import { splitSpecials } from './split.js';
import type { TokenizerPool } from './pool.js';
import type { TextTokenizer } from './types.js';

export interface PromptEncoderOptions {
  tokenizer: TextTokenizer;
  mode: 'default' | 'fastokens';
  pool?: TokenizerPool | null;
  /**
   * Uncached characters above which a thread does the work (default 16 384, ~4k tokens). A fresh
   * 8k-token context is ~1.5 ms of BPE on an idle core and 10-25 ms on a busy one; inline, every
   * other request in flight waits that long, which is what a p99 sees.
   */
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
  private readonly cache = new Map<string, CacheEntry>();
  private cachedChars = 0;
  /** Pieces shorter than this are tokenized directly: a cache entry would cost more than it saves. */
  private static readonly MIN_CACHED = 64;

  constructor(o: PromptEncoderOptions) {
    this.tokenizer = o.tokenizer;
    this.mode = o.mode === 'fastokens' && o.tokenizer.chunkSafe ? 'fastokens' : 'default';
    this.pool = o.pool ?? null;
    this.offloadChars = o.offloadChars ?? 16_384;
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
        hit.used = true;
        parts[i] = hit.ids;
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
    const key = ownCopy(piece);
    this.cache.set(key, { key, ids, used: false });
    this.cachedChars += key.length;
    if (this.cachedChars <= this.cacheChars) return;
    // Oldest first; a used entry is cleared and moved to the back (with its own key) instead.
    for (const e of this.cache.values()) {
      if (this.cachedChars <= this.cacheChars) break;
      this.cache.delete(e.key);
      if (e.used) {
        e.used = false;
        this.cache.set(e.key, e);
      } else this.cachedChars -= e.key.length;
    }
  }

  get cacheEntries(): number {
    return this.cache.size;
  }
}

interface CacheEntry {
  key: string;
  ids: Uint32Array;
  /** Hit since the eviction walk last passed it. */
  used: boolean;
}

/**
 * A string that owns its characters. Substrings are views of their parent in V8; concatenating
 * then slicing forces a fresh flat copy (one character longer) that is independent of `s`'s parent.
 */
function ownCopy(s: string): string {
  return ` ${s}`.slice(1);
}
