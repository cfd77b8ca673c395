/**
 * XXH3-64 (xxHash 0.8.x, 64-bit variant, 64-bit seed) in u32 arithmetic, written from the
 * algorithm description. No BigInt on the hash path: a u64 is a (lo, hi) pair of u32 words.
 *
 * The core reads its input as 32-bit little-endian words from two places: `H` indexed from the
 * start and `T` indexed from the end. Token blocks are already u32 words and every read XXH3
 * makes at len ≡ 0 (mod 4) is word-aligned, so for them H = T = the token array (no copy). Byte
 * input is packed once into aligned scratch words (head) plus its last 64 bytes aligned to the
 * end (tail): every read XXH3 makes is either at a multiple of 8 from the start or within the
 * last 64 bytes, at a multiple of 4 from the end.
 *
 * Exact 32x32 -> 64 products: `lo = Math.imul(a, b) >>> 0` is exact; the double `a * b` is off by
 * at most 2^10 (53-bit mantissa, product < 2^64), so `hi = round((a*b - lo) / 2^32)` is exact.
 *
 * Everything that depends only on the seed (the derived secret of the long path, the seed-adjusted
 * keys of the short paths) is computed once per seed into a "context" (Uint32Array, layout below)
 * and cached, so hashing with a fixed seed does no per-call seed work.
 */

import { KvrError } from '../errors.js';

/** The 192-byte default secret (XXH3_kSecret). */
const K_SECRET = Uint8Array.from([
  0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c, 0xde, 0xd4,
  0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f, 0xcb, 0x79, 0xe6, 0x4e,
  0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21, 0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43,
  0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c, 0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb,
  0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3, 0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19,
  0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8, 0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7,
  0xc7, 0x0b, 0x4f, 0x1d, 0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78,
  0x73, 0x64, 0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
  0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e, 0x2b, 0x16,
  0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce, 0x45, 0xcb, 0x3a, 0x8f,
  0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
]);

const TWO_NEG32 = 2.3283064365386963e-10; // 2^-32, exact
const P32_1 = 0x9e3779b1;
const P64_1_LO = 0x85ebca87;
const P64_1_HI = 0x9e3779b1;
const P64_2_LO = 0x27d4eb4f;
const P64_2_HI = 0xc2b2ae3d;
const P64_3_LO = 0x9e3779f9;
const P64_3_HI = 0x165667b1;
const MX1_LO = 0x9e3779f9;
const MX1_HI = 0x16566791;
const MX2_LO = 0x1e98df25;
const MX2_HI = 0x9fb21c65;

/*
 * Seed context layout (u32 entries). All 64-bit values are (lo, hi) pairs.
 *   [0, 192)    C_SEC   derived secret (kSecret with +seed / -seed per 16-byte pair; equal to
 *                       kSecret for seed 0) as LE32 at EVERY byte offset, so unaligned secret
 *                       reads (offsets 3, 11, 121, ...) are one array load
 *   [192, 224)  C_MID   129..240 path: for j = 0..6 kSecret[3+16j]+seed, kSecret[11+16j]-seed;
 *                       j = 7: kSecret[119]+seed, kSecret[127]-seed
 *   [224, 228)  C_BF16  9..16 path: (k[24]^k[32])+seed, (k[40]^k[48])-seed
 *   [228, 230)  C_BF8   4..8 path: (k[8]^k[16]) - (seed ^ bswap32(seed lo) << 32)
 *   [230, 232)  C_BF3   1..3 path: (k32[0]^k32[4]) + seed
 *   [232, 234)  C_EMPTY the hash of the empty input
 */
/** Offset of the derived secret (LE32 at every byte offset) in a seed context. */
export const C_SEC = 0;
const C_MID = 192;
/** Offset of the 9..16-byte keys in a seed context (used by the fixed 16-byte sequence hash). */
export const C_BF16 = 224;
const C_BF8 = 228;
const C_BF3 = 230;
const C_EMPTY = 232;
const C_SIZE = 234;

const M64 = (1n << 64n) - 1n;

function k64(o: number): bigint {
  let v = 0n;
  for (let i = 7; i >= 0; i--) v = (v << 8n) | BigInt(K_SECRET[o + i]);
  return v;
}

function xxh64AvalancheBig(h: bigint): bigint {
  h ^= h >> 33n;
  h = (h * 0xc2b2ae3d27d4eb4fn) & M64;
  h ^= h >> 29n;
  h = (h * 0x165667b19e3779f9n) & M64;
  return h ^ (h >> 32n);
}

const bswap32 = (x: number): number =>
  (((x & 0xff) << 24) | ((x & 0xff00) << 8) | ((x >>> 8) & 0xff00) | (x >>> 24)) >>> 0;

/** Fills `C` for `seed`. Runs once per distinct seed, so BigInt is fine here. */
function fillContext(C: Uint32Array, seedLo: number, seedHi: number): void {
  const seed = (BigInt(seedHi >>> 0) << 32n) | BigInt(seedLo >>> 0);
  const put = (at: number, v: bigint) => {
    C[at] = Number(v & 0xffffffffn);
    C[at + 1] = Number((v >> 32n) & 0xffffffffn);
  };
  const derived = new Uint8Array(196);
  for (let i = 0; i < 12; i++) {
    const a = (k64(16 * i) + seed) & M64;
    const b = (k64(16 * i + 8) - seed) & M64;
    for (let j = 0; j < 8; j++) {
      derived[16 * i + j] = Number((a >> BigInt(8 * j)) & 0xffn);
      derived[16 * i + 8 + j] = Number((b >> BigInt(8 * j)) & 0xffn);
    }
  }
  for (let o = 0; o < 192; o++) {
    C[C_SEC + o] =
      (derived[o] | (derived[o + 1] << 8) | (derived[o + 2] << 16) | (derived[o + 3] << 24)) >>> 0;
  }
  for (let j = 0; j < 8; j++) {
    const lo = j < 7 ? 3 + 16 * j : 119;
    put(C_MID + 4 * j, (k64(lo) + seed) & M64);
    put(C_MID + 4 * j + 2, (k64(lo + 8) - seed) & M64);
  }
  put(C_BF16, ((k64(24) ^ k64(32)) + seed) & M64);
  put(C_BF16 + 2, ((k64(40) ^ k64(48)) - seed) & M64);
  const seed8 = seed ^ (BigInt(bswap32(seedLo >>> 0)) << 32n);
  put(C_BF8, ((k64(8) ^ k64(16)) - seed8) & M64);
  put(C_BF3, (((k64(0) ^ k64(4)) & 0xffffffffn) + seed) & M64);
  put(C_EMPTY, xxh64AvalancheBig(seed ^ k64(56) ^ k64(64)));
}

/*
 * Context cache: slot 0 is pinned to the base seed 1337 and slot 1 to seed 0 (LoRA names and
 * trace synthesis); the other slots rotate. Contexts are filled in place, so a steady state
 * allocates nothing.
 */
const SLOTS = 8;
const slotSeeds = new Uint32Array(2 * SLOTS);
const slotCtx: Uint32Array[] = [];
/** [0] = next slot to replace (2..SLOTS-1). */
const slotState = new Uint32Array(1);
for (let i = 0; i < SLOTS; i++) slotCtx.push(new Uint32Array(C_SIZE));
slotSeeds[0] = 1337;
fillContext(slotCtx[0], 1337, 0);
fillContext(slotCtx[1], 0, 0);
for (let i = 2; i < SLOTS; i++) {
  slotSeeds[2 * i] = 1337; // duplicates of slot 0 until replaced; lookups stop at slot 0 first
  fillContext(slotCtx[i], 1337, 0);
}
slotState[0] = 2;

/** The cached context for a seed; valid until SLOTS-2 other non-pinned seeds have been used. */
export function seedContext(seedLo: number, seedHi: number): Uint32Array {
  seedLo >>>= 0;
  seedHi >>>= 0;
  for (let i = 0; i < SLOTS; i++) {
    if (slotSeeds[2 * i] === seedLo && slotSeeds[2 * i + 1] === seedHi) return slotCtx[i];
  }
  const victim = slotState[0];
  slotState[0] = victim + 1 === SLOTS ? 2 : victim + 1;
  const C = slotCtx[victim];
  fillContext(C, seedLo, seedHi);
  slotSeeds[2 * victim] = seedLo;
  slotSeeds[2 * victim + 1] = seedHi;
  return C;
}

/** The base-seed (1337) context, used by the sequence hash. */
export const BASE_CONTEXT: Uint32Array = slotCtx[0];

/** Scratch for 64-bit results of helpers: [0] lo, [1] hi. */
const F = new Uint32Array(2);

/**
 * F = fold64(a * b) = lo64 ^ hi64 of the 128-bit product (XXH3_mul128_fold64).
 * Words w0..w3 of the product come from the four 32x32 partial products. Each partial's high
 * word is left as the unrounded double (a*b - lo) / 2^32 = hi + e, |e| < 2^-21, and the +0.5
 * is added once per column sum, so one truncation per column replaces one per product: the
 * column sums stay below 2^35, where the accumulated rounding error (< 2^-15) is far from the
 * 0.5 margin.
 */
function fold(al: number, ah: number, bl: number, bh: number): void {
  al >>>= 0;
  ah >>>= 0;
  bl >>>= 0;
  bh >>>= 0;
  const l00 = Math.imul(al, bl) >>> 0;
  const l01 = Math.imul(al, bh) >>> 0;
  const l10 = Math.imul(ah, bl) >>> 0;
  const l11 = Math.imul(ah, bh) >>> 0;
  const m1 = (al * bl - l00) * TWO_NEG32 + 0.5 + l01 + l10;
  const w1 = m1 >>> 0;
  const m2 =
    (al * bh - l01) * TWO_NEG32 + (ah * bl - l10) * TWO_NEG32 + l11 + Math.floor(m1 * TWO_NEG32) + 0.5;
  const w2 = m2 >>> 0;
  const w3 = (ah * bh - l11) * TWO_NEG32 + 0.5 + Math.floor(m2 * TWO_NEG32);
  F[0] = l00 ^ w2;
  F[1] = w1 ^ w3;
}

/** XXH3_avalanche of (lo, hi), where lo/hi may be unnormalised sums (< 2^53) of u32 words. */
function avalanche(lo: number, hi: number, out: Uint32Array, oi: number): void {
  const l = lo >>> 0;
  hi = (hi + (lo - l) * TWO_NEG32) >>> 0;
  lo = (l ^ (hi >>> 5)) >>> 0;
  const nl = Math.imul(lo, MX1_LO) >>> 0;
  const nh =
    ((((lo * MX1_LO - nl) * TWO_NEG32 + 0.5) >>> 0) + Math.imul(lo, MX1_HI) + Math.imul(hi, MX1_LO)) >>> 0;
  out[oi] = nl ^ nh;
  out[oi + 1] = nh;
}

/** XXH64_avalanche (used by the 0..3-byte paths). */
function xxh64Avalanche(lo: number, hi: number, out: Uint32Array, oi: number): void {
  lo = (lo ^ (hi >>> 1)) >>> 0;
  let nl = Math.imul(lo, P64_2_LO) >>> 0;
  let nh =
    ((((lo * P64_2_LO - nl) * TWO_NEG32 + 0.5) >>> 0) + Math.imul(lo, P64_2_HI) + Math.imul(hi, P64_2_LO)) >>>
    0;
  lo = (nl ^ ((nl >>> 29) | (nh << 3))) >>> 0;
  hi = (nh ^ (nh >>> 29)) >>> 0;
  nl = Math.imul(lo, P64_3_LO) >>> 0;
  nh =
    ((((lo * P64_3_LO - nl) * TWO_NEG32 + 0.5) >>> 0) + Math.imul(lo, P64_3_HI) + Math.imul(hi, P64_3_LO)) >>>
    0;
  out[oi] = nl ^ nh;
  out[oi + 1] = nh;
}

/** XXH3_rrmxmx (4..8-byte path). */
function rrmxmx(lo: number, hi: number, len: number, out: Uint32Array, oi: number): void {
  const r49lo = (hi << 17) | (lo >>> 15);
  const r49hi = (lo << 17) | (hi >>> 15);
  const r24lo = (lo << 24) | (hi >>> 8);
  const r24hi = (hi << 24) | (lo >>> 8);
  lo = (lo ^ r49lo ^ r24lo) >>> 0;
  hi = (hi ^ r49hi ^ r24hi) >>> 0;
  let nl = Math.imul(lo, MX2_LO) >>> 0;
  let nh =
    ((((lo * MX2_LO - nl) * TWO_NEG32 + 0.5) >>> 0) + Math.imul(lo, MX2_HI) + Math.imul(hi, MX2_LO)) >>> 0;
  lo = (nl ^ ((nh >>> 3) + len)) >>> 0;
  hi = nh;
  nl = Math.imul(lo, MX2_LO) >>> 0;
  nh = ((((lo * MX2_LO - nl) * TWO_NEG32 + 0.5) >>> 0) + Math.imul(lo, MX2_HI) + Math.imul(hi, MX2_LO)) >>> 0;
  out[oi] = nl ^ ((nl >>> 28) | (nh << 4));
  out[oi + 1] = nh ^ (nh >>> 28);
}

function len4to8(
  H: Uint32Array,
  h: number,
  T: Uint32Array,
  t: number,
  len: number,
  C: Uint32Array,
  out: Uint32Array,
  oi: number,
): void {
  // input64 = LE32(input + len - 4) + (LE32(input) << 32)
  rrmxmx((T[t - 1] ^ C[C_BF8]) >>> 0, (H[h] ^ C[C_BF8 + 1]) >>> 0, len, out, oi);
}

function len9to16(
  H: Uint32Array,
  h: number,
  T: Uint32Array,
  t: number,
  len: number,
  C: Uint32Array,
  out: Uint32Array,
  oi: number,
): void {
  const il = (H[h] ^ C[C_BF16]) >>> 0;
  const ih = (H[h + 1] ^ C[C_BF16 + 1]) >>> 0;
  const jl = (T[t - 2] ^ C[C_BF16 + 2]) >>> 0;
  const jh = (T[t - 1] ^ C[C_BF16 + 3]) >>> 0;
  fold(il, ih, jl, jh);
  // len + swap64(input_lo) + input_hi + fold
  avalanche(len + bswap32(ih) + jl + F[0], bswap32(il) + jh + F[1], out, oi);
}

function len17to128(
  H: Uint32Array,
  h: number,
  T: Uint32Array,
  t: number,
  len: number,
  C: Uint32Array,
  out: Uint32Array,
  oi: number,
): void {
  let lo = Math.imul(len, P64_1_LO) >>> 0;
  let hi = ((((len * P64_1_LO - lo) * TWO_NEG32 + 0.5) >>> 0) + Math.imul(len, P64_1_HI)) >>> 0;
  // Pairs of 16-byte lanes: input 16k with secret 32k, input len-16-16k with secret 32k+16.
  const pairs = ((len - 1) >>> 5) + 1;
  for (let k = 0; k < pairs; k++) {
    const a = h + 4 * k;
    const s = C_SEC + 32 * k;
    fold(H[a] ^ C[s], H[a + 1] ^ C[s + 4], H[a + 2] ^ C[s + 8], H[a + 3] ^ C[s + 12]);
    lo += F[0];
    hi += F[1];
    const b = t - 4 - 4 * k;
    fold(T[b] ^ C[s + 16], T[b + 1] ^ C[s + 20], T[b + 2] ^ C[s + 24], T[b + 3] ^ C[s + 28]);
    lo += F[0];
    hi += F[1];
  }
  avalanche(lo, hi, out, oi);
}

function len129to240(
  H: Uint32Array,
  h: number,
  T: Uint32Array,
  t: number,
  len: number,
  C: Uint32Array,
  out: Uint32Array,
  oi: number,
): void {
  let lo = Math.imul(len, P64_1_LO) >>> 0;
  let hi = ((((len * P64_1_LO - lo) * TWO_NEG32 + 0.5) >>> 0) + Math.imul(len, P64_1_HI)) >>> 0;
  for (let i = 0; i < 8; i++) {
    const a = h + 4 * i;
    const s = C_SEC + 16 * i;
    fold(H[a] ^ C[s], H[a + 1] ^ C[s + 4], H[a + 2] ^ C[s + 8], H[a + 3] ^ C[s + 12]);
    lo += F[0];
    hi += F[1];
  }
  avalanche(lo, hi, F, 0);
  lo = F[0];
  hi = F[1];
  const rounds = len >>> 4;
  for (let i = 8; i < rounds; i++) {
    const a = h + 4 * i;
    const s = C_MID + 4 * (i - 8);
    fold(H[a] ^ C[s], H[a + 1] ^ C[s + 1], H[a + 2] ^ C[s + 2], H[a + 3] ^ C[s + 3]);
    lo += F[0];
    hi += F[1];
  }
  fold(
    T[t - 4] ^ C[C_MID + 28],
    T[t - 3] ^ C[C_MID + 29],
    T[t - 2] ^ C[C_MID + 30],
    T[t - 1] ^ C[C_MID + 31],
  );
  avalanche(lo + F[0], hi + F[1], out, oi);
}

/**
 * Inputs over 240 bytes: 8 accumulator lanes absorb 64-byte stripes; every 16 stripes (one
 * 1024-byte block) they are scrambled; the final, possibly overlapping stripe is the last 64
 * bytes (read from `T`) with the secret at 192 - 64 - 7. Lane i adds data[i] to acc[i ^ 1] and
 * lo32(data[i] ^ key[i]) * hi32(data[i] ^ key[i]) to acc[i] (XXH3_accumulate_512); the 8 lanes
 * are unrolled by hand into locals.
 *
 * Within a block the lanes are sums of doubles WITHOUT carry propagation: per stripe a lo word
 * gains < 2^33 and a hi word < 2^33 (the product's high part is left unrounded, error < 2^-21),
 * so after <= 17 stripes everything is far below 2^53 and the rounding error far below 0.5.
 * Carries are resolved once per block. This keeps the inner loop free of data-dependent
 * branches: a carry test per add (x < y ? 1 : 0) compiles to a branch that mispredicts on
 * random data and made a cold 32k-token prompt ~2.5x slower than a repeated one.
 */
function hashLong(
  H: Uint32Array,
  h: number,
  T: Uint32Array,
  t: number,
  len: number,
  C: Uint32Array,
  out: Uint32Array,
  oi: number,
): void {
  let a0l = 0xc2b2ae3d,
    a0h = 0; // PRIME32_3
  let a1l = P64_1_LO,
    a1h = P64_1_HI; // PRIME64_1
  let a2l = P64_2_LO,
    a2h = P64_2_HI; // PRIME64_2
  let a3l = P64_3_LO,
    a3h = P64_3_HI; // PRIME64_3
  let a4l = 0xc2b2ae63,
    a4h = 0x85ebca77; // PRIME64_4
  let a5l = 0x85ebca77,
    a5h = 0; // PRIME32_2
  let a6l = 0x165667c5,
    a6h = 0x27d4eb2f; // PRIME64_5
  let a7l = P32_1,
    a7h = 0; // PRIME32_1
  const blocks = Math.floor((len - 1) / 1024);
  const tailStripes = (len - 1 - 1024 * blocks) >>> 6;
  let dl: number, dh: number, kl: number, kh: number, pl: number, x: number;
  for (let b = 0; b <= blocks; b++) {
    const full = b < blocks;
    const n = full ? 16 : tailStripes + 1;
    for (let st = 0; st < n; st++) {
      const last = !full && st === tailStripes;
      const W = last ? T : H;
      const w = last ? t - 16 : h + 256 * b + 16 * st;
      const s = C_SEC + (last ? 121 : 8 * st);
      dl = W[w];
      dh = W[w + 1];
      kl = (dl ^ C[s]) >>> 0;
      kh = (dh ^ C[s + 4]) >>> 0;
      pl = Math.imul(kl, kh) >>> 0;
      a0l += pl;
      a0h += (kl * kh - pl) * TWO_NEG32;
      a1l += dl;
      a1h += dh;
      dl = W[w + 2];
      dh = W[w + 3];
      kl = (dl ^ C[s + 8]) >>> 0;
      kh = (dh ^ C[s + 12]) >>> 0;
      pl = Math.imul(kl, kh) >>> 0;
      a1l += pl;
      a1h += (kl * kh - pl) * TWO_NEG32;
      a0l += dl;
      a0h += dh;
      dl = W[w + 4];
      dh = W[w + 5];
      kl = (dl ^ C[s + 16]) >>> 0;
      kh = (dh ^ C[s + 20]) >>> 0;
      pl = Math.imul(kl, kh) >>> 0;
      a2l += pl;
      a2h += (kl * kh - pl) * TWO_NEG32;
      a3l += dl;
      a3h += dh;
      dl = W[w + 6];
      dh = W[w + 7];
      kl = (dl ^ C[s + 24]) >>> 0;
      kh = (dh ^ C[s + 28]) >>> 0;
      pl = Math.imul(kl, kh) >>> 0;
      a3l += pl;
      a3h += (kl * kh - pl) * TWO_NEG32;
      a2l += dl;
      a2h += dh;
      dl = W[w + 8];
      dh = W[w + 9];
      kl = (dl ^ C[s + 32]) >>> 0;
      kh = (dh ^ C[s + 36]) >>> 0;
      pl = Math.imul(kl, kh) >>> 0;
      a4l += pl;
      a4h += (kl * kh - pl) * TWO_NEG32;
      a5l += dl;
      a5h += dh;
      dl = W[w + 10];
      dh = W[w + 11];
      kl = (dl ^ C[s + 40]) >>> 0;
      kh = (dh ^ C[s + 44]) >>> 0;
      pl = Math.imul(kl, kh) >>> 0;
      a5l += pl;
      a5h += (kl * kh - pl) * TWO_NEG32;
      a4l += dl;
      a4h += dh;
      dl = W[w + 12];
      dh = W[w + 13];
      kl = (dl ^ C[s + 48]) >>> 0;
      kh = (dh ^ C[s + 52]) >>> 0;
      pl = Math.imul(kl, kh) >>> 0;
      a6l += pl;
      a6h += (kl * kh - pl) * TWO_NEG32;
      a7l += dl;
      a7h += dh;
      dl = W[w + 14];
      dh = W[w + 15];
      kl = (dl ^ C[s + 56]) >>> 0;
      kh = (dh ^ C[s + 60]) >>> 0;
      pl = Math.imul(kl, kh) >>> 0;
      a7l += pl;
      a7h += (kl * kh - pl) * TWO_NEG32;
      a6l += dl;
      a6h += dh;
    }
    // Resolve carries: lo = sum mod 2^32, hi = round(hi sum) + carry, mod 2^32.
    x = a0l >>> 0;
    a0h = (a0h + (a0l - x) * TWO_NEG32 + 0.5) >>> 0;
    a0l = x;
    x = a1l >>> 0;
    a1h = (a1h + (a1l - x) * TWO_NEG32 + 0.5) >>> 0;
    a1l = x;
    x = a2l >>> 0;
    a2h = (a2h + (a2l - x) * TWO_NEG32 + 0.5) >>> 0;
    a2l = x;
    x = a3l >>> 0;
    a3h = (a3h + (a3l - x) * TWO_NEG32 + 0.5) >>> 0;
    a3l = x;
    x = a4l >>> 0;
    a4h = (a4h + (a4l - x) * TWO_NEG32 + 0.5) >>> 0;
    a4l = x;
    x = a5l >>> 0;
    a5h = (a5h + (a5l - x) * TWO_NEG32 + 0.5) >>> 0;
    a5l = x;
    x = a6l >>> 0;
    a6h = (a6h + (a6l - x) * TWO_NEG32 + 0.5) >>> 0;
    a6l = x;
    x = a7l >>> 0;
    a7h = (a7h + (a7l - x) * TWO_NEG32 + 0.5) >>> 0;
    a7l = x;
    if (!full) break;
    // XXH3_scrambleAcc: acc ^= acc >> 47; acc ^= key; acc *= PRIME32_1 (key = last 64 secret bytes)
    x = (a0l ^ (a0h >>> 15) ^ C[C_SEC + 128]) >>> 0;
    dh = (a0h ^ C[C_SEC + 132]) >>> 0;
    a0l = Math.imul(x, P32_1) >>> 0;
    a0h = ((((x * P32_1 - a0l) * TWO_NEG32 + 0.5) >>> 0) + Math.imul(dh, P32_1)) >>> 0;
    x = (a1l ^ (a1h >>> 15) ^ C[C_SEC + 136]) >>> 0;
    dh = (a1h ^ C[C_SEC + 140]) >>> 0;
    a1l = Math.imul(x, P32_1) >>> 0;
    a1h = ((((x * P32_1 - a1l) * TWO_NEG32 + 0.5) >>> 0) + Math.imul(dh, P32_1)) >>> 0;
    x = (a2l ^ (a2h >>> 15) ^ C[C_SEC + 144]) >>> 0;
    dh = (a2h ^ C[C_SEC + 148]) >>> 0;
    a2l = Math.imul(x, P32_1) >>> 0;
    a2h = ((((x * P32_1 - a2l) * TWO_NEG32 + 0.5) >>> 0) + Math.imul(dh, P32_1)) >>> 0;
    x = (a3l ^ (a3h >>> 15) ^ C[C_SEC + 152]) >>> 0;
    dh = (a3h ^ C[C_SEC + 156]) >>> 0;
    a3l = Math.imul(x, P32_1) >>> 0;
    a3h = ((((x * P32_1 - a3l) * TWO_NEG32 + 0.5) >>> 0) + Math.imul(dh, P32_1)) >>> 0;
    x = (a4l ^ (a4h >>> 15) ^ C[C_SEC + 160]) >>> 0;
    dh = (a4h ^ C[C_SEC + 164]) >>> 0;
    a4l = Math.imul(x, P32_1) >>> 0;
    a4h = ((((x * P32_1 - a4l) * TWO_NEG32 + 0.5) >>> 0) + Math.imul(dh, P32_1)) >>> 0;
    x = (a5l ^ (a5h >>> 15) ^ C[C_SEC + 168]) >>> 0;
    dh = (a5h ^ C[C_SEC + 172]) >>> 0;
    a5l = Math.imul(x, P32_1) >>> 0;
    a5h = ((((x * P32_1 - a5l) * TWO_NEG32 + 0.5) >>> 0) + Math.imul(dh, P32_1)) >>> 0;
    x = (a6l ^ (a6h >>> 15) ^ C[C_SEC + 176]) >>> 0;
    dh = (a6h ^ C[C_SEC + 180]) >>> 0;
    a6l = Math.imul(x, P32_1) >>> 0;
    a6h = ((((x * P32_1 - a6l) * TWO_NEG32 + 0.5) >>> 0) + Math.imul(dh, P32_1)) >>> 0;
    x = (a7l ^ (a7h >>> 15) ^ C[C_SEC + 184]) >>> 0;
    dh = (a7h ^ C[C_SEC + 188]) >>> 0;
    a7l = Math.imul(x, P32_1) >>> 0;
    a7h = ((((x * P32_1 - a7l) * TWO_NEG32 + 0.5) >>> 0) + Math.imul(dh, P32_1)) >>> 0;
  }
  // Merge: len * PRIME64_1 + 4 folds of lane pairs against the secret at 11, then avalanche.
  let lo = Math.imul(len, P64_1_LO) >>> 0;
  let hi = ((((len * P64_1_LO - lo) * TWO_NEG32 + 0.5) >>> 0) + Math.imul(len, P64_1_HI)) >>> 0;
  fold(a0l ^ C[C_SEC + 11], a0h ^ C[C_SEC + 15], a1l ^ C[C_SEC + 19], a1h ^ C[C_SEC + 23]);
  lo += F[0];
  hi += F[1];
  fold(a2l ^ C[C_SEC + 27], a2h ^ C[C_SEC + 31], a3l ^ C[C_SEC + 35], a3h ^ C[C_SEC + 39]);
  lo += F[0];
  hi += F[1];
  fold(a4l ^ C[C_SEC + 43], a4h ^ C[C_SEC + 47], a5l ^ C[C_SEC + 51], a5h ^ C[C_SEC + 55]);
  lo += F[0];
  hi += F[1];
  fold(a6l ^ C[C_SEC + 59], a6h ^ C[C_SEC + 63], a7l ^ C[C_SEC + 67], a7h ^ C[C_SEC + 71]);
  lo += F[0];
  hi += F[1];
  avalanche(lo, hi, out, oi);
}

/**
 * XXH3-64 of `len` bytes read as LE u32 words: from the start at `H[h..]`, from the end at
 * `T[..t)` (both views of the same bytes). `len` must be 0 or >= 4; the 1..3-byte case only
 * exists for byte input (`xxh3_64Into`). Writes (lo, hi) to `out[oi]`, `out[oi + 1]`.
 */
export function hashWords(
  H: Uint32Array,
  h: number,
  T: Uint32Array,
  t: number,
  len: number,
  C: Uint32Array,
  out: Uint32Array,
  oi: number,
): void {
  if (len <= 16) {
    if (len > 8) len9to16(H, h, T, t, len, C, out, oi);
    else if (len >= 4) len4to8(H, h, T, t, len, C, out, oi);
    else {
      out[oi] = C[C_EMPTY];
      out[oi + 1] = C[C_EMPTY + 1];
    }
  } else if (len <= 128) len17to128(H, h, T, t, len, C, out, oi);
  else if (len <= 240) len129to240(H, h, T, t, len, C, out, oi);
  else hashLong(H, h, T, t, len, C, out, oi);
}

/** Byte input packed as words: head from offset 0, tail = the last 64 bytes ending at word 16. */
let headWords = new Uint32Array(256);
const tailWords = new Uint32Array(16);

/** Allocation-free XXH3-64 of bytes with a seed given as (lo, hi) u32 words. */
export function xxh3_64Into(
  input: Uint8Array,
  seedLo: number,
  seedHi: number,
  out: Uint32Array,
  outIdx: number,
): void {
  const len = input.length;
  if (len > 0xffffffff) {
    throw new KvrError('invalid_argument', `input of ${len} bytes exceeds 4 GiB`, 400, { field: 'input' });
  }
  const C = seedContext(seedLo, seedHi);
  if (len > 0 && len < 4) {
    // combined = c1 << 16 | c2 << 24 | c3 | len << 8, xor (k32[0]^k32[4]) + seed
    const combined = ((input[0] << 16) | (input[len >>> 1] << 24) | input[len - 1] | (len << 8)) >>> 0;
    xxh64Avalanche((combined ^ C[C_BF3]) >>> 0, C[C_BF3 + 1], out, outIdx);
    return;
  }
  const nw = len >>> 2;
  if (headWords.length < nw) headWords = new Uint32Array(Math.max(nw, 2 * headWords.length));
  const H = headWords;
  for (let i = 0, b = 0; i < nw; i++, b += 4) {
    H[i] = input[b] | (input[b + 1] << 8) | (input[b + 2] << 16) | (input[b + 3] << 24);
  }
  const tw = Math.min(16, nw);
  for (let r = 1; r <= tw; r++) {
    const b = len - 4 * r;
    tailWords[16 - r] = input[b] | (input[b + 1] << 8) | (input[b + 2] << 16) | (input[b + 3] << 24);
  }
  hashWords(H, 0, tailWords, 16, len, C, out, outIdx);
}

const OUT = new Uint32Array(2);

/** XXH3-64 of `input` with a u64 seed (default 0). Convenience form; the hot paths use pairs. */
export function xxh3_64(input: Uint8Array, seed: bigint = 0n): bigint {
  if (typeof seed !== 'bigint' || seed < 0n || seed > M64) {
    throw new KvrError('invalid_argument', `seed must be a u64 bigint, got ${String(seed)}`, 400, {
      field: 'seed',
    });
  }
  xxh3_64Into(input, Number(seed & 0xffffffffn), Number(seed >> 32n), OUT, 0);
  return (BigInt(OUT[1]) << 32n) | BigInt(OUT[0]);
}
