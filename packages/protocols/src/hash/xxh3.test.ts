import { Rng } from '@kvrouter/testkit';
import xxhash from '@node-rs/xxhash';
import { describe, expect, it } from 'vitest';
import { KvrError } from '../errors.js';
import { hashTokenBlock, xxh3_64, xxh3_64Into } from './index.js';

const oracle = (b: Uint8Array, seed: bigint): bigint => xxhash.xxh3.xxh64(b, seed);
const SEEDS_FIXED = [0n, 1337n, 1n, 0xffffffffn, 0x100000000n, (1n << 64n) - 1n, 0x9e3779b185ebca8dn];

/** xxHash's sanity buffer (cli/xsum_sanity_check.c): byteGen = PRIME32; b[i] = byteGen >> 56; byteGen *= PRIME64. */
function sanityBuffer(len: number): Uint8Array {
  const b = new Uint8Array(len);
  let g = 2654435761n;
  for (let i = 0; i < len; i++) {
    b[i] = Number(g >> 56n);
    g = (g * 11400714785074694797n) & ((1n << 64n) - 1n);
  }
  return b;
}

describe('xxh3_64: published vectors', () => {
  // XSUM_XXH3_testdata in xxHash v0.8.x cli/xsum_sanity_check.c; seed PRIME64 = 11400714785074694797.
  const PRIME64 = 11400714785074694797n;
  const table: [number, bigint, bigint][] = [
    [0, 0n, 0x2d06800538d394c2n],
    [0, PRIME64, 0xa8a6b918b2f0364an],
    [1, 0n, 0xc44bdff4074eecdbn],
    [1, PRIME64, 0x032be332dd766ef8n],
    [6, 0n, 0x27b56a84cd2d7325n],
    [6, PRIME64, 0x84589c116ab59ab9n],
    [12, 0n, 0xa713daf0dfbb77e7n],
    [12, PRIME64, 0xe7303e1b2336de0en],
    [24, 0n, 0xa3fe70bf9d3510ebn],
    [24, PRIME64, 0x850e80fc35bdd690n],
    [48, 0n, 0x397da259ecba1f11n],
    [48, PRIME64, 0xadc2cbaa44acc616n],
    [80, 0n, 0xbcdefbbb2c47c90an],
    [80, PRIME64, 0xc6dd0cb699532e73n],
    [195, 0n, 0xcd94217ee362ec3an],
    [195, PRIME64, 0xba68003d370cb3d9n],
    [403, 0n, 0xcdeb804d65c6dea4n],
    [403, PRIME64, 0x6259f6ecfd6443fdn],
    [512, 0n, 0x617e49599013cb6bn],
    [512, PRIME64, 0x3ce457de14c27708n],
    [2048, 0n, 0xdd59e2c3a5f038e0n],
    [2048, PRIME64, 0x66f81670669ababcn],
    [2099, 0n, 0xc6b9d9b3fc9ac765n],
    [2099, PRIME64, 0x184f316843663974n],
    [2240, 0n, 0x6e73a90539cf2948n],
    [2240, PRIME64, 0x757ba8487d1b5247n],
    [2367, 0n, 0xcb37aeb9e5d361edn],
    [2367, PRIME64, 0xd2db3415b942b42an],
  ];
  it.each(table)('xsum sanity len=%i seed=%s', (len, seed, want) => {
    expect(xxh3_64(sanityBuffer(len), seed)).toBe(want);
  });

  // LLVM llvm/unittests/Support/xxhashTest.cpp (TEST xxhashTest.xxh3): xorshift buffer, seed 0.
  it('LLVM xxh3 vectors', () => {
    const a = new Uint8Array(2243);
    let x = 1n;
    const M = (1n << 64n) - 1n;
    for (let i = 0; i < a.length; i++) {
      x ^= (x << 13n) & M;
      x ^= x >> 7n;
      x ^= (x << 17n) & M;
      a[i] = Number(x & 0xffn);
    }
    const want: [number, bigint][] = [
      [0, 0x2d06800538d394c2n],
      [1, 0xd0d496e05c553485n],
      [2, 0x84d625edb7055eacn],
      [3, 0x6ea2d59aca5c3778n],
      [4, 0xbf65290914e80242n],
      [5, 0xc01fd099ad4fc8e4n],
      [6, 0x9e3ea8187399caa5n],
      [7, 0x9da8b60540644f5an],
      [8, 0xabc1413da6cd0209n],
      [9, 0x8bc89400bfed51f6n],
      [16, 0x7e46916754d7c9b8n],
      [17, 0xed4be912ba5f836dn],
      [32, 0xf59b59b58c304fd1n],
      [33, 0x9013fb74ca603e0cn],
      [64, 0xfa5271fcce0db1c3n],
      [65, 0x79c42431727f1012n],
      [96, 0x591ee0ddf9c9ccd1n],
      [97, 0x8ffc6a3111fe19dan],
      [128, 0x06a146ee9a2da378n],
      [129, 0xbc7138129bf065dan],
      [403, 0xcefeb3ffa532ad8cn],
      [512, 0xcdfa6b6268e3650fn],
      [513, 0x4bb5d42742f9765fn],
      [2048, 0x330ce110cbb79eaen],
      [2049, 0x3ba6afa0249fef9an],
      [2240, 0xd61d4d2a94e926a8n],
      [2243, 0x0979f786a24edde7n],
    ];
    for (const [len, h] of want) expect(xxh3_64(a.subarray(0, len)), `len ${len}`).toBe(h);
  });

  it('docs/protocol.md §2.4 upstream vector: "test data", seed 1337', () => {
    expect(xxh3_64(new TextEncoder().encode('test data'), 1337n)).toBe(13226331709069118873n);
  });
});

describe('xxh3_64 vs @node-rs/xxhash', () => {
  it('every length 0..300 with fixed and random seeds', () => {
    const rng = new Rng(11);
    const buf = rng.bytes(300);
    for (let len = 0; len <= 300; len++) {
      const b = buf.subarray(0, len);
      for (const seed of [...SEEDS_FIXED, rng.u64(), rng.u64()]) {
        expect(xxh3_64(b, seed), `len ${len} seed ${seed}`).toBe(oracle(b, seed));
      }
    }
  });

  it('random lengths up to 4096, random seeds, unaligned views', () => {
    const rng = new Rng(12);
    const big = rng.bytes(4096 + 8);
    for (let i = 0; i < 1500; i++) {
      const len = rng.int(0, 4096);
      const off = rng.int(0, 7);
      const b = big.subarray(off, off + len);
      const seed = rng.bool(0.2) ? 0n : rng.u64();
      expect(xxh3_64(b, seed), `len ${len} off ${off} seed ${seed}`).toBe(oracle(b, seed));
    }
  });

  it('block boundaries of the long path (1024-byte blocks, 64-byte stripes)', () => {
    const rng = new Rng(13);
    const big = rng.bytes(6200);
    const lens = [
      241, 255, 256, 257, 319, 320, 321, 1023, 1024, 1025, 1087, 1088, 1089, 2047, 2048, 2049, 3072, 3073,
      6144, 6200,
    ];
    for (const len of lens) {
      for (const seed of [0n, 1337n, rng.u64()]) {
        const b = big.subarray(0, len);
        expect(xxh3_64(b, seed), `len ${len}`).toBe(oracle(b, seed));
      }
    }
  });

  it('xxh3_64Into writes (lo, hi) at the index and leaves the rest alone', () => {
    const b = new TextEncoder().encode('test data');
    const out = new Uint32Array([7, 7, 7, 7]);
    xxh3_64Into(b, 1337, 0, out, 1);
    const want = oracle(b, 1337n);
    expect(out[0]).toBe(7);
    expect(out[1]).toBe(Number(want & 0xffffffffn));
    expect(out[2]).toBe(Number(want >> 32n));
    expect(out[3]).toBe(7);
  });

  it('rejects a seed that is not a u64', () => {
    const b = new Uint8Array(4);
    expect(() => xxh3_64(b, -1n)).toThrow(KvrError);
    expect(() => xxh3_64(b, -1n)).toThrow(/seed/);
    expect(() => xxh3_64(b, 1n << 64n)).toThrow(/seed/);
    expect(() => xxh3_64(b, 5 as unknown as bigint)).toThrow(/seed/);
  });

  it('more distinct seeds than the context cache holds, interleaved, stay correct', () => {
    const rng = new Rng(14);
    const seeds = Array.from({ length: 20 }, () => rng.u64());
    const b = rng.bytes(500);
    for (let round = 0; round < 3; round++) {
      for (const s of seeds) {
        expect(xxh3_64(b, s)).toBe(oracle(b, s));
        expect(xxh3_64(b.subarray(0, 100), 1337n)).toBe(oracle(b.subarray(0, 100), 1337n));
      }
    }
  });
});

describe('hashTokenBlock vs @node-rs/xxhash', () => {
  const tokBytes = (t: Uint32Array, start: number, count: number): Uint8Array => {
    const b = new Uint8Array(4 * count);
    const dv = new DataView(b.buffer);
    for (let i = 0; i < count; i++) dv.setUint32(4 * i, t[start + i], true);
    return b;
  };

  it('every count 0..300 and the block sizes in use, at random offsets and seeds', () => {
    const rng = new Rng(21);
    const toks = new Uint32Array(6000);
    for (let i = 0; i < toks.length; i++) toks[i] = rng.u32();
    const out = new Uint32Array(4);
    const counts = [...Array.from({ length: 301 }, (_, i) => i), 512, 513, 1024, 1100];
    for (const count of counts) {
      for (let r = 0; r < 4; r++) {
        const start = rng.int(0, toks.length - count);
        const seed = r === 0 ? 1337n : rng.u64();
        hashTokenBlock(toks, start, count, Number(seed & 0xffffffffn), Number(seed >> 32n), out, 2);
        const got = (BigInt(out[3]) << 32n) | BigInt(out[2]);
        expect(got, `count ${count} start ${start}`).toBe(oracle(tokBytes(toks, start, count), seed));
      }
    }
  });

  it('rejects a range outside the token array', () => {
    const t = new Uint32Array(10);
    const out = new Uint32Array(2);
    expect(() => hashTokenBlock(t, 8, 4, 1337, 0, out, 0)).toThrow(/outside tokens/);
    expect(() => hashTokenBlock(t, -1, 2, 1337, 0, out, 0)).toThrow(/outside tokens/);
  });
});
