/**
 * Block and sequence hashing (docs/protocol.md §2). Hot paths take and return "pairs" arrays:
 * `out[2*i]` = low u32, `out[2*i+1]` = high u32 of the i-th u64. The bigint forms are
 * conveniences for tests, tools and slow paths.
 */
import { invalidArgument } from '../errors.js';
import { U64_MAX, type LocalBlockHash, type SequenceHash } from '../ids.js';
import { useWasm, wasmBlockHashes, wasmSequenceHashes } from './wasm-hash.js';
import { BASE_CONTEXT, C_BF16, C_SEC, hashWords, seedContext, xxh3_64Into } from './xxh3.js';

/** XXH3 seed of local block hashes without LoRA, and always of sequence hashes. */
export const BASE_SEED = 1337n;

export interface BlockHashOptions {
  /** Non-empty: the local hashes are seeded with `loraSeed(loraName)`. */
  loraName?: string;
  /** `mmHashes[i]`: multimodal object hashes carried by block i (hashed sorted, after the tokens). */
  mmHashes?: ReadonlyArray<readonly bigint[] | undefined>;
  /** Eagle: windows of bs+1 tokens advancing by bs; floor((len-1)/bs) blocks. */
  isEagle?: boolean;
}

/* Sequence-hash keys: the 9..16-byte path with seed 1337 xors these into its two input words. */
const BF1_LO = BASE_CONTEXT[C_BF16];
const BF1_HI = BASE_CONTEXT[C_BF16 + 1];
const BF2_LO = BASE_CONTEXT[C_BF16 + 2];
const BF2_HI = BASE_CONTEXT[C_BF16 + 3];
const TWO_NEG32 = 2.3283064365386963e-10;

const bswap32 = (x: number): number =>
  (((x & 0xff) << 24) | ((x & 0xff00) << 8) | ((x >>> 8) & 0xff00) | (x >>> 24)) >>> 0;

/**
 * Sequence hash step: XXH3-64(LE64(prev) ‖ LE64(local), seed 1337), written as (lo, hi) to
 * `out[outIdx]`, `out[outIdx + 1]`. The fixed 16-byte input makes this a straight line: the
 * 9..16-byte path (mul128 fold of the keyed halves) and the XXH3 avalanche, inlined.
 */
export function chainHashInto(
  prevLo: number,
  prevHi: number,
  localLo: number,
  localHi: number,
  out: Uint32Array,
  outIdx: number,
): void {
  const al = (prevLo ^ BF1_LO) >>> 0;
  const ah = (prevHi ^ BF1_HI) >>> 0;
  const bl = (localLo ^ BF2_LO) >>> 0;
  const bh = (localHi ^ BF2_HI) >>> 0;
  // 128-bit product a * b, same column scheme as `fold` in xxh3.ts.
  const l00 = Math.imul(al, bl) >>> 0;
  const l01 = Math.imul(al, bh) >>> 0;
  const l10 = Math.imul(ah, bl) >>> 0;
  const l11 = Math.imul(ah, bh) >>> 0;
  const m1 = (al * bl - l00) * TWO_NEG32 + 0.5 + l01 + l10;
  const w1 = m1 >>> 0;
  const m2 =
    (al * bh - l01) * TWO_NEG32 + (ah * bl - l10) * TWO_NEG32 + l11 + Math.floor(m1 * TWO_NEG32) + 0.5;
  const w2 = m2 >>> 0;
  const w3 = ((ah * bh - l11) * TWO_NEG32 + 0.5 + Math.floor(m2 * TWO_NEG32)) >>> 0;
  // acc = 16 + swap64(a) + b + fold(a * b)
  const sl = 16 + bswap32(ah) + bl + ((l00 ^ w2) >>> 0);
  let lo = sl >>> 0;
  const hi = (bswap32(al) + bh + ((w1 ^ w3) >>> 0) + (sl - lo) * TWO_NEG32) >>> 0;
  // XXH3 avalanche: h ^= h >> 37; h *= 0x165667919E3779F9; h ^= h >> 32
  lo = (lo ^ (hi >>> 5)) >>> 0;
  const nl = Math.imul(lo, 0x9e3779f9) >>> 0;
  const nh =
    ((((lo * 0x9e3779f9 - nl) * TWO_NEG32 + 0.5) >>> 0) +
      Math.imul(lo, 0x16566791) +
      Math.imul(hi, 0x9e3779f9)) >>>
    0;
  out[outIdx] = nl ^ nh;
  out[outIdx + 1] = nh;
}

const PAIR = new Uint32Array(2);
const pairToU64 = (p: Uint32Array, i: number): bigint => (BigInt(p[i + 1]) << 32n) | BigInt(p[i]);

function checkU64(v: unknown, field: string): bigint {
  if (typeof v !== 'bigint' || v < 0n || v > U64_MAX)
    throw invalidArgument(field, `must be a u64 bigint, got ${String(v)}`);
  return v;
}

/** Sequence hash of one step, bigint form. */
export function sequenceHashOf(prev: bigint, local: bigint): bigint {
  checkU64(prev, 'prev');
  checkU64(local, 'local');
  chainHashInto(
    Number(prev & 0xffffffffn),
    Number(prev >> 32n),
    Number(local & 0xffffffffn),
    Number(local >> 32n),
    PAIR,
    0,
  );
  return pairToU64(PAIR, 0);
}

/**
 * XXH3-64 of `count` tokens (u32 LE bytes) starting at `tokens[start]`, seed (seedLo, seedHi),
 * written as (lo, hi) to `out[outIdx]`, `out[outIdx + 1]`. Any count works.
 */
export function hashTokenBlock(
  tokens: Uint32Array,
  start: number,
  count: number,
  seedLo: number,
  seedHi: number,
  out: Uint32Array,
  outIdx: number,
): void {
  if (!(
    start >= 0 &&
    count >= 0 &&
    start + count <= tokens.length &&
    Number.isInteger(start) &&
    Number.isInteger(count)
  )) {
    throw invalidArgument(
      'start/count',
      `[${start}, ${start}+${count}) is outside tokens of length ${tokens.length}`,
    );
  }
  hashWords(tokens, start, tokens, start + count, 4 * count, seedContext(seedLo, seedHi), out, outIdx);
}

/*
 * LoRA seeds: computed once per distinct name. A small map is enough (a router sees a handful of
 * adapters); it is cleared rather than evicted when full to stay simple and bounded.
 */
const LORA_CACHE_MAX = 64;
const loraCache = new Map<string, Uint32Array>();
const utf8 = new TextEncoder();

/** (lo, hi) of the LoRA seed for a non-empty name: 1337 + xxh3_64(utf8(name), seed 0) mod 2^64. */
function loraSeedPair(name: string): Uint32Array {
  let p = loraCache.get(name);
  if (p !== undefined) return p;
  p = new Uint32Array(2);
  xxh3_64Into(utf8.encode(name), 0, 0, p, 0);
  const lo = p[0] + 1337;
  p[0] = lo;
  p[1] = p[1] + (lo > 0xffffffff ? 1 : 0);
  if (loraCache.size >= LORA_CACHE_MAX) loraCache.clear();
  loraCache.set(name, p);
  return p;
}

/** Seed of the local hashes for a LoRA adapter; the empty name means no LoRA (BASE_SEED). */
export function loraSeed(name: string): bigint {
  if (typeof name !== 'string') throw invalidArgument('loraName', `must be a string, got ${typeof name}`);
  return name === '' ? BASE_SEED : pairToU64(loraSeedPair(name), 0);
}

/** Scratch for a multimodal block: its tokens then its sorted mm hashes as (lo, hi) words. */
let mmWords = new Uint32Array(1024);

function toTokenArray(tokens: Uint32Array | readonly number[]): Uint32Array {
  if (tokens instanceof Uint32Array) return tokens;
  if (!Array.isArray(tokens))
    throw invalidArgument('tokens', 'must be a Uint32Array or an array of u32 numbers');
  const arr: readonly unknown[] = tokens;
  const n = arr.length;
  const t = new Uint32Array(n);
  for (let i = 0; i < n; i++) {
    const v = arr[i];
    if (typeof v !== 'number' || v >>> 0 !== v)
      throw invalidArgument(`tokens[${i}]`, `must be a u32, got ${String(v)}`);
    t[i] = v;
  }
  return t;
}

/** Throws on a malformed mmHashes; true iff some block below `n` carries at least one hash. */
function checkMmHashes(mm: unknown, n: number): boolean {
  if (!Array.isArray(mm)) throw invalidArgument('mmHashes', 'must be an array');
  const all: readonly unknown[] = mm;
  let any = false;
  for (let i = 0; i < all.length; i++) {
    const m = all[i];
    if (m === undefined || m === null) continue;
    if (!Array.isArray(m))
      throw invalidArgument(`mmHashes[${i}]`, 'must be an array of u64 bigints or undefined');
    const hs: readonly unknown[] = m;
    for (let j = 0; j < hs.length; j++) checkU64(hs[j], `mmHashes[${i}][${j}]`);
    if (hs.length > 0 && i < n) any = true;
  }
  return any;
}

function blockCount(len: number, bs: number, eagle: boolean): number {
  if (bs === 0) return 0;
  if (eagle) return len >= 1 ? Math.floor((len - 1) / bs) : 0;
  return Math.floor(len / bs);
}

/**
 * Local block hashes of every FULL block as pairs (exactly 2 * nBlocks entries; a subarray of
 * `out` when it is large enough, else a new array). bs = 0 yields none.
 */
export function computeLocalBlockHashes(
  tokens: Uint32Array | readonly number[],
  blockSize: number,
  opts?: BlockHashOptions,
  out?: Uint32Array,
): Uint32Array {
  if (!Number.isInteger(blockSize) || blockSize < 0 || blockSize > 0xffffffff) {
    throw invalidArgument('blockSize', `must be a non-negative integer, got ${String(blockSize)}`);
  }
  const toks = toTokenArray(tokens);
  const eagle = opts?.isEagle === true;
  const n = blockCount(toks.length, blockSize, eagle);
  const loraName = opts?.loraName;
  if (loraName !== undefined && typeof loraName !== 'string') {
    throw invalidArgument('loraName', `must be a string, got ${typeof loraName}`);
  }
  const mm = opts?.mmHashes;
  // Validate everything before writing anything, so bad input never leaves `out` half-filled.
  const anyMm = mm !== undefined && checkMmHashes(mm, n);
  const res = out !== undefined && out.length >= 2 * n ? out.subarray(0, 2 * n) : new Uint32Array(2 * n);
  const width = eagle ? blockSize + 1 : blockSize;
  let seedLo = 1337;
  let seedHi = 0;
  if (loraName !== undefined && loraName !== '') {
    const p = loraSeedPair(loraName);
    seedLo = p[0];
    seedHi = p[1];
  }
  // With multimodal hashes the wasm path still hashes every block as plain tokens; the blocks that
  // carry mm hashes (whose bytes differ) are then rehashed below on the JS path.
  const viaWasm = useWasm(n) && wasmBlockHashes(toks, n, blockSize, width, seedLo, seedHi, res, null);
  if (viaWasm && !anyMm) return res;
  const C = seedLo === 1337 && seedHi === 0 ? BASE_CONTEXT : seedContext(seedLo, seedHi);
  const bytes = 4 * width;
  if (!anyMm) {
    if (bytes === 64) hash64Blocks(toks, n, blockSize, C, res);
    else
      for (let i = 0, s = 0; i < n; i++, s += blockSize)
        hashWords(toks, s, toks, s + width, bytes, C, res, 2 * i);
    return res;
  }
  for (let i = 0, s = 0; i < n; i++, s += blockSize) {
    const m = mm[i];
    if (m === undefined || m === null || m.length === 0) {
      if (!viaWasm) hashWords(toks, s, toks, s + width, bytes, C, res, 2 * i);
      continue;
    }
    const words = width + 2 * m.length;
    if (mmWords.length < words) mmWords = new Uint32Array(Math.max(words, 2 * mmWords.length));
    mmWords.set(toks.subarray(s, s + width), 0);
    const sorted = m.length === 1 ? m : [...m].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    for (let j = 0, w = width; j < sorted.length; j++, w += 2) {
      const v = sorted[j];
      mmWords[w] = Number(v & 0xffffffffn);
      mmWords[w + 1] = Number(v >> 32n);
    }
    hashWords(mmWords, 0, mmWords, words, 4 * words, C, res, 2 * i);
  }
  return res;
}

/**
 * Rolling sequence hashes of local-hash pairs: seq[0] = local[0],
 * seq[i] = chain(seq[i-1], local[i]). `out` may alias `local` (in-place).
 */
export function computeSequenceHashes(local: Uint32Array, out?: Uint32Array): Uint32Array {
  const len = local.length;
  if ((len & 1) !== 0) throw invalidArgument('local', `pairs array must have even length, got ${len}`);
  const res =
    out !== undefined && out.length >= len
      ? out.length === len
        ? out
        : out.subarray(0, len)
      : new Uint32Array(len);
  if (len === 0) return res;
  if (useWasm(len >>> 1) && wasmSequenceHashes(local, len >>> 1, res)) return res;
  res[0] = local[0];
  res[1] = local[1];
  chainRun(local, res, 2, len);
  return res;
}

/**
 * res[i] = chain(res[i-2..i-1], local[i..i+1]) for pairs i in [from, to). The step of
 * `chainHashInto`, inlined by hand: a u32 above 2^30 passed to a call that the compiler did not
 * inline is boxed as a heap number, and that was ~60 KB of garbage per 2048-block prompt.
 */
function chainRun(local: Uint32Array, res: Uint32Array, from: number, to: number): void {
  let pl = res[from - 2];
  let ph = res[from - 1];
  for (let i = from; i < to; i += 2) {
    const al = (pl ^ BF1_LO) >>> 0;
    const ah = (ph ^ BF1_HI) >>> 0;
    const bl = (local[i] ^ BF2_LO) >>> 0;
    const bh = (local[i + 1] ^ BF2_HI) >>> 0;
    const l00 = Math.imul(al, bl) >>> 0;
    const l01 = Math.imul(al, bh) >>> 0;
    const l10 = Math.imul(ah, bl) >>> 0;
    const l11 = Math.imul(ah, bh) >>> 0;
    const m1 = (al * bl - l00) * TWO_NEG32 + 0.5 + l01 + l10;
    const w1 = m1 >>> 0;
    const m2 =
      (al * bh - l01) * TWO_NEG32 + (ah * bl - l10) * TWO_NEG32 + l11 + Math.floor(m1 * TWO_NEG32) + 0.5;
    const w2 = m2 >>> 0;
    const w3 = ((ah * bh - l11) * TWO_NEG32 + 0.5 + Math.floor(m2 * TWO_NEG32)) >>> 0;
    const sl = 16 + bswap32(ah) + bl + ((l00 ^ w2) >>> 0);
    let lo = sl >>> 0;
    const hi = (bswap32(al) + bh + ((w1 ^ w3) >>> 0) + (sl - lo) * TWO_NEG32) >>> 0;
    lo = (lo ^ (hi >>> 5)) >>> 0;
    const nl = Math.imul(lo, 0x9e3779f9) >>> 0;
    const nh =
      ((((lo * 0x9e3779f9 - nl) * TWO_NEG32 + 0.5) >>> 0) +
        Math.imul(lo, 0x16566791) +
        Math.imul(hi, 0x9e3779f9)) >>>
      0;
    pl = (nl ^ nh) >>> 0;
    ph = nh;
    res[i] = pl;
    res[i + 1] = ph;
  }
}

/*
 * 16-token blocks (64 bytes, the common block size): XXH3's 17..128-byte path has two lane pairs,
 * i.e. four 128-bit folds of 16 input bytes against the secret at byte offsets 0, 16 (last 16
 * bytes), 32 and 48 (bytes 32..47 read from the end), plus len * PRIME64_1. Unrolled here with
 * the accumulator in locals, no shared scratch and no calls.
 */
const P64_1_LO = 0x85ebca87;
const P64_1_HI = 0x9e3779b1;
const LEN64_LO = Math.imul(64, P64_1_LO) >>> 0;
const LEN64_HI = ((((64 * P64_1_LO - LEN64_LO) * TWO_NEG32 + 0.5) >>> 0) + Math.imul(64, P64_1_HI)) >>> 0;

function hash64Blocks(
  toks: Uint32Array,
  n: number,
  stride: number,
  C: Uint32Array,
  local: Uint32Array,
): void {
  // Secret words of the four folds: fold f reads block words FOLD_WORD[f].. against K[FOLD_SECRET[f]]..
  const K0 = C[C_SEC + 0];
  const K4 = C[C_SEC + 4];
  const K8 = C[C_SEC + 8];
  const K12 = C[C_SEC + 12];
  const K16 = C[C_SEC + 16];
  const K20 = C[C_SEC + 20];
  const K24 = C[C_SEC + 24];
  const K28 = C[C_SEC + 28];
  const K32 = C[C_SEC + 32];
  const K36 = C[C_SEC + 36];
  const K40 = C[C_SEC + 40];
  const K44 = C[C_SEC + 44];
  const K48 = C[C_SEC + 48];
  const K52 = C[C_SEC + 52];
  const K56 = C[C_SEC + 56];
  const K60 = C[C_SEC + 60];
  for (let i = 0, s = 0; i < n; i++, s += stride) {
    let acl = LEN64_LO;
    let ach = LEN64_HI;
    // fold64 of four 128-bit products (column scheme of `fold` in xxh3.ts): block words 0..3,
    // 12..15 (the last 16 bytes), 4..7 and 8..11 (bytes 32..47 counted from the end).
    {
      const al = (toks[s + 0] ^ K0) >>> 0;
      const ah = (toks[s + 1] ^ K4) >>> 0;
      const bl = (toks[s + 2] ^ K8) >>> 0;
      const bh = (toks[s + 3] ^ K12) >>> 0;
      const l00 = Math.imul(al, bl) >>> 0;
      const l01 = Math.imul(al, bh) >>> 0;
      const l10 = Math.imul(ah, bl) >>> 0;
      const l11 = Math.imul(ah, bh) >>> 0;
      const m1 = (al * bl - l00) * TWO_NEG32 + 0.5 + l01 + l10;
      const m2 =
        (al * bh - l01) * TWO_NEG32 + (ah * bl - l10) * TWO_NEG32 + l11 + Math.floor(m1 * TWO_NEG32) + 0.5;
      const w3 = ((ah * bh - l11) * TWO_NEG32 + 0.5 + Math.floor(m2 * TWO_NEG32)) >>> 0;
      acl += (l00 ^ (m2 >>> 0)) >>> 0;
      ach += ((m1 >>> 0) ^ w3) >>> 0;
    }
    {
      const al = (toks[s + 12] ^ K16) >>> 0;
      const ah = (toks[s + 13] ^ K20) >>> 0;
      const bl = (toks[s + 14] ^ K24) >>> 0;
      const bh = (toks[s + 15] ^ K28) >>> 0;
      const l00 = Math.imul(al, bl) >>> 0;
      const l01 = Math.imul(al, bh) >>> 0;
      const l10 = Math.imul(ah, bl) >>> 0;
      const l11 = Math.imul(ah, bh) >>> 0;
      const m1 = (al * bl - l00) * TWO_NEG32 + 0.5 + l01 + l10;
      const m2 =
        (al * bh - l01) * TWO_NEG32 + (ah * bl - l10) * TWO_NEG32 + l11 + Math.floor(m1 * TWO_NEG32) + 0.5;
      const w3 = ((ah * bh - l11) * TWO_NEG32 + 0.5 + Math.floor(m2 * TWO_NEG32)) >>> 0;
      acl += (l00 ^ (m2 >>> 0)) >>> 0;
      ach += ((m1 >>> 0) ^ w3) >>> 0;
    }
    {
      const al = (toks[s + 4] ^ K32) >>> 0;
      const ah = (toks[s + 5] ^ K36) >>> 0;
      const bl = (toks[s + 6] ^ K40) >>> 0;
      const bh = (toks[s + 7] ^ K44) >>> 0;
      const l00 = Math.imul(al, bl) >>> 0;
      const l01 = Math.imul(al, bh) >>> 0;
      const l10 = Math.imul(ah, bl) >>> 0;
      const l11 = Math.imul(ah, bh) >>> 0;
      const m1 = (al * bl - l00) * TWO_NEG32 + 0.5 + l01 + l10;
      const m2 =
        (al * bh - l01) * TWO_NEG32 + (ah * bl - l10) * TWO_NEG32 + l11 + Math.floor(m1 * TWO_NEG32) + 0.5;
      const w3 = ((ah * bh - l11) * TWO_NEG32 + 0.5 + Math.floor(m2 * TWO_NEG32)) >>> 0;
      acl += (l00 ^ (m2 >>> 0)) >>> 0;
      ach += ((m1 >>> 0) ^ w3) >>> 0;
    }
    {
      const al = (toks[s + 8] ^ K48) >>> 0;
      const ah = (toks[s + 9] ^ K52) >>> 0;
      const bl = (toks[s + 10] ^ K56) >>> 0;
      const bh = (toks[s + 11] ^ K60) >>> 0;
      const l00 = Math.imul(al, bl) >>> 0;
      const l01 = Math.imul(al, bh) >>> 0;
      const l10 = Math.imul(ah, bl) >>> 0;
      const l11 = Math.imul(ah, bh) >>> 0;
      const m1 = (al * bl - l00) * TWO_NEG32 + 0.5 + l01 + l10;
      const m2 =
        (al * bh - l01) * TWO_NEG32 + (ah * bl - l10) * TWO_NEG32 + l11 + Math.floor(m1 * TWO_NEG32) + 0.5;
      const w3 = ((ah * bh - l11) * TWO_NEG32 + 0.5 + Math.floor(m2 * TWO_NEG32)) >>> 0;
      acl += (l00 ^ (m2 >>> 0)) >>> 0;
      ach += ((m1 >>> 0) ^ w3) >>> 0;
    }
    // XXH3 avalanche of the (unnormalised) accumulator.
    let lo = acl >>> 0;
    const hi = (ach + (acl - lo) * TWO_NEG32) >>> 0;
    lo = (lo ^ (hi >>> 5)) >>> 0;
    const nl = Math.imul(lo, 0x9e3779f9) >>> 0;
    const nh =
      ((((lo * 0x9e3779f9 - nl) * TWO_NEG32 + 0.5) >>> 0) +
        Math.imul(lo, 0x16566791) +
        Math.imul(hi, 0x9e3779f9)) >>>
      0;
    local[2 * i] = (nl ^ nh) >>> 0;
    local[2 * i + 1] = nh;
  }
}

function hash64BlocksChained(
  toks: Uint32Array,
  n: number,
  stride: number,
  C: Uint32Array,
  local: Uint32Array,
  seq: Uint32Array,
): void {
  let pl = 0;
  let ph = 0;
  // Secret words of the four folds: fold f reads block words FOLD_WORD[f].. against K[FOLD_SECRET[f]]..
  const K0 = C[C_SEC + 0];
  const K4 = C[C_SEC + 4];
  const K8 = C[C_SEC + 8];
  const K12 = C[C_SEC + 12];
  const K16 = C[C_SEC + 16];
  const K20 = C[C_SEC + 20];
  const K24 = C[C_SEC + 24];
  const K28 = C[C_SEC + 28];
  const K32 = C[C_SEC + 32];
  const K36 = C[C_SEC + 36];
  const K40 = C[C_SEC + 40];
  const K44 = C[C_SEC + 44];
  const K48 = C[C_SEC + 48];
  const K52 = C[C_SEC + 52];
  const K56 = C[C_SEC + 56];
  const K60 = C[C_SEC + 60];
  for (let i = 0, s = 0; i < n; i++, s += stride) {
    let acl = LEN64_LO;
    let ach = LEN64_HI;
    // fold64 of four 128-bit products (column scheme of `fold` in xxh3.ts): block words 0..3,
    // 12..15 (the last 16 bytes), 4..7 and 8..11 (bytes 32..47 counted from the end).
    {
      const al = (toks[s + 0] ^ K0) >>> 0;
      const ah = (toks[s + 1] ^ K4) >>> 0;
      const bl = (toks[s + 2] ^ K8) >>> 0;
      const bh = (toks[s + 3] ^ K12) >>> 0;
      const l00 = Math.imul(al, bl) >>> 0;
      const l01 = Math.imul(al, bh) >>> 0;
      const l10 = Math.imul(ah, bl) >>> 0;
      const l11 = Math.imul(ah, bh) >>> 0;
      const m1 = (al * bl - l00) * TWO_NEG32 + 0.5 + l01 + l10;
      const m2 =
        (al * bh - l01) * TWO_NEG32 + (ah * bl - l10) * TWO_NEG32 + l11 + Math.floor(m1 * TWO_NEG32) + 0.5;
      const w3 = ((ah * bh - l11) * TWO_NEG32 + 0.5 + Math.floor(m2 * TWO_NEG32)) >>> 0;
      acl += (l00 ^ (m2 >>> 0)) >>> 0;
      ach += ((m1 >>> 0) ^ w3) >>> 0;
    }
    {
      const al = (toks[s + 12] ^ K16) >>> 0;
      const ah = (toks[s + 13] ^ K20) >>> 0;
      const bl = (toks[s + 14] ^ K24) >>> 0;
      const bh = (toks[s + 15] ^ K28) >>> 0;
      const l00 = Math.imul(al, bl) >>> 0;
      const l01 = Math.imul(al, bh) >>> 0;
      const l10 = Math.imul(ah, bl) >>> 0;
      const l11 = Math.imul(ah, bh) >>> 0;
      const m1 = (al * bl - l00) * TWO_NEG32 + 0.5 + l01 + l10;
      const m2 =
        (al * bh - l01) * TWO_NEG32 + (ah * bl - l10) * TWO_NEG32 + l11 + Math.floor(m1 * TWO_NEG32) + 0.5;
      const w3 = ((ah * bh - l11) * TWO_NEG32 + 0.5 + Math.floor(m2 * TWO_NEG32)) >>> 0;
      acl += (l00 ^ (m2 >>> 0)) >>> 0;
      ach += ((m1 >>> 0) ^ w3) >>> 0;
    }
    {
      const al = (toks[s + 4] ^ K32) >>> 0;
      const ah = (toks[s + 5] ^ K36) >>> 0;
      const bl = (toks[s + 6] ^ K40) >>> 0;
      const bh = (toks[s + 7] ^ K44) >>> 0;
      const l00 = Math.imul(al, bl) >>> 0;
      const l01 = Math.imul(al, bh) >>> 0;
      const l10 = Math.imul(ah, bl) >>> 0;
      const l11 = Math.imul(ah, bh) >>> 0;
      const m1 = (al * bl - l00) * TWO_NEG32 + 0.5 + l01 + l10;
      const m2 =
        (al * bh - l01) * TWO_NEG32 + (ah * bl - l10) * TWO_NEG32 + l11 + Math.floor(m1 * TWO_NEG32) + 0.5;
      const w3 = ((ah * bh - l11) * TWO_NEG32 + 0.5 + Math.floor(m2 * TWO_NEG32)) >>> 0;
      acl += (l00 ^ (m2 >>> 0)) >>> 0;
      ach += ((m1 >>> 0) ^ w3) >>> 0;
    }
    {
      const al = (toks[s + 8] ^ K48) >>> 0;
      const ah = (toks[s + 9] ^ K52) >>> 0;
      const bl = (toks[s + 10] ^ K56) >>> 0;
      const bh = (toks[s + 11] ^ K60) >>> 0;
      const l00 = Math.imul(al, bl) >>> 0;
      const l01 = Math.imul(al, bh) >>> 0;
      const l10 = Math.imul(ah, bl) >>> 0;
      const l11 = Math.imul(ah, bh) >>> 0;
      const m1 = (al * bl - l00) * TWO_NEG32 + 0.5 + l01 + l10;
      const m2 =
        (al * bh - l01) * TWO_NEG32 + (ah * bl - l10) * TWO_NEG32 + l11 + Math.floor(m1 * TWO_NEG32) + 0.5;
      const w3 = ((ah * bh - l11) * TWO_NEG32 + 0.5 + Math.floor(m2 * TWO_NEG32)) >>> 0;
      acl += (l00 ^ (m2 >>> 0)) >>> 0;
      ach += ((m1 >>> 0) ^ w3) >>> 0;
    }
    // XXH3 avalanche of the (unnormalised) accumulator.
    let lo = acl >>> 0;
    const hi = (ach + (acl - lo) * TWO_NEG32) >>> 0;
    lo = (lo ^ (hi >>> 5)) >>> 0;
    const nl = Math.imul(lo, 0x9e3779f9) >>> 0;
    const nh =
      ((((lo * 0x9e3779f9 - nl) * TWO_NEG32 + 0.5) >>> 0) +
        Math.imul(lo, 0x16566791) +
        Math.imul(hi, 0x9e3779f9)) >>>
      0;
    const xl = (nl ^ nh) >>> 0;
    local[2 * i] = xl;
    local[2 * i + 1] = nh;
    if (i === 0) {
      pl = xl;
      ph = nh;
    } else {
      // Chain step (see chainRun). Its latency chain runs beside the next block's independent
      // local hash, so the two overlap in the CPU instead of running one after the other.
      const cal = (pl ^ BF1_LO) >>> 0;
      const cah = (ph ^ BF1_HI) >>> 0;
      const cbl = (xl ^ BF2_LO) >>> 0;
      const cbh = (nh ^ BF2_HI) >>> 0;
      const c00 = Math.imul(cal, cbl) >>> 0;
      const c01 = Math.imul(cal, cbh) >>> 0;
      const c10 = Math.imul(cah, cbl) >>> 0;
      const c11 = Math.imul(cah, cbh) >>> 0;
      const cm1 = (cal * cbl - c00) * TWO_NEG32 + 0.5 + c01 + c10;
      const cw1 = cm1 >>> 0;
      const cm2 =
        (cal * cbh - c01) * TWO_NEG32 +
        (cah * cbl - c10) * TWO_NEG32 +
        c11 +
        Math.floor(cm1 * TWO_NEG32) +
        0.5;
      const cw2 = cm2 >>> 0;
      const cw3 = ((cah * cbh - c11) * TWO_NEG32 + 0.5 + Math.floor(cm2 * TWO_NEG32)) >>> 0;
      const sl = 16 + bswap32(cah) + cbl + ((c00 ^ cw2) >>> 0);
      let clo = sl >>> 0;
      const chi = (bswap32(cal) + cbh + ((cw1 ^ cw3) >>> 0) + (sl - clo) * TWO_NEG32) >>> 0;
      clo = (clo ^ (chi >>> 5)) >>> 0;
      const cnl = Math.imul(clo, 0x9e3779f9) >>> 0;
      const cnh =
        ((((clo * 0x9e3779f9 - cnl) * TWO_NEG32 + 0.5) >>> 0) +
          Math.imul(clo, 0x16566791) +
          Math.imul(chi, 0x9e3779f9)) >>>
        0;
      pl = (cnl ^ cnh) >>> 0;
      ph = cnh;
    }
    seq[2 * i] = pl;
    seq[2 * i + 1] = ph;
  }
}

/**
 * Local block hashes AND sequence hashes of every full block in one call, into `local` and
 * `seq` (each at least 2 * nBlocks long; pairs layout). Returns nBlocks. Same results as
 * `computeSequenceHashes(computeLocalBlockHashes(tokens, blockSize, opts))`, without allocating
 * and with every check made before anything is written. 16-token blocks (no multimodal hashes, no
 * Eagle) run both in one loop, ~15 % faster than the two calls: the serial sequence chain overlaps
 * the next block's independent local hash.
 */
export function computeBlockAndSequenceHashes(
  tokens: Uint32Array | readonly number[],
  blockSize: number,
  opts: BlockHashOptions | undefined,
  local: Uint32Array,
  seq: Uint32Array,
): number {
  if (!Number.isInteger(blockSize) || blockSize < 0 || blockSize > 0xffffffff) {
    throw invalidArgument('blockSize', `must be a non-negative integer, got ${String(blockSize)}`);
  }
  const len = tokens instanceof Uint32Array || Array.isArray(tokens) ? tokens.length : 0;
  const n = blockCount(len, blockSize, opts?.isEagle === true);
  if (!(local instanceof Uint32Array) || local.length < 2 * n)
    throw invalidArgument('local', `must be a Uint32Array of at least ${2 * n} entries`);
  if (!(seq instanceof Uint32Array) || seq.length < 2 * n)
    throw invalidArgument('seq', `must be a Uint32Array of at least ${2 * n} entries`);
  if (tokens instanceof Uint32Array && opts?.mmHashes === undefined && (blockSize === 16 || useWasm(n))) {
    const lora = opts?.loraName;
    if (lora !== undefined && typeof lora !== 'string')
      throw invalidArgument('loraName', `must be a string, got ${typeof lora}`);
    let seedLo = 1337;
    let seedHi = 0;
    if (lora !== undefined && lora !== '') {
      const p = loraSeedPair(lora);
      seedLo = p[0];
      seedHi = p[1];
    }
    const eagle = opts?.isEagle === true;
    if (
      useWasm(n) &&
      wasmBlockHashes(tokens, n, blockSize, eagle ? blockSize + 1 : blockSize, seedLo, seedHi, local, seq)
    )
      return n;
    if (blockSize === 16 && !eagle) {
      hash64BlocksChained(
        tokens,
        n,
        16,
        seedLo === 1337 && seedHi === 0 ? BASE_CONTEXT : seedContext(seedLo, seedHi),
        local,
        seq,
      );
      return n;
    }
  }
  const l = computeLocalBlockHashes(tokens, blockSize, opts, local);
  computeSequenceHashes(l, seq.length === l.length ? seq : seq.subarray(0, l.length));
  return n;
}

/**
 * The hashes of a prompt whose first `from` blocks are already hashed in `local` and `seq` (the
 * earlier turn of the same conversation: a prompt that extends it shares those blocks): the blocks
 * from `from` on are hashed and chained onto seq[from - 1]. Plain blocks only (no LoRA seed,
 * multimodal hashes or Eagle), as `computeBlockAndSequenceHashes(tokens, blockSize, undefined,
 * local, seq)` gives them when the first `from` pairs are those of `tokens`' first `from` blocks;
 * `from` = 0 is exactly that call. Returns nBlocks.
 */
export function extendBlockHashes(
  tokens: Uint32Array,
  blockSize: number,
  from: number,
  local: Uint32Array,
  seq: Uint32Array,
): number {
  if (!Number.isInteger(blockSize) || blockSize < 1 || blockSize > 0xffffffff)
    throw invalidArgument('blockSize', `must be a positive integer, got ${String(blockSize)}`);
  if (!(tokens instanceof Uint32Array)) throw invalidArgument('tokens', 'must be a Uint32Array');
  const n = Math.floor(tokens.length / blockSize);
  if (!Number.isInteger(from) || from < 0 || from > n)
    throw invalidArgument('from', `must be an integer in [0, ${n}], got ${String(from)}`);
  if (from === 0) return computeBlockAndSequenceHashes(tokens, blockSize, undefined, local, seq);
  if (!(local instanceof Uint32Array) || local.length < 2 * n)
    throw invalidArgument('local', `must be a Uint32Array of at least ${2 * n} entries`);
  if (!(seq instanceof Uint32Array) || seq.length < 2 * n)
    throw invalidArgument('seq', `must be a Uint32Array of at least ${2 * n} entries`);
  if (from === n) return n;
  computeLocalBlockHashes(
    tokens.subarray(from * blockSize, n * blockSize),
    blockSize,
    undefined,
    local.subarray(2 * from, 2 * n),
  );
  chainRun(local, seq, 2 * from, 2 * n);
  return n;
}

/** Pairs -> bigints. */
export function pairsToU64s(pairs: Uint32Array): bigint[] {
  if ((pairs.length & 1) !== 0) throw invalidArgument('pairs', `must have even length, got ${pairs.length}`);
  const r = new Array<bigint>(pairs.length >>> 1);
  for (let i = 0; i < r.length; i++) r[i] = pairToU64(pairs, 2 * i);
  return r;
}

/** Bigints -> pairs. */
export function u64sToPairs(v: readonly bigint[]): Uint32Array {
  const p = new Uint32Array(2 * v.length);
  for (let i = 0; i < v.length; i++) {
    const x = checkU64(v[i], `values[${i}]`);
    p[2 * i] = Number(x & 0xffffffffn);
    p[2 * i + 1] = Number(x >> 32n);
  }
  return p;
}

/** Local block hashes as bigints (convenience form of `computeLocalBlockHashes`). */
export function localBlockHashes(
  tokens: Uint32Array | readonly number[],
  blockSize: number,
  opts?: BlockHashOptions,
): LocalBlockHash[] {
  return pairsToU64s(computeLocalBlockHashes(tokens, blockSize, opts)) as LocalBlockHash[];
}

/** Sequence hashes of bigint local hashes (convenience form of `computeSequenceHashes`). */
export function sequenceHashes(local: readonly bigint[]): SequenceHash[] {
  return pairsToU64s(computeSequenceHashes(u64sToPairs(local))) as SequenceHash[];
}
