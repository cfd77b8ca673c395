import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Rng } from '@kvrouter/testkit';
import xxhash from '@node-rs/xxhash';
import { afterEach, describe, expect, it } from 'vitest';
import {
  computeBlockAndSequenceHashes,
  computeLocalBlockHashes,
  computeSequenceHashes,
  configureWasmHashing,
  localBlockHashes,
  pairsToU64s,
  sequenceHashes,
} from './index.js';
import { useWasm, wasmBlockHashes, wasmHashingAvailable, wasmSequenceHashes } from './wasm-hash.js';

const oracle = (b: Uint8Array, seed: bigint): bigint => xxhash.xxh3.xxh64(b, seed);
const M64 = (1n << 64n) - 1n;
const defaults = configureWasmHashing({});

afterEach(() => {
  configureWasmHashing(defaults);
});

/** One block of `words` tokens through the wasm core with an explicit seed. */
function wasmOne(words: Uint32Array, seed: bigint): bigint {
  const out = new Uint32Array(2);
  expect(useWasm(1) || wasmHashingAvailable()).toBe(true);
  expect(
    wasmBlockHashes(
      words,
      1,
      words.length,
      words.length,
      Number(seed & 0xffffffffn),
      Number(seed >> 32n),
      out,
      null,
    ),
  ).toBe(true);
  return (BigInt(out[1]) << 32n) | BigInt(out[0]);
}

const asWords = (b: Uint8Array): Uint32Array => {
  const w = new Uint32Array(b.length / 4);
  new Uint8Array(w.buffer).set(b);
  return w;
};

/** JS-path results (wasm off) of the same call, as the oracle of the wasm path. */
function jsLocal(
  t: Uint32Array,
  bs: number,
  opts?: Parameters<typeof computeLocalBlockHashes>[2],
): Uint32Array {
  const prev = configureWasmHashing({ enabled: false });
  try {
    return computeLocalBlockHashes(t, bs, opts);
  } finally {
    configureWasmHashing(prev);
  }
}
function jsSeq(local: Uint32Array): Uint32Array {
  const prev = configureWasmHashing({ enabled: false });
  try {
    return computeSequenceHashes(local);
  } finally {
    configureWasmHashing(prev);
  }
}

describe('wasm XXH3 core with explicit seeds', () => {
  it('loads on this host', () => {
    expect(wasmHashingAvailable()).toBe(true);
  });

  it('xxHash sanity vectors whose length is a multiple of 4 (XSUM_XXH3_testdata), seeds 0 and PRIME64', () => {
    // Same buffer and table as xxh3.test.ts: byteGen = PRIME32; b[i] = byteGen >> 56; byteGen *= PRIME64.
    const PRIME64 = 11400714785074694797n;
    const b = new Uint8Array(2240);
    let gen = 2654435761n;
    for (let i = 0; i < b.length; i++) {
      b[i] = Number(gen >> 56n);
      gen = (gen * PRIME64) & M64;
    }
    const table: [number, bigint, bigint][] = [
      [12, 0n, 0xa713daf0dfbb77e7n], // 9..16 path
      [12, PRIME64, 0xe7303e1b2336de0en],
      [24, 0n, 0xa3fe70bf9d3510ebn], // 17..128
      [24, PRIME64, 0x850e80fc35bdd690n],
      [48, 0n, 0x397da259ecba1f11n],
      [48, PRIME64, 0xadc2cbaa44acc616n],
      [80, 0n, 0xbcdefbbb2c47c90an],
      [80, PRIME64, 0xc6dd0cb699532e73n],
      [512, 0n, 0x617e49599013cb6bn], // long: one partial block
      [512, PRIME64, 0x3ce457de14c27708n],
      [2048, 0n, 0xdd59e2c3a5f038e0n], // long: one full block + partial
      [2048, PRIME64, 0x66f81670669ababcn],
      [2240, 0n, 0x6e73a90539cf2948n],
      [2240, PRIME64, 0x757ba8487d1b5247n],
    ];
    for (const [len, seed, want] of table)
      expect(wasmOne(asWords(b.subarray(0, len)), seed), `len ${len} seed ${seed}`).toBe(want);
  });

  it('LLVM xxh3 vectors with length a multiple of 4 (xorshift buffer, seed 0): every length class', () => {
    const a = new Uint8Array(2240);
    let x = 1n;
    for (let i = 0; i < a.length; i++) {
      x ^= (x << 13n) & M64;
      x ^= x >> 7n;
      x ^= (x << 17n) & M64;
      a[i] = Number(x & 0xffn);
    }
    const want: [number, bigint][] = [
      [4, 0xbf65290914e80242n],
      [8, 0xabc1413da6cd0209n],
      [16, 0x7e46916754d7c9b8n],
      [32, 0xf59b59b58c304fd1n],
      [64, 0xfa5271fcce0db1c3n],
      [96, 0x591ee0ddf9c9ccd1n],
      [128, 0x06a146ee9a2da378n],
      [512, 0xcdfa6b6268e3650fn],
      [2048, 0x330ce110cbb79eaen],
      [2240, 0xd61d4d2a94e926a8n],
    ];
    for (const [len, h] of want) expect(wasmOne(asWords(a.subarray(0, len)), 0n), `len ${len}`).toBe(h);
  });

  it('every word count 1..80 and long-path boundaries vs @node-rs/xxhash, random seeds', () => {
    const rng = new Rng(61);
    const big = rng.bytes(4 * 1600);
    // 60/61 words = 240/244 bytes (129..240 vs long), 256/257 = 1024/1028 bytes (a full 1024-byte block).
    const counts = [
      ...Array.from({ length: 80 }, (_, i) => i + 1),
      59,
      60,
      61,
      62,
      255,
      256,
      257,
      272,
      512,
      513,
      1600,
    ];
    for (const count of counts) {
      for (const seed of [0n, 1337n, M64, rng.u64()]) {
        const bytes = big.subarray(0, 4 * count);
        expect(wasmOne(asWords(bytes), seed), `words ${count} seed ${seed}`).toBe(oracle(bytes, seed));
      }
    }
  });

  it('the chain alone equals the oracle chain (LE64(prev) ‖ LE64(local), seed 1337), in place', () => {
    const rng = new Rng(62);
    const local = new Uint32Array(2 * 300);
    for (let i = 0; i < local.length; i++) local[i] = rng.u32();
    local.set([0, 0, 0xffffffff, 0xffffffff], 0);
    const want: bigint[] = [];
    const buf = new Uint8Array(16);
    const dv = new DataView(buf.buffer);
    for (let i = 0; i < 300; i++) {
      const l = (BigInt(local[2 * i + 1]) << 32n) | BigInt(local[2 * i]);
      if (i === 0) want.push(l);
      else {
        dv.setBigUint64(0, want[i - 1], true);
        dv.setBigUint64(8, l, true);
        want.push(oracle(buf, 1337n));
      }
    }
    const res = local.slice();
    expect(wasmSequenceHashes(res, 300, res)).toBe(true);
    expect(pairsToU64s(res)).toEqual(want);
  });
});

describe('wasm path vs JS path (property test)', () => {
  const SIZES = [1, 2, 3, 4, 5, 8, 16, 17, 32, 60, 64, 128];

  function randomName(rng: Rng): string {
    const alphabet = 'abcdefghijklmnopqrstuvwxyz-_/0123456789üé語';
    let s = '';
    for (let i = rng.int(1, 24); i > 0; i--) s += rng.pick([...alphabet]);
    return s;
  }

  it('random token arrays, every block size, random LoRA names and Eagle windows: local, sequence and fused results agree', () => {
    configureWasmHashing({ enabled: true, minBlocks: 1 });
    const rng = new Rng(63);
    for (const bs of SIZES) {
      for (let r = 0; r < 8; r++) {
        const len = rng.int(0, Math.min(bs * 40 + 7, 3000));
        const t = new Uint32Array(len);
        for (let i = 0; i < len; i++) t[i] = rng.bool(0.2) ? rng.u32() : rng.int(0, 200_000);
        const opts = { loraName: rng.bool(0.6) ? randomName(rng) : undefined, isEagle: rng.bool(0.25) };
        const wantLocal = jsLocal(t, bs, opts);
        const wantSeq = jsSeq(wantLocal);
        const label = `bs ${bs} len ${len} lora ${opts.loraName} eagle ${opts.isEagle}`;
        const got = computeLocalBlockHashes(t, bs, opts);
        expect([...got], label).toEqual([...wantLocal]);
        expect([...computeSequenceHashes(got)], label).toEqual([...wantSeq]);
        const local = new Uint32Array(wantLocal.length + 2).fill(9);
        const seq = new Uint32Array(wantLocal.length + 2).fill(9);
        expect(computeBlockAndSequenceHashes(t, bs, opts, local, seq), label).toBe(wantLocal.length / 2);
        expect([...local], label).toEqual([...wantLocal, 9, 9]);
        expect([...seq], label).toEqual([...wantSeq, 9, 9]);
      }
    }
  });

  it('multimodal: plain blocks from wasm, blocks with mm hashes rehashed on JS; results agree', () => {
    configureWasmHashing({ enabled: true, minBlocks: 1 });
    // tokens [1,2,3,4] + mm {42, 7}: docs/protocol.md §2.4 row
    expect(localBlockHashes([1, 2, 3, 4], 4, { mmHashes: [[42n, 7n]] })).toEqual([6295130183325757331n]);
    const rng = new Rng(65);
    for (const bs of SIZES) {
      const n = rng.int(1, 40);
      const t = new Uint32Array(n * bs + rng.int(0, bs - 1));
      for (let i = 0; i < t.length; i++) t[i] = rng.u32();
      const mm = Array.from({ length: n }, () =>
        rng.bool(0.3) ? [rng.u64(), rng.u64()] : rng.bool(0.5) ? [] : undefined,
      );
      const opts = { mmHashes: mm, loraName: rng.bool(0.5) ? randomName(rng) : undefined };
      const want = jsLocal(t, bs, opts);
      expect([...computeLocalBlockHashes(t, bs, opts)], `bs ${bs} n ${n}`).toEqual([...want]);
      const local = new Uint32Array(2 * n);
      const seq = new Uint32Array(2 * n);
      computeBlockAndSequenceHashes(t, bs, opts, local, seq);
      expect([...local], `bs ${bs} n ${n}`).toEqual([...want]);
      expect([...seq], `bs ${bs} n ${n}`).toEqual([...jsSeq(want)]);
    }
  });
});

describe('wasm memory', () => {
  it('grows for a large prompt, then serves smaller ones from the same memory with correct results', () => {
    configureWasmHashing({ enabled: true, minBlocks: 1 });
    const rng = new Rng(64);
    // 300k tokens = 1.2 MB of tokens + 2 x 150 KB of hashes: well past the initial 64 KiB page.
    for (const len of [300_000, 1000, 40_000]) {
      const t = new Uint32Array(len);
      for (let i = 0; i < len; i++) t[i] = rng.u32();
      const local = new Uint32Array(2 * Math.floor(len / 16));
      const seq = new Uint32Array(2 * Math.floor(len / 16));
      computeBlockAndSequenceHashes(t, 16, undefined, local, seq);
      const want = jsLocal(t, 16);
      expect([...local], `len ${len}`).toEqual([...want]);
      expect([...seq], `len ${len}`).toEqual([...jsSeq(want)]);
    }
  });

  it('§2.4 vectors through the wasm path', () => {
    configureWasmHashing({ enabled: true, minBlocks: 1 });
    const t = Array.from({ length: 10 }, (_, i) => i);
    const local = localBlockHashes(t, 4);
    expect(local).toEqual([9143094415614847814n, 12124091508212882195n]);
    expect(sequenceHashes(local)).toEqual([9143094415614847814n, 9510318385840434533n]);
    expect(localBlockHashes([1, 2, 3, 4], 4, { loraName: 'my-lora' })).toEqual([15671544057904749233n]);
  });
});

describe('generated module', () => {
  it('the committed base64 and WAT are what gen-xxh3-wasm.mjs generates (wabt)', () => {
    const gen = fileURLToPath(new URL('./wasm/gen-xxh3-wasm.mjs', import.meta.url));
    // Throws (non-zero exit) when either committed file differs from a fresh compile.
    expect(execFileSync(process.execPath, [gen, '--check'], { encoding: 'utf8' })).toContain('up to date');
  });
});

describe('configureWasmHashing', () => {
  it('returns the previous settings and gates by block count', () => {
    const prev = configureWasmHashing({ enabled: true, minBlocks: 8 });
    expect(useWasm(7)).toBe(false);
    expect(useWasm(8)).toBe(true);
    expect(configureWasmHashing({ enabled: false })).toEqual({ enabled: true, minBlocks: 8 });
    expect(useWasm(100)).toBe(false);
    configureWasmHashing(prev);
    expect(() => configureWasmHashing({ minBlocks: -1 })).toThrow(/minBlocks/);
    expect(() => configureWasmHashing({ minBlocks: 1.5 })).toThrow(/minBlocks/);
  });
});
