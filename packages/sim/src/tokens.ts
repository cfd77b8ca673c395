/**
 * Token synthesis for traces (docs/protocol.md §18): trace block `h` expands to
 * `t_j = 1 + (xxh3_64(LE64(h) ‖ LE32(j), seed 0) mod (V − 1))`, j = 0..traceBlockSize−1; the prompt is
 * the concatenation over `hash_ids` cut to `input_length`, and positions beyond the hash ids come
 * from the same rule applied to the request-unique id 2^63 + row index (j continuing past the block).
 * Equal hash ids therefore give equal tokens at every position, in every row.
 */
import { KvrError } from '@kvrouter/protocols';
import type { TraceRow } from './trace.js';

export const DEFAULT_VOCAB_SIZE = 32000;
export const DEFAULT_TRACE_BLOCK_SIZE = 512;
/** 2^63 as (lo, hi) words: the base of request-unique overflow ids. */
const OVERFLOW_HI = 0x80000000;

export interface TokenSynthOptions {
  traceBlockSize?: number;
  vocabSize?: number;
  /**
   * Expanded trace blocks kept for reuse (each costs 4 × traceBlockSize bytes). Hash ids repeat
   * heavily in prefix-sharing traces, and synthesis costs one XXH3 call per token.
   */
  cacheBlocks?: number;
}

/** XXH3_kSecret bytes 24..55: the 9..16-byte path's keys (seed 0). */
const K24 = [
  0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f, 0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a,
  0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21, 0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e,
];
const le32 = (o: number): number =>
  (K24[o]! | (K24[o + 1]! << 8) | (K24[o + 2]! << 16) | (K24[o + 3]! << 24)) >>> 0;
// bitflip1 = k[24..32) ^ k[32..40), bitflip2 = k[40..48) ^ k[48..56)
const BF1_LO = (le32(0) ^ le32(8)) >>> 0;
const BF1_HI = (le32(4) ^ le32(12)) >>> 0;
const BF2_LO = (le32(16) ^ le32(24)) >>> 0;
const BF2_HI = (le32(20) ^ le32(28)) >>> 0;
const TWO_NEG32 = 2.3283064365386963e-10;

const bswap32 = (x: number): number =>
  (((x & 0xff) << 24) | ((x & 0xff00) << 8) | ((x >>> 8) & 0xff00) | (x >>> 24)) >>> 0;

export class TokenSynth {
  readonly traceBlockSize: number;
  readonly vocabSize: number;
  private readonly mod: number;
  private readonly inv: number;
  private readonly cache = new Map<number, Uint32Array>();
  private readonly cacheBlocks: number;

  constructor(opts: TokenSynthOptions = {}) {
    const tbs = opts.traceBlockSize ?? DEFAULT_TRACE_BLOCK_SIZE;
    const v = opts.vocabSize ?? DEFAULT_VOCAB_SIZE;
    const cache = opts.cacheBlocks ?? 32_768;
    if (!Number.isSafeInteger(tbs) || tbs < 1 || tbs > 1 << 20) {
      throw new KvrError(
        'invalid_argument',
        `traceBlockSize must be an integer in [1, 2^20], got ${tbs}`,
        400,
        { field: 'traceBlockSize' },
      );
    }
    if (!Number.isSafeInteger(v) || v < 2 || v > 0xffffffff) {
      throw new KvrError('invalid_argument', `vocabSize must be an integer in [2, 2^32 − 1], got ${v}`, 400, {
        field: 'vocabSize',
      });
    }
    if (!Number.isSafeInteger(cache) || cache < 0) {
      throw new KvrError('invalid_argument', `cacheBlocks must be an integer >= 0, got ${cache}`, 400, {
        field: 'cacheBlocks',
      });
    }
    this.traceBlockSize = tbs;
    this.vocabSize = v;
    this.mod = v - 1;
    this.inv = 1 / this.mod;
    this.cacheBlocks = cache;
  }

  /** x mod (V − 1) for 0 <= x < 2^53, by reciprocal (no fmod): the quotient is off by at most one. */
  private reduce(x: number): number {
    const m = this.mod;
    const r = x - Math.floor(x * this.inv) * m;
    return r < 0 ? r + m : r >= m ? r - m : r;
  }

  /**
   * Tokens j0..j0+n−1 of block (lo, hi) into `dst` at `at`. XXH3-64 with seed 0 of the 12-byte
   * input LE32(lo) ‖ LE32(hi) ‖ LE32(j) as a straight line (the 9..16-byte path reads the first and
   * the last 8 bytes, i.e. the words (lo, hi) and (hi, j)), with everything that depends only on
   * (lo, hi) hoisted out of the loop (half of the 128-bit product and the byte swaps); then the
   * reduction mod V − 1. One hash per synthesized token, so the generic byte-input hash (word
   * packing, context lookup) was most of the synthesis time. Checked against the native XXH3 in
   * tokens.test.ts.
   */
  private fill(lo: number, hi: number, j0: number, n: number, dst: Uint32Array, at: number): void {
    const m = this.mod;
    const inv = this.inv;
    // With m < 2^21, (hi mod m)·(2^32 mod m) + lo < 2^42 + 2^32 stays exact in a double.
    const small = m < 1 << 21;
    const c = 4294967296 % m;
    const al = (lo ^ BF1_LO) >>> 0;
    const ah = (hi ^ BF1_HI) >>> 0;
    const bl = (hi ^ BF2_LO) >>> 0;
    const l00 = Math.imul(al, bl) >>> 0;
    const l10 = Math.imul(ah, bl) >>> 0;
    const c00 = (al * bl - l00) * TWO_NEG32 + 0.5;
    const c10 = (ah * bl - l10) * TWO_NEG32;
    // acc = len + swap64(a) + b + fold64(a·b), len = 12
    const sah = 12 + bswap32(ah) + bl;
    const sal = bswap32(al);
    for (let j = 0; j < n; j++) {
      // 128-bit product a·b in 32-bit columns; doubles carry the high halves exactly (see protocols xxh3.ts).
      const bh = ((j0 + j) ^ BF2_HI) >>> 0;
      const l01 = Math.imul(al, bh) >>> 0;
      const l11 = Math.imul(ah, bh) >>> 0;
      const m1 = c00 + l01 + l10;
      const x1 = m1 >>> 0;
      const m2 = (al * bh - l01) * TWO_NEG32 + c10 + l11 + Math.floor(m1 * TWO_NEG32) + 0.5;
      const x2 = m2 >>> 0;
      const x3 = ((ah * bh - l11) * TWO_NEG32 + 0.5 + Math.floor(m2 * TWO_NEG32)) >>> 0;
      const sl = sah + ((l00 ^ x2) >>> 0);
      let rlo = sl >>> 0;
      const rhi = (sal + bh + ((x1 ^ x3) >>> 0) + (sl - rlo) * TWO_NEG32) >>> 0;
      // avalanche: h ^= h >> 37; h *= 0x165667919E3779F9; h ^= h >> 32
      rlo = (rlo ^ (rhi >>> 5)) >>> 0;
      const nl = Math.imul(rlo, 0x9e3779f9) >>> 0;
      const nh =
        ((((rlo * 0x9e3779f9 - nl) * TWO_NEG32 + 0.5) >>> 0) +
          Math.imul(rlo, 0x16566791) +
          Math.imul(rhi, 0x9e3779f9)) >>>
        0;
      const hlo = (nl ^ nh) >>> 0;
      if (small) {
        let a = nh - Math.floor(nh * inv) * m;
        a = a < 0 ? a + m : a >= m ? a - m : a;
        const x = a * c + hlo;
        let r = x - Math.floor(x * inv) * m;
        r = r < 0 ? r + m : r >= m ? r - m : r;
        dst[at + j] = 1 + r;
      } else {
        // (hi·2^32 + lo) mod m, every intermediate below 2^53: the shift by 2^32 is two 16-bit steps.
        const a = this.reduce(nh);
        dst[at + j] = 1 + this.reduce(this.reduce(this.reduce(a * 65536) * 65536) + hlo);
      }
    }
  }

  /** The full expansion of trace block `h` (a safe integer id); cached. */
  blockTokens(h: number): Uint32Array {
    let b = this.cache.get(h);
    if (b !== undefined) return b;
    b = new Uint32Array(this.traceBlockSize);
    this.fill(h % 4294967296, Math.floor(h / 4294967296), 0, this.traceBlockSize, b, 0);
    if (this.cacheBlocks > 0) {
      // FIFO by insertion order: cheap, and prefix-heavy traces re-insert hot blocks soon enough.
      if (this.cache.size >= this.cacheBlocks) this.cache.delete(this.cache.keys().next().value!);
      this.cache.set(h, b);
    }
    return b;
  }

  /** The prompt of one row: `input_length` tokens. */
  promptTokens(row: Pick<TraceRow, 'input_length' | 'hash_ids' | 'index'>): Uint32Array {
    const len = row.input_length;
    const tbs = this.traceBlockSize;
    const out = new Uint32Array(len);
    const full = Math.min(row.hash_ids.length, Math.ceil(len / tbs));
    for (let k = 0; k < full; k++) {
      const at = k * tbs;
      const n = Math.min(tbs, len - at);
      const b = this.blockTokens(row.hash_ids[k]!);
      out.set(n === tbs ? b : b.subarray(0, n), at);
    }
    const covered = full * tbs;
    if (covered < len) {
      // Request-unique id 2^63 + index: hi word carries the top bit, index < 2^53 splits exactly.
      const idx = row.index;
      this.fill(
        idx % 4294967296,
        (OVERFLOW_HI + Math.floor(idx / 4294967296)) >>> 0,
        0,
        len - covered,
        out,
        covered,
      );
    }
    return out;
  }
}
