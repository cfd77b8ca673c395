import { xxh3 } from '@node-rs/xxhash';
import { describe, expect, it } from 'vitest';
import { SimRng } from './rng.js';
import { TokenSynth } from './tokens.js';

/** §18 worked with an independent XXH3 (the native @node-rs/xxhash) and BigInt: 1 + (xxh3(LE64(h) ‖ LE32(j), 0) mod (V − 1)). */
function reference(h: bigint, j: number, V = 32000): number {
  const b = Buffer.alloc(12);
  b.writeBigUInt64LE(h, 0);
  b.writeUInt32LE(j, 8);
  return Number(1n + (xxh3.xxh64(b, 0n) % BigInt(V - 1)));
}

describe('TokenSynth hash (XXH3-64 of the 12-byte input, seed 0)', () => {
  it('matches the native XXH3 for random ids, both reductions and the request-unique id range', () => {
    const rng = new SimRng(11);
    // 2^32 − 1: m = 2^32 − 2 keeps almost the whole low word of the hash; 2^21 + 17 and 32000
    // take the other reduction (m below 2^21) with a large and a small modulus.
    for (const V of [0xffffffff, 2 ** 21 + 17, 32000]) {
      const s = new TokenSynth({ vocabSize: V, traceBlockSize: 16, cacheBlocks: 0 });
      for (let i = 0; i < 200; i++) {
        const id = i % 3 === 0 ? rng.u32() : rng.u32() * 2 ** 21 + (rng.u32() >>> 11);
        const toks = s.blockTokens(id);
        for (let j = 0; j < 16; j++) expect(toks[j]).toBe(reference(BigInt(id), j, V));
        // Overflow ids carry the top bit of the high word: 2^63 + row index.
        const t = s.promptTokens({ input_length: 3, hash_ids: [], index: id });
        for (let j = 0; j < 3; j++) expect(t[j]).toBe(reference((1n << 63n) + BigInt(id), j, V));
      }
    }
  });
});

describe('TokenSynth (§18)', () => {
  it('expands a trace block by the §18 rule', () => {
    const s = new TokenSynth();
    const b = s.blockTokens(42);
    expect(b.length).toBe(512);
    for (const j of [0, 1, 255, 511]) expect(b[j]).toBe(reference(42n, j));
    // Ids beyond 2^32 split into two words.
    const big = 2 ** 40 + 5;
    expect(s.blockTokens(big)[3]).toBe(reference(BigInt(big), 3));
  });

  it('keeps every token in [1, V − 1], including odd vocabularies', () => {
    for (const V of [2, 3, 65537, 2 ** 21 + 17, 0xffffffff]) {
      const s = new TokenSynth({ vocabSize: V, traceBlockSize: 64, cacheBlocks: 0 });
      const toks = s.blockTokens(123456789);
      for (let j = 0; j < 64; j += 9) expect(toks[j]).toBe(reference(123456789n, j, V));
      for (const t of toks) expect(t >= 1 && t <= V - 1).toBe(true);
    }
  });

  it('gives equal tokens for equal hash ids across rows, cut to input_length', () => {
    const s = new TokenSynth({ traceBlockSize: 16 });
    const a = s.promptTokens({ input_length: 40, hash_ids: [7, 8, 9], index: 0 });
    const b = s.promptTokens({ input_length: 48, hash_ids: [7, 8, 9, 10], index: 5 });
    expect(a.length).toBe(40);
    // Block 9 is cut after 40 − 32 = 8 tokens in row a; row b has it whole.
    expect(Array.from(b.subarray(0, 40))).toEqual(Array.from(a));
    expect(Array.from(a.subarray(32, 40))).toEqual(Array.from(s.blockTokens(9).subarray(0, 8)));
    // A different id at block 1 changes only that block.
    const c = s.promptTokens({ input_length: 48, hash_ids: [7, 99, 9], index: 6 });
    expect(Array.from(c.subarray(0, 16))).toEqual(Array.from(b.subarray(0, 16)));
    expect(Array.from(c.subarray(16, 32))).not.toEqual(Array.from(b.subarray(16, 32)));
  });

  it('fills positions beyond the hash ids from id 2^63 + row index, j continuing past the block', () => {
    const s = new TokenSynth({ traceBlockSize: 4 });
    const row = { input_length: 4 + 7, hash_ids: [3], index: 9 };
    const t = s.promptTokens(row);
    const uid = (1n << 63n) + 9n;
    expect(Array.from(t.subarray(0, 4))).toEqual([0, 1, 2, 3].map((j) => reference(3n, j)));
    // 7 overflow tokens: j = 0..6 of the request-unique id (j runs past the 4-token block size).
    expect(Array.from(t.subarray(4))).toEqual([0, 1, 2, 3, 4, 5, 6].map((j) => reference(uid, j)));
    // Another row index gives other overflow tokens, the same shared prefix.
    const u = s.promptTokens({ ...row, index: 10 });
    expect(Array.from(u.subarray(0, 4))).toEqual(Array.from(t.subarray(0, 4)));
    expect(Array.from(u.subarray(4))).not.toEqual(Array.from(t.subarray(4)));
    // No hash ids at all: the whole prompt is request-unique.
    expect(s.promptTokens({ input_length: 2, hash_ids: [], index: 0 })[1]).toBe(reference(1n << 63n, 1));
  });

  it('rejects bad options naming the field', () => {
    expect(() => new TokenSynth({ traceBlockSize: 0 })).toThrow(/traceBlockSize/);
    expect(() => new TokenSynth({ vocabSize: 1 })).toThrow(/vocabSize/);
    expect(() => new TokenSynth({ cacheBlocks: -1 })).toThrow(/cacheBlocks/);
  });

  it('returns the same tokens from the cache and after eviction', () => {
    const s = new TokenSynth({ traceBlockSize: 8, cacheBlocks: 2 });
    const first = Array.from(s.blockTokens(1));
    s.blockTokens(2);
    s.blockTokens(3); // evicts 1 (FIFO)
    expect(Array.from(s.blockTokens(1))).toEqual(first);
  });
});
