// Generates xxh3-wasm.generated.ts: the WebAssembly module behind the wasm hashing path
// (../wasm-hash.ts). The module is written here as WAT; hot sequences (the 128-bit multiply
// fold, the XXH3 avalanche, the sequence-hash step) are spliced in as text macros because
// Node 20's V8 does not inline wasm calls. wabt (exact-pinned devDependency) compiles it, and
// the bytes are committed as base64 so runtime needs no compiler.
//
//   pnpm --filter @kvrouter/protocols gen:wasm        (also writes xxh3.wat next to this file)
//   node gen-xxh3-wasm.mjs --check                    (exit 1 if the committed files are stale)
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import wabtInit from 'wabt';

const here = dirname(fileURLToPath(import.meta.url));
const M64 = (1n << 64n) - 1n;

const K_SECRET = [
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
];
const k64 = (o) => {
  let v = 0n;
  for (let i = 7; i >= 0; i--) v = (v << 8n) | BigInt(K_SECRET[o + i]);
  return v;
};
const hex = (v) => `0x${(v & M64).toString(16)}`;

/*
 * Memory layout (bytes). [0, 1024) is owned by the module; callers place tokens and outputs
 * at WORK and above.
 *   K     0    kSecret (data segment)
 *   S     192  derived secret of the current seed (kSecret 8-byte words +seed / -seed alternately)
 *   MID   384  129..240 path keys: kSecret[3+16j]+seed, kSecret[11+16j]-seed (j < 7); kSecret[119]+seed, kSecret[127]-seed
 *   BF8   512  4..8 path key: (k[8]^k[16]) - (seed ^ bswap32(lo32(seed)) << 32)
 *   BF16  520  9..16 path keys: (k[24]^k[32])+seed, (k[40]^k[48])-seed
 */
const S = 192;
const MID = 384;
const BF8 = 512;
const BF16 = 520;

const P32_1 = 0x9e3779b1n;
const P32_2 = 0x85ebca77n;
const P32_3 = 0xc2b2ae3dn;
const P64_1 = 0x9e3779b185ebca87n;
const P64_2 = 0xc2b2ae3d27d4eb4fn;
const P64_3 = 0x165667b19e3779f9n;
const P64_4 = 0x85ebca77c2b2ae63n;
const P64_5 = 0x27d4eb2f165667c5n;
// Sequence-hash keys: the 9..16-byte path with the fixed seed 1337.
const CH1 = (k64(24) ^ k64(32)) + 1337n;
const CH2 = (k64(40) ^ k64(48)) - 1337n;

const c = (v) => `(i64.const ${hex(BigInt(v))})`;
const g = (n) => `(local.get $${n})`;
const lo32 = (e) => `(i64.and ${e} (i64.const 0xffffffff))`;
const hi32 = (e) => `(i64.shr_u ${e} (i64.const 32))`;
const ld = (addr, off = 0) => `(i64.load offset=${off} ${addr})`;

/** dst = fold64(a * b): lo64 ^ hi64 of the 128-bit product, from four 32x32 partial products. Uses locals fa fb ll lh hl cr. */
const fold = (dst, a, b) => `
    (local.set $fa ${a})
    (local.set $fb ${b})
    (local.set $ll (i64.mul ${lo32(g('fa'))} ${lo32(g('fb'))}))
    (local.set $lh (i64.mul ${lo32(g('fa'))} ${hi32(g('fb'))}))
    (local.set $hl (i64.mul ${hi32(g('fa'))} ${lo32(g('fb'))}))
    (local.set $cr (i64.add (i64.add ${hi32(g('ll'))} ${lo32(g('hl'))}) ${g('lh')}))
    (local.set $${dst} (i64.xor
      (i64.or (i64.shl ${g('cr')} (i64.const 32)) ${lo32(g('ll'))})
      (i64.add (i64.add ${hi32(g('hl'))} ${hi32(g('cr'))}) (i64.mul ${hi32(g('fa'))} ${hi32(g('fb'))}))))`;
const FOLD_LOCALS =
  '(local $fa i64) (local $fb i64) (local $ll i64) (local $lh i64) (local $hl i64) (local $cr i64)';

/** XXH3_avalanche: h ^= h >> 37; h *= 0x165667919E3779F9; h ^= h >> 32. */
const avalanche = (v) => `
    (local.set $${v} (i64.xor ${g(v)} (i64.shr_u ${g(v)} (i64.const 37))))
    (local.set $${v} (i64.mul ${g(v)} ${c(0x165667919e3779f9n)}))
    (local.set $${v} (i64.xor ${g(v)} (i64.shr_u ${g(v)} (i64.const 32))))`;

/** Byte swap of a 64-bit expression (wasm has no bswap). */
const bswap64 = (e) => {
  const m8 = c(0x00ff00ff00ff00ffn);
  const m16 = c(0x0000ffff0000ffffn);
  const s8 = `(i64.or (i64.and (i64.shr_u ${e} (i64.const 8)) ${m8}) (i64.shl (i64.and ${e} ${m8}) (i64.const 8)))`;
  const s16 = `(i64.or (i64.and (i64.shr_u ${s8} (i64.const 16)) ${m16}) (i64.shl (i64.and ${s8} ${m16}) (i64.const 16)))`;
  return `(i64.rotl ${s16} (i64.const 32))`;
};

/**
 * 9..16-byte path on input words lo, hi already xored with their keys:
 * acc = len + bswap64(lo) + hi + fold64(lo * hi); avalanche. Result in `dst`; uses locals x y t.
 */
const len9to16Core = (dst, len, a, b) => `
    (local.set $x ${a})
    (local.set $y ${b})
    ${fold('t', g('x'), g('y'))}
    (local.set $${dst} (i64.add (i64.add (i64.add ${len} ${bswap64(g('x'))}) ${g('y')}) ${g('t')}))
    ${avalanche(dst)}`;
const CORE_LOCALS = `${FOLD_LOCALS} (local $x i64) (local $y i64) (local $t i64)`;

/**
 * End of block $i in `blocks` (both loops), its local hash in $h: store it, extend the sequence
 * chain into $seq when asked (seq[0] = local[0]), step to the next block.
 */
const blockDone = `
    (i64.store (local.get $local) (local.get $h))
    (if (local.get $seq)
      (then
        (if (local.get $i)
          (then ${len9to16Core('prev', c(16), `(i64.xor (local.get $prev) ${c(CH1)})`, `(i64.xor (local.get $h) ${c(CH2)})`)})
          (else (local.set $prev (local.get $h))))
        (i64.store (local.get $seq) (local.get $prev))
        (local.set $seq (i32.add (local.get $seq) (i32.const 8)))))
    (local.set $tok (i32.add (local.get $tok) (local.get $stride)))
    (local.set $local (i32.add (local.get $local) (i32.const 8)))
    (local.set $i (i32.add (local.get $i) (i32.const 1)))`;

/** acc += mix16B(input at address expr `p` + off, keys at `k`, `k`+8). */
const mix = (acc, p, off, k) => `
    ${fold('t', `(i64.xor ${ld(p, off)} ${ld(`(i32.const ${k})`)})`, `(i64.xor ${ld(p, off + 8)} ${ld(`(i32.const ${k + 8})`)})`)}
    (local.set $${acc} (i64.add ${g(acc)} ${g('t')}))`;

/** XXH3_accumulate_512 of the stripe at $sp with the secret at $ss into lanes a0..a7. */
const stripe = () => {
  let s = '';
  for (let i = 0; i < 8; i++) {
    s += `
    (local.set $dv ${ld(g('sp'), 8 * i)})
    (local.set $dk (i64.xor ${g('dv')} ${ld(g('ss'), 8 * i)}))
    (local.set $a${i ^ 1} (i64.add ${g(`a${i ^ 1}`)} ${g('dv')}))
    (local.set $a${i} (i64.add ${g(`a${i}`)} (i64.mul ${lo32(g('dk'))} ${hi32(g('dk'))})))`;
  }
  return s;
};
const scramble = () => {
  let s = '';
  for (let i = 0; i < 8; i++) {
    s += `
    (local.set $a${i} (i64.mul (i64.xor (i64.xor ${g(`a${i}`)} (i64.shr_u ${g(`a${i}`)} (i64.const 47))) ${ld(`(i32.const ${S + 128 + 8 * i})`)}) ${c(P32_1)}))`;
  }
  return s;
};

const wat = `(module
  (memory (export "memory") 1)
  (data (i32.const 0) "${K_SECRET.map((b) => `\\${b.toString(16).padStart(2, '0')}`).join('')}")
  (global $seedLo (mut i32) (i32.const 0))
  (global $seedHi (mut i32) (i32.const 0))
  (global $haveSeed (mut i32) (i32.const 0))

  ;; Seed-dependent keys, rebuilt only when the seed changes.
  (func $setSeed (param $lo i32) (param $hi i32)
    (local $seed i64) (local $i i32) (local $sw i32)
    (if (i32.and (global.get $haveSeed)
          (i32.and (i32.eq (local.get $lo) (global.get $seedLo)) (i32.eq (local.get $hi) (global.get $seedHi))))
      (then (return)))
    (local.set $seed (i64.or (i64.extend_i32_u (local.get $lo)) (i64.shl (i64.extend_i32_u (local.get $hi)) (i64.const 32))))
    (local.set $i (i32.const 0))
    (loop $l
      (i64.store offset=${S} (local.get $i) (i64.add ${ld(g('i'))} (local.get $seed)))
      (i64.store offset=${S + 8} (local.get $i) (i64.sub ${ld(g('i'), 8)} (local.get $seed)))
      (local.set $i (i32.add (local.get $i) (i32.const 16)))
      (br_if $l (i32.lt_u (local.get $i) (i32.const 192))))
    (local.set $i (i32.const 0))
    (loop $m
      (i64.store offset=${MID} (local.get $i) (i64.add ${ld(g('i'), 3)} (local.get $seed)))
      (i64.store offset=${MID + 8} (local.get $i) (i64.sub ${ld(g('i'), 11)} (local.get $seed)))
      (local.set $i (i32.add (local.get $i) (i32.const 16)))
      (br_if $m (i32.lt_u (local.get $i) (i32.const 112))))
    (i64.store (i32.const ${MID + 112}) (i64.add ${c(k64(119))} (local.get $seed)))
    (i64.store (i32.const ${MID + 120}) (i64.sub ${c(k64(127))} (local.get $seed)))
    ;; bswap32 of the seed's low word
    (local.set $sw (i32.or
      (i32.or (i32.shl (local.get $lo) (i32.const 24)) (i32.shl (i32.and (local.get $lo) (i32.const 0xff00)) (i32.const 8)))
      (i32.or (i32.and (i32.shr_u (local.get $lo) (i32.const 8)) (i32.const 0xff00)) (i32.shr_u (local.get $lo) (i32.const 24)))))
    (i64.store (i32.const ${BF8}) (i64.sub ${c(k64(8) ^ k64(16))}
      (i64.xor (local.get $seed) (i64.shl (i64.extend_i32_u (local.get $sw)) (i64.const 32)))))
    (i64.store (i32.const ${BF16}) (i64.add ${c(k64(24) ^ k64(32))} (local.get $seed)))
    (i64.store (i32.const ${BF16 + 8}) (i64.sub ${c(k64(40) ^ k64(48))} (local.get $seed)))
    (global.set $seedLo (local.get $lo))
    (global.set $seedHi (local.get $hi))
    (global.set $haveSeed (i32.const 1)))

  ;; 4..8 bytes: rrmxmx(LE32(p + len - 4) + (LE32(p) << 32) ^ BF8, len)
  (func $len4to8 (param $p i32) (param $len i32) (result i64)
    (local $h i64)
    (local.set $h (i64.xor
      (i64.or (i64.load32_u (i32.sub (i32.add (local.get $p) (local.get $len)) (i32.const 4)))
              (i64.shl (i64.load32_u (local.get $p)) (i64.const 32)))
      ${ld(`(i32.const ${BF8})`)}))
    (local.set $h (i64.xor (local.get $h)
      (i64.xor (i64.rotl (local.get $h) (i64.const 49)) (i64.rotl (local.get $h) (i64.const 24)))))
    (local.set $h (i64.mul (local.get $h) ${c(0x9fb21c651e98df25n)}))
    (local.set $h (i64.xor (local.get $h)
      (i64.add (i64.shr_u (local.get $h) (i64.const 35)) (i64.extend_i32_u (local.get $len)))))
    (local.set $h (i64.mul (local.get $h) ${c(0x9fb21c651e98df25n)}))
    (i64.xor (local.get $h) (i64.shr_u (local.get $h) (i64.const 28))))

  (func $len9to16 (param $p i32) (param $len i32) (result i64)
    ${CORE_LOCALS} (local $h i64)
    ${len9to16Core(
      'h',
      '(i64.extend_i32_u (local.get $len))',
      `(i64.xor ${ld(g('p'))} ${ld(`(i32.const ${BF16})`)})`,
      `(i64.xor ${ld('(i32.sub (i32.add (local.get $p) (local.get $len)) (i32.const 8))')} ${ld(`(i32.const ${BF16 + 8})`)})`,
    )}
    (local.get $h))

  ;; 17..128 bytes: pairs of 16-byte lanes, input 16k with secret 32k and input len-16-16k with secret 32k+16.
  (func $len17to128 (param $p i32) (param $len i32) (result i64)
    ${FOLD_LOCALS} (local $t i64) (local $acc i64) (local $k i32) (local $end i32) (local $q i32)
    (local.set $acc (i64.mul (i64.extend_i32_u (local.get $len)) ${c(P64_1)}))
    (local.set $end (i32.shl (i32.add (i32.shr_u (i32.sub (local.get $len) (i32.const 1)) (i32.const 5)) (i32.const 1)) (i32.const 5)))
    (local.set $q (i32.sub (i32.add (local.get $p) (local.get $len)) (i32.const 16)))
    (loop $l
      ${fold(
        't',
        `(i64.xor ${ld('(i32.add (local.get $p) (i32.shr_u (local.get $k) (i32.const 1)))')} ${ld(g('k'), S)})`,
        `(i64.xor ${ld('(i32.add (local.get $p) (i32.shr_u (local.get $k) (i32.const 1)))', 8)} ${ld(g('k'), S + 8)})`,
      )}
      (local.set $acc (i64.add (local.get $acc) (local.get $t)))
      ${fold(
        't',
        `(i64.xor ${ld('(i32.sub (local.get $q) (i32.shr_u (local.get $k) (i32.const 1)))')} ${ld(g('k'), S + 16)})`,
        `(i64.xor ${ld('(i32.sub (local.get $q) (i32.shr_u (local.get $k) (i32.const 1)))', 8)} ${ld(g('k'), S + 24)})`,
      )}
      (local.set $acc (i64.add (local.get $acc) (local.get $t)))
      (local.set $k (i32.add (local.get $k) (i32.const 32)))
      (br_if $l (i32.lt_u (local.get $k) (local.get $end))))
    ${avalanche('acc')}
    (local.get $acc))

  ;; 129..240 bytes: 8 lanes against the secret, avalanche, the remaining 16-byte lanes against MID keys, the last 16 bytes.
  (func $len129to240 (param $p i32) (param $len i32) (result i64)
    ${FOLD_LOCALS} (local $t i64) (local $acc i64) (local $k i32) (local $end i32) (local $q i32)
    (local.set $acc (i64.mul (i64.extend_i32_u (local.get $len)) ${c(P64_1)}))
    (loop $l
      ${fold(
        't',
        `(i64.xor ${ld('(i32.add (local.get $p) (local.get $k))')} ${ld(g('k'), S)})`,
        `(i64.xor ${ld('(i32.add (local.get $p) (local.get $k))', 8)} ${ld(g('k'), S + 8)})`,
      )}
      (local.set $acc (i64.add (local.get $acc) (local.get $t)))
      (local.set $k (i32.add (local.get $k) (i32.const 16)))
      (br_if $l (i32.lt_u (local.get $k) (i32.const 128))))
    ${avalanche('acc')}
    ;; rounds 8 .. len/16 - 1; $k is now 128, $q walks the MID keys
    (local.set $end (i32.and (local.get $len) (i32.const -16)))
    (block $done
      (loop $m
        (br_if $done (i32.ge_u (local.get $k) (local.get $end)))
        ${fold(
          't',
          `(i64.xor ${ld('(i32.add (local.get $p) (local.get $k))')} ${ld(g('q'), MID)})`,
          `(i64.xor ${ld('(i32.add (local.get $p) (local.get $k))', 8)} ${ld(g('q'), MID + 8)})`,
        )}
        (local.set $acc (i64.add (local.get $acc) (local.get $t)))
        (local.set $k (i32.add (local.get $k) (i32.const 16)))
        (local.set $q (i32.add (local.get $q) (i32.const 16)))
        (br $m)))
    (local.set $q (i32.sub (i32.add (local.get $p) (local.get $len)) (i32.const 16)))
    ${fold('t', `(i64.xor ${ld(g('q'))} ${ld(`(i32.const ${MID + 112})`)})`, `(i64.xor ${ld(g('q'), 8)} ${ld(`(i32.const ${MID + 120})`)})`)}
    (local.set $acc (i64.add (local.get $acc) (local.get $t)))
    ${avalanche('acc')}
    (local.get $acc))

  ;; > 240 bytes: 8 lanes over 64-byte stripes, scrambled every 16 stripes (1024 bytes); last stripe = last 64 bytes with secret at 121.
  (func $hashLong (param $p i32) (param $len i32) (result i64)
    ${FOLD_LOCALS} (local $t i64) (local $acc i64)
    (local $a0 i64) (local $a1 i64) (local $a2 i64) (local $a3 i64) (local $a4 i64) (local $a5 i64) (local $a6 i64) (local $a7 i64)
    (local $dv i64) (local $dk i64) (local $sp i32) (local $ss i32) (local $blockEnd i32) (local $stripesEnd i32)
    (local.set $a0 ${c(P32_3)}) (local.set $a1 ${c(P64_1)}) (local.set $a2 ${c(P64_2)}) (local.set $a3 ${c(P64_3)})
    (local.set $a4 ${c(P64_4)}) (local.set $a5 ${c(P32_2)}) (local.set $a6 ${c(P64_5)}) (local.set $a7 ${c(P32_1)})
    (local.set $sp (local.get $p))
    ;; full 1024-byte blocks: (len - 1) / 1024 of them
    (local.set $blockEnd (i32.add (local.get $p) (i32.and (i32.sub (local.get $len) (i32.const 1)) (i32.const -1024))))
    (block $blocksDone
      (loop $blocks
        (br_if $blocksDone (i32.ge_u (local.get $sp) (local.get $blockEnd)))
        (local.set $ss (i32.const ${S}))
        (loop $stripes
          ${stripe()}
          (local.set $sp (i32.add (local.get $sp) (i32.const 64)))
          (local.set $ss (i32.add (local.get $ss) (i32.const 8)))
          (br_if $stripes (i32.lt_u (local.get $ss) (i32.const ${S + 128}))))
        ${scramble()}
        (br $blocks)))
    ;; partial block: ((len - 1) mod 1024) / 64 whole stripes, then the last 64 bytes
    (local.set $stripesEnd (i32.add (local.get $sp)
      (i32.and (i32.and (i32.sub (local.get $len) (i32.const 1)) (i32.const 1023)) (i32.const -64))))
    (local.set $ss (i32.const ${S}))
    (block $tailDone
      (loop $tail
        (br_if $tailDone (i32.ge_u (local.get $sp) (local.get $stripesEnd)))
        ${stripe()}
        (local.set $sp (i32.add (local.get $sp) (i32.const 64)))
        (local.set $ss (i32.add (local.get $ss) (i32.const 8)))
        (br $tail)))
    (local.set $sp (i32.sub (i32.add (local.get $p) (local.get $len)) (i32.const 64)))
    (local.set $ss (i32.const ${S + 121}))
    ${stripe()}
    ;; merge: len * PRIME64_1 + fold of lane pairs against the secret at 11 + 16i
    (local.set $acc (i64.mul (i64.extend_i32_u (local.get $len)) ${c(P64_1)}))
    ${[0, 1, 2, 3]
      .map(
        (
          i,
        ) => `${fold('t', `(i64.xor ${g(`a${2 * i}`)} ${ld(`(i32.const ${S + 11 + 16 * i})`)})`, `(i64.xor ${g(`a${2 * i + 1}`)} ${ld(`(i32.const ${S + 19 + 16 * i})`)})`)}
    (local.set $acc (i64.add (local.get $acc) (local.get $t)))`,
      )
      .join('')}
    ${avalanche('acc')}
    (local.get $acc))

  (func $hash (param $p i32) (param $len i32) (result i64)
    (if (result i64) (i32.le_u (local.get $len) (i32.const 16))
      (then (if (result i64) (i32.gt_u (local.get $len) (i32.const 8))
        (then (call $len9to16 (local.get $p) (local.get $len)))
        (else (call $len4to8 (local.get $p) (local.get $len)))))
      (else (if (result i64) (i32.le_u (local.get $len) (i32.const 128))
        (then (call $len17to128 (local.get $p) (local.get $len)))
        (else (if (result i64) (i32.le_u (local.get $len) (i32.const 240))
          (then (call $len129to240 (local.get $p) (local.get $len)))
          (else (call $hashLong (local.get $p) (local.get $len)))))))))

  ;; Sequence hashes of n local hashes (i64 LE) at $local into $seq (may alias): seq[0] = local[0], seq[i] = xxh3(seq[i-1] || local[i], 1337).
  (func (export "chain") (param $local i32) (param $n i32) (param $seq i32)
    ${CORE_LOCALS} (local $prev i64) (local $end i32)
    (if (i32.eqz (local.get $n)) (then (return)))
    (local.set $prev ${ld(g('local'))})
    (i64.store (local.get $seq) (local.get $prev))
    (local.set $end (i32.add (local.get $local) (i32.shl (local.get $n) (i32.const 3))))
    (local.set $local (i32.add (local.get $local) (i32.const 8)))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $local) (local.get $end)))
        (local.set $seq (i32.add (local.get $seq) (i32.const 8)))
        ${len9to16Core('prev', c(16), `(i64.xor (local.get $prev) ${c(CH1)})`, `(i64.xor ${ld(g('local'))} ${c(CH2)})`)}
        (i64.store (local.get $seq) (local.get $prev))
        (local.set $local (i32.add (local.get $local) (i32.const 8)))
        (br $l))))

  ;; Local hashes of n blocks of $len bytes starting every $stride bytes at $tok, seed (lo, hi), into $local (i64 LE each);
  ;; when $seq is not 0 also the sequence hashes into $seq, fused: the serial chain step of block i overlaps the
  ;; independent local hash of block i + 1. 64-byte blocks take an unrolled path with the keys in locals.
  (func (export "blocks") (param $tok i32) (param $n i32) (param $stride i32) (param $len i32)
      (param $seedLo i32) (param $seedHi i32) (param $local i32) (param $seq i32)
    ${CORE_LOCALS} (local $h i64) (local $prev i64) (local $i i32)
    (local $k0 i64) (local $k1 i64) (local $k2 i64) (local $k3 i64) (local $k4 i64) (local $k5 i64) (local $k6 i64) (local $k7 i64)
    (call $setSeed (local.get $seedLo) (local.get $seedHi))
    (if (i32.eqz (local.get $n)) (then (return)))
    (if (i32.eq (local.get $len) (i32.const 64))
      (then
        (local.set $k0 ${ld(`(i32.const ${S})`)}) (local.set $k1 ${ld(`(i32.const ${S + 8})`)})
        (local.set $k2 ${ld(`(i32.const ${S + 16})`)}) (local.set $k3 ${ld(`(i32.const ${S + 24})`)})
        (local.set $k4 ${ld(`(i32.const ${S + 32})`)}) (local.set $k5 ${ld(`(i32.const ${S + 40})`)})
        (local.set $k6 ${ld(`(i32.const ${S + 48})`)}) (local.set $k7 ${ld(`(i32.const ${S + 56})`)})
        (loop $l64
          (local.set $h ${c(64n * P64_1)})
          ${fold('t', `(i64.xor ${ld(g('tok'), 0)} ${g('k0')})`, `(i64.xor ${ld(g('tok'), 8)} ${g('k1')})`)}
          (local.set $h (i64.add (local.get $h) (local.get $t)))
          ${fold('t', `(i64.xor ${ld(g('tok'), 48)} ${g('k2')})`, `(i64.xor ${ld(g('tok'), 56)} ${g('k3')})`)}
          (local.set $h (i64.add (local.get $h) (local.get $t)))
          ${fold('t', `(i64.xor ${ld(g('tok'), 16)} ${g('k4')})`, `(i64.xor ${ld(g('tok'), 24)} ${g('k5')})`)}
          (local.set $h (i64.add (local.get $h) (local.get $t)))
          ${fold('t', `(i64.xor ${ld(g('tok'), 32)} ${g('k6')})`, `(i64.xor ${ld(g('tok'), 40)} ${g('k7')})`)}
          (local.set $h (i64.add (local.get $h) (local.get $t)))
          ${avalanche('h')}
          ${blockDone}
          (br_if $l64 (i32.lt_u (local.get $i) (local.get $n))))
        (return)))
    (loop $l
      (local.set $h (call $hash (local.get $tok) (local.get $len)))
      ${blockDone}
      (br_if $l (i32.lt_u (local.get $i) (local.get $n)))))
)
`;

const wabt = await wabtInit();
const mod = wabt.parseWat('xxh3.wat', wat);
mod.validate();
const { buffer } = mod.toBinary({});
mod.destroy();
const b64 = Buffer.from(buffer).toString('base64');
const files = {
  'xxh3.wat': `;; GENERATED by gen-xxh3-wasm.mjs; do not edit.\n${wat}`,
  'xxh3-wasm.generated.ts':
    `// GENERATED by gen-xxh3-wasm.mjs from the WAT in that script (copy: xxh3.wat); do not edit.\n` +
    `// ${buffer.length} bytes of WebAssembly.\n` +
    `export const XXH3_WASM_BASE64 =\n  '${b64}';\n`,
};
if (process.argv.includes('--check')) {
  // Used by the tests: the committed files must be what this script generates.
  const stale = Object.entries(files).filter(([name, text]) => {
    try {
      return readFileSync(join(here, name), 'utf8') !== text;
    } catch {
      return true;
    }
  });
  if (stale.length > 0) {
    console.error(
      `stale: ${stale.map(([n]) => n).join(', ')}; run pnpm --filter @kvrouter/protocols gen:wasm`,
    );
    process.exit(1);
  }
  console.log('xxh3 wasm: generated files are up to date');
} else {
  for (const [name, text] of Object.entries(files)) writeFileSync(join(here, name), text);
  console.log(`xxh3 wasm: ${buffer.length} bytes`);
}
