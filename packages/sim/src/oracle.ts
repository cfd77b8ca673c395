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
  /**
   * Key blocks by synthesized tokens and their §2 sequence hashes even when the engine block size
   * divides the trace block size (the exact path; the default then keys by hash ids, same result).
   */
  byTokens?: boolean;
}

/**
 * LRU over block keys with intrusive links in typed arrays. Keys are 53-bit numbers (of the 64-bit
 * sequence hash, or of the hash-id chain) so they fit a Map<number>: for a million distinct blocks
 * the chance of any collision is about 10^12 / 2^54 ≈ 6·10^-5, far below what a bound needs.
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

/**
 * Block keys of one row when the engine block size divides the trace block size: engine block i
 * lies inside trace block b = floor(i·bs/tbs), so its content is fixed by the hash ids 0..b and its
 * sub-index i mod (tbs/bs) (§18: equal ids give equal tokens). Keys chain the ids through a 64-bit
 * mix, so no token is synthesized and nothing is hashed with XXH3. Blocks past the hash ids are
 * request-unique (id 2^63 + row index) and keyed by (row, position).
 */
class IdKeys {
  private readonly per: number;
  constructor(
    private readonly bs: number,
    tbs: number,
  ) {
    this.per = tbs / bs;
  }

  fill(row: TraceRow, nb: number, keys: Float64Array): void {
    let lo = 0x9e3779b9;
    let hi = 0x7f4a7c15;
    const ids = row.hash_ids;
    for (let i = 0, b = -1; i < nb; i++) {
      const tb = Math.floor(i / this.per);
      const sub = i - tb * this.per;
      if (tb >= ids.length) {
        // Request-unique: cannot equal any other row's block; the sign bit keeps it off the id keys.
        keys[i] = -(row.index * 2 ** 21 + i + 1);
        continue;
      }
      while (b < tb) {
        b++;
        const h = ids[b]!;
        // Two rounds of a murmur3-style mix over (lo, hi) with the id's two 32-bit halves.
        lo = Math.imul(lo ^ (h % 4294967296), 0xcc9e2d51) >>> 0;
        hi = Math.imul(hi ^ Math.floor(h / 4294967296) ^ (lo >>> 15), 0x1b873593) >>> 0;
        lo = Math.imul(lo ^ (hi >>> 13) ^ (lo << 7), 0x85ebca6b) >>> 0;
        hi = Math.imul(hi ^ (lo >>> 16) ^ (hi << 5), 0xc2b2ae35) >>> 0;
      }
      // 53-bit key: 32 bits of lo, 21 of hi, with the sub-block index folded into the low word.
      keys[i] = ((lo ^ Math.imul(sub + 1, 0x27d4eb2f)) >>> 0) + (hi & 0x1fffff) * 4294967296;
    }
  }
}

export function oracleBounds(rows: readonly TraceRow[], opts: OracleOptions): OracleResult {
  const bs = opts.blockSize;
  if (!Number.isSafeInteger(bs) || bs < 1)
    throw new KvrError('invalid_argument', `blockSize must be an integer >= 1, got ${bs}`, 400, {
      field: 'blockSize',
    });
  if (
    !Number.isSafeInteger(opts.capacityBlocks) ||
    opts.capacityBlocks < 0 ||
    opts.capacityBlocks > 2 ** 30
  ) {
    throw new KvrError(
      'invalid_argument',
      `capacityBlocks must be an integer in [0, 2^30], got ${opts.capacityBlocks}`,
      400,
      { field: 'capacityBlocks' },
    );
  }
  const byIds =
    opts.byTokens !== true && opts.traceBlockSize % bs === 0 ? new IdKeys(bs, opts.traceBlockSize) : null;
  const synth = byIds
    ? null
    : new TokenSynth({ traceBlockSize: opts.traceBlockSize, vocabSize: opts.vocabSize });
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
    const nb = Math.floor(len / bs);
    if (keys.length < nb) {
      local = new Uint32Array(4 * nb);
      seqBuf = new Uint32Array(4 * nb);
      keys = new Float64Array(2 * nb);
    }
    if (byIds) byIds.fill(row, nb, keys);
    else {
      const tokens = synth!.promptTokens(row);
      const seq = computeSequenceHashes(computeLocalBlockHashes(tokens, bs, undefined, local), seqBuf);
      for (let i = 0; i < nb; i++) keys[i] = seq[2 * i]! + (seq[2 * i + 1]! & 0x1fffff) * 4294967296;
    }
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
