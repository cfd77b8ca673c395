/**
 * Hit-rate bounds printed beside every run, in the engines' terms (KV blocks of `blockSize`
 * tokens, prompt tokens served from cache / prompt tokens):
 * - pooled LRU: one cache with the whole fleet's capacity serving the trace in trace order;
 * - infinite: the same walk with no eviction (every repeat of a prefix hits).
 * Like the engine, a prompt can hit at most floor((len − 1) / bs) blocks (its last token is always
 * computed) and only full prompt blocks are cached. Generated tokens are never cached here: in a
 * trace they cannot recur (the next turn's text comes from hash ids, not from the engine's tokens).
 */
import { computeLocalBlockHashes, computeSequenceHashes, KvrError } from '@kvrouter/protocols';
import { TokenSynth } from './tokens.js';
import type { TraceRow } from './trace.js';

export interface OracleResult {
  capacityBlocks: number;
  promptTokens: number;
  pooledCachedTokens: number;
  infiniteCachedTokens: number;
  pooledHitRate: number;
  infiniteHitRate: number;
}

export interface OracleOptions {
  blockSize: number;
  /** Whole fleet: workers × ranks × GPU blocks. */
  capacityBlocks: number;
  traceBlockSize: number;
  vocabSize: number;
}

/**
 * LRU over block keys with intrusive links in typed arrays. Keys are 53 bits of the 64-bit sequence
 * hash (low word + 21 bits of the high word) so they fit a Map<number>: for a million distinct
 * blocks the chance of any collision is about 10^12 / 2^54 ≈ 6·10^-5, far below what a bound needs.
 */
class Lru {
  private readonly map = new Map<number, number>();
  private readonly key: Float64Array;
  private readonly prev: Int32Array;
  private readonly next: Int32Array;
  private head = -1; // least recent
  private tail = -1; // most recent
  private used = 0;

  constructor(readonly capacity: number) {
    this.key = new Float64Array(capacity);
    this.prev = new Int32Array(capacity);
    this.next = new Int32Array(capacity);
  }

  has(k: number): boolean {
    return this.map.has(k);
  }

  private unlink(s: number): void {
    const p = this.prev[s]!;
    const n = this.next[s]!;
    if (p >= 0) this.next[p] = n;
    else this.head = n;
    if (n >= 0) this.prev[n] = p;
    else this.tail = p;
  }

  private append(s: number): void {
    this.prev[s] = this.tail;
    this.next[s] = -1;
    if (this.tail >= 0) this.next[this.tail] = s;
    else this.head = s;
    this.tail = s;
  }

  /** Marks `k` most recent, inserting it (evicting the least recent when full). */
  touch(k: number): void {
    if (this.capacity === 0) return;
    let s = this.map.get(k);
    if (s !== undefined) {
      this.unlink(s);
      this.append(s);
      return;
    }
    if (this.used < this.capacity) s = this.used++;
    else {
      s = this.head;
      this.unlink(s);
      this.map.delete(this.key[s]!);
    }
    this.key[s] = k;
    this.map.set(k, s);
    this.append(s);
  }
}

/** Trace order: by arrival time (timestamp / speedup), ties by position. */
function traceOrder(rows: readonly TraceRow[]): number[] {
  return rows.map((_, i) => i).sort((a, b) => rows[a]!.timestamp - rows[b]!.timestamp || a - b);
}

export function oracleBounds(rows: readonly TraceRow[], opts: OracleOptions): OracleResult {
  const bs = opts.blockSize;
  if (!Number.isSafeInteger(bs) || bs < 1) throw new KvrError('invalid_argument', `blockSize must be an integer >= 1, got ${bs}`, 400, { field: 'blockSize' });
  if (!Number.isSafeInteger(opts.capacityBlocks) || opts.capacityBlocks < 0 || opts.capacityBlocks > 2 ** 30) {
    throw new KvrError('invalid_argument', `capacityBlocks must be an integer in [0, 2^30], got ${opts.capacityBlocks}`, 400, { field: 'capacityBlocks' });
  }
  const synth = new TokenSynth({ traceBlockSize: opts.traceBlockSize, vocabSize: opts.vocabSize });
  const lru = new Lru(opts.capacityBlocks);
  const seen = new Set<number>();
  let local = new Uint32Array(0);
  let seqBuf = new Uint32Array(0);
  let keys = new Float64Array(0);
  let prompt = 0;
  let pooled = 0;
  let infinite = 0;
  for (const k of traceOrder(rows)) {
    const row = rows[k]!;
    const len = row.input_length;
    prompt += len;
    const tokens = synth.promptTokens(row);
    const nb = Math.floor(len / bs);
    if (local.length < 2 * nb) {
      local = new Uint32Array(4 * nb);
      seqBuf = new Uint32Array(4 * nb);
      keys = new Float64Array(2 * nb);
    }
    const seq = computeSequenceHashes(computeLocalBlockHashes(tokens, bs, undefined, local), seqBuf);
    for (let i = 0; i < nb; i++) keys[i] = seq[2 * i]! + (seq[2 * i + 1]! & 0x1fffff) * 4294967296;
    const cap = Math.floor((len - 1) / bs);
    let hp = 0;
    while (hp < cap && lru.has(keys[hp]!)) hp++;
    let hi = 0;
    while (hi < cap && seen.has(keys[hi]!)) hi++;
    pooled += hp * bs;
    infinite += hi * bs;
    // Deepest first, so a prompt's shallower blocks are the more recent: eviction then trims
    // prefixes from the tail, as the engine's tail-first release does.
    for (let i = nb - 1; i >= 0; i--) lru.touch(keys[i]!);
    for (let i = 0; i < nb; i++) seen.add(keys[i]!);
  }
  return {
    capacityBlocks: opts.capacityBlocks,
    promptTokens: prompt,
    pooledCachedTokens: pooled,
    infiniteCachedTokens: infinite,
    pooledHitRate: prompt > 0 ? pooled / prompt : 0,
    infiniteHitRate: prompt > 0 ? infinite / prompt : 0,
  };
}
