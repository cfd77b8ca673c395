import { Rng } from '@kvrouter/testkit';
import xxhash from '@node-rs/xxhash';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KvrError } from '../errors.js';
import {
  BASE_SEED,
  type BlockHashOptions,
  chainHashInto,
  computeBlockAndSequenceHashes,
  computeLocalBlockHashes,
  computeSequenceHashes,
  configureWasmHashing,
  extendBlockHashes,
  localBlockHashes,
  loraSeed,
  pairsToU64s,
  sequenceHashOf,
  sequenceHashes,
  u64sToPairs,
  type WasmHashingConfig,
  wasmHashingAvailable,
} from './index.js';

const M64 = (1n << 64n) - 1n;
const oracle = (b: Uint8Array, seed: bigint): bigint => xxhash.xxh3.xxh64(b, seed);

/** Reference built only on the oracle and docs/protocol.md §2.1 (bytes built with DataView, bigint math). */
function refLocal(tokens: ArrayLike<number>, bs: number, opts: BlockHashOptions = {}): bigint[] {
  if (bs === 0) return [];
  const seed =
    opts.loraName !== undefined && opts.loraName !== ''
      ? (1337n + oracle(new TextEncoder().encode(opts.loraName), 0n)) & M64
      : 1337n;
  const eagle = opts.isEagle === true;
  const n = eagle
    ? tokens.length >= 1
      ? Math.floor((tokens.length - 1) / bs)
      : 0
    : Math.floor(tokens.length / bs);
  const width = eagle ? bs + 1 : bs;
  const res: bigint[] = [];
  for (let i = 0; i < n; i++) {
    const mm = [...(opts.mmHashes?.[i] ?? [])].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    const bytes = new Uint8Array(4 * width + 8 * mm.length);
    const dv = new DataView(bytes.buffer);
    for (let j = 0; j < width; j++) dv.setUint32(4 * j, tokens[i * bs + j], true);
    mm.forEach((h, j) => dv.setBigUint64(4 * width + 8 * j, h, true));
    res.push(oracle(bytes, seed));
  }
  return res;
}

function refSeq(local: bigint[]): bigint[] {
  const out: bigint[] = [];
  const buf = new Uint8Array(16);
  const dv = new DataView(buf.buffer);
  for (let i = 0; i < local.length; i++) {
    if (i === 0) out.push(local[0]);
    else {
      dv.setBigUint64(0, out[i - 1], true);
      dv.setBigUint64(8, local[i], true);
      out.push(oracle(buf, 1337n));
    }
  }
  return out;
}

/** The `field` of the KvrError `fn` throws (undefined when it does not throw). */
function fieldOf(fn: () => unknown): unknown {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(KvrError);
    return (e as KvrError).detail?.field;
  }
  return undefined;
}

function randomTokens(rng: Rng, n: number): Uint32Array {
  const t = new Uint32Array(n);
  for (let i = 0; i < n; i++) t[i] = rng.bool(0.1) ? rng.u32() : rng.int(0, 200_000);
  return t;
}

// Every test below runs twice: on the JS path (wasm off) and on the wasm path with its block
// threshold at 1, so every call with at least one block goes through WebAssembly.
describe.each([
  ['JS path', false],
  ['wasm path', true],
])('%s', (_name, wasm) => {
  let prev: WasmHashingConfig;
  beforeAll(() => {
    prev = configureWasmHashing({ enabled: wasm, minBlocks: wasm ? 1 : 8 });
    // The wasm run must not silently fall back to JS.
    if (wasm) expect(wasmHashingAvailable()).toBe(true);
  });
  afterAll(() => {
    configureWasmHashing(prev);
  });

  describe('docs/protocol.md §2.4 vectors', () => {
    it('tokens [1,2,3,4], bs=4', () => {
      expect(localBlockHashes([1, 2, 3, 4], 4)).toEqual([14643705804678351452n]);
    });

    it('tokens 0..9, bs=4: two local hashes (floor(10/4) = 2; tokens 8,9 ignored) and sequence hashes', () => {
      const t = Array.from({ length: 10 }, (_, i) => i);
      const local = localBlockHashes(t, 4);
      expect(local).toEqual([9143094415614847814n, 12124091508212882195n]);
      expect(sequenceHashes(local)).toEqual([9143094415614847814n, 9510318385840434533n]);
      expect(sequenceHashOf(local[0], local[1])).toBe(9510318385840434533n);
    });

    it('LoRA "my-lora": xxh3 seed 0 and the derived seed (12827409268353071524 + 1337 = 12827409268353072861)', () => {
      expect(oracle(new TextEncoder().encode('my-lora'), 0n)).toBe(12827409268353071524n);
      expect(loraSeed('my-lora')).toBe(12827409268353072861n);
      expect(localBlockHashes([1, 2, 3, 4], 4, { loraName: 'my-lora' })).toEqual([15671544057904749233n]);
    });

    it('tokens [1,2,3,4] + mm hashes {42, 7} hashed as 7, 42', () => {
      expect(localBlockHashes([1, 2, 3, 4], 4, { mmHashes: [[42n, 7n]] })).toEqual([6295130183325757331n]);
      expect(localBlockHashes([1, 2, 3, 4], 4, { mmHashes: [[7n, 42n]] })).toEqual([6295130183325757331n]);
    });
  });

  describe('computeLocalBlockHashes vs oracle reference', () => {
    const SIZES = [1, 3, 4, 16, 17, 32, 64, 100, 128, 512];

    it('every block size in use, with odd tails, base seed', () => {
      const rng = new Rng(31);
      for (const bs of SIZES) {
        for (let r = 0; r < 6; r++) {
          const len = r === 0 ? 0 : rng.int(0, Math.min(4 * bs + 7, 2200));
          const t = randomTokens(rng, len);
          const pairs = computeLocalBlockHashes(t, bs);
          // exactly 2 * floor(len / bs) entries
          expect(pairs.length, `bs ${bs} len ${len}`).toBe(2 * Math.floor(len / bs));
          expect(pairsToU64s(pairs), `bs ${bs} len ${len}`).toEqual(refLocal(t, bs));
        }
      }
    });

    it('LoRA names (several, reused and interleaved, including non-ASCII)', () => {
      const rng = new Rng(32);
      const names = ['my-lora', 'adapter-ü-é', 'x', 'tenant/финансы', 'my-lora'];
      for (let r = 0; r < 30; r++) {
        const bs = rng.pick(SIZES);
        const t = randomTokens(rng, rng.int(0, 3 * bs + 5));
        const opts = { loraName: rng.pick(names) };
        expect(localBlockHashes(t, bs, opts), `bs ${bs} lora ${opts.loraName}`).toEqual(
          refLocal(t, bs, opts),
        );
      }
      expect(loraSeed('')).toBe(BASE_SEED);
      expect(localBlockHashes([1, 2, 3, 4], 4, { loraName: '' })).toEqual([14643705804678351452n]);
    });

    it('multimodal hashes on some blocks (unsorted input, duplicates, u64 extremes), entries past the last block ignored', () => {
      const rng = new Rng(33);
      for (let r = 0; r < 40; r++) {
        const bs = rng.pick(SIZES);
        const len = rng.int(bs, 4 * bs + 3);
        const t = randomTokens(rng, len);
        const n = Math.floor(len / bs);
        const mm: (bigint[] | undefined)[] = [];
        for (let i = 0; i < n + 2; i++) {
          if (rng.bool(0.4)) mm.push(undefined);
          else if (rng.bool(0.2)) mm.push([]);
          else {
            const k = rng.int(1, 4);
            const hs = Array.from({ length: k }, () => rng.pick([0n, M64, rng.u64(), 7n]));
            if (rng.bool(0.3)) hs.push(hs[0]);
            mm.push(hs);
          }
        }
        const opts = { mmHashes: mm, loraName: rng.bool(0.3) ? 'my-lora' : undefined };
        expect(localBlockHashes(t, bs, opts), `bs ${bs} len ${len}`).toEqual(refLocal(t, bs, opts));
      }
    });

    it('Eagle: windows of bs+1 tokens advancing by bs, floor((len-1)/bs) blocks', () => {
      // tokens 0..9, bs=4: floor(9/4) = 2 windows, [0..4] and [4..8]
      const t = Array.from({ length: 10 }, (_, i) => i);
      const e = localBlockHashes(t, 4, { isEagle: true });
      expect(e.length).toBe(2);
      expect(e).toEqual(refLocal(t, 4, { isEagle: true }));
      // len 8, bs 4: floor(7/4) = 1 (the second window would need token 8)
      expect(localBlockHashes(t.slice(0, 8), 4, { isEagle: true }).length).toBe(1);
      // len 9, bs 4: floor(8/4) = 2
      expect(localBlockHashes(t.slice(0, 9), 4, { isEagle: true }).length).toBe(2);
      expect(localBlockHashes([], 4, { isEagle: true })).toEqual([]);
      const rng = new Rng(34);
      for (let r = 0; r < 30; r++) {
        const bs = rng.pick(SIZES);
        const tt = randomTokens(rng, rng.int(0, 3 * bs + 5));
        const opts = {
          isEagle: true,
          mmHashes: rng.bool(0.3) ? [[rng.u64()], undefined, [1n, 2n]] : undefined,
        };
        expect(localBlockHashes(tt, bs, opts), `bs ${bs} len ${tt.length}`).toEqual(refLocal(tt, bs, opts));
      }
    });

    it('bs = 0 yields no hashes; number[] and Uint32Array inputs agree', () => {
      expect(computeLocalBlockHashes([1, 2, 3], 0).length).toBe(0);
      expect(localBlockHashes(new Uint32Array([1, 2, 3, 4]), 4)).toEqual(localBlockHashes([1, 2, 3, 4], 4));
      expect(localBlockHashes([0xffffffff, 0, 0x80000000, 1], 2)).toEqual(
        refLocal([0xffffffff, 0, 0x80000000, 1], 2),
      );
    });

    it('writes into `out` when it is large enough and returns exactly 2*nBlocks entries', () => {
      const t = Array.from({ length: 10 }, (_, i) => i);
      const out = new Uint32Array(8).fill(99);
      const r = computeLocalBlockHashes(t, 4, undefined, out);
      expect(r.length).toBe(4);
      expect(r.buffer).toBe(out.buffer);
      expect(pairsToU64s(r)).toEqual([9143094415614847814n, 12124091508212882195n]);
      expect([...out.subarray(4)]).toEqual([99, 99, 99, 99]);
      const small = new Uint32Array(2);
      const r2 = computeLocalBlockHashes(t, 4, undefined, small);
      expect(r2.buffer).not.toBe(small.buffer);
      expect(r2.length).toBe(4);
    });

    it('bad input: typed error naming the field, and `out` untouched', () => {
      const out = new Uint32Array(8).fill(5);
      const cases: [() => unknown, string][] = [
        [() => computeLocalBlockHashes([1, 2, 3, 4], -1, undefined, out), 'blockSize'],
        [() => computeLocalBlockHashes([1, 2, 3, 4], 1.5, undefined, out), 'blockSize'],
        [() => computeLocalBlockHashes([1, 2, -3, 4], 2, undefined, out), 'tokens[2]'],
        [() => computeLocalBlockHashes([1, 2, 2 ** 32, 4], 2, undefined, out), 'tokens[2]'],
        [
          () => computeLocalBlockHashes([1, 2, 3, 4], 2, { mmHashes: [undefined, [1n, -1n]] }, out),
          'mmHashes[1][1]',
        ],
        [() => computeLocalBlockHashes([1, 2, 3, 4], 2, { mmHashes: [[1n << 64n]] }, out), 'mmHashes[0][0]'],
        [
          () => computeLocalBlockHashes([1, 2, 3, 4], 2, { mmHashes: [[3 as unknown as bigint]] }, out),
          'mmHashes[0][0]',
        ],
        [
          () => computeLocalBlockHashes([1, 2, 3, 4], 2, { loraName: 5 as unknown as string }, out),
          'loraName',
        ],
      ];
      for (const [f, field] of cases) {
        let err: unknown;
        try {
          f();
        } catch (e) {
          err = e;
        }
        expect(err, field).toBeInstanceOf(KvrError);
        expect((err as KvrError).code).toBe('invalid_argument');
        expect((err as KvrError).detail).toEqual({ field });
        expect((err as KvrError).message).toContain(field);
      }
      expect([...out]).toEqual([5, 5, 5, 5, 5, 5, 5, 5]);
    });
  });

  describe('sequence hashes', () => {
    it('computeSequenceHashes vs the oracle chain on long random prompts', () => {
      const rng = new Rng(41);
      for (const [len, bs] of [
        [8192, 16],
        [4096, 64],
        [3000, 17],
        [1, 1],
      ] as const) {
        const t = randomTokens(rng, len);
        const local = computeLocalBlockHashes(t, bs);
        const seq = pairsToU64s(computeSequenceHashes(local));
        expect(seq).toEqual(refSeq(refLocal(t, bs)));
      }
    });

    it('chain step on edge and random u64 values', () => {
      const rng = new Rng(42);
      const edge = [0n, 1n, M64, 1n << 63n, 0xffffffffn, 0xffffffff00000000n];
      const vals = [...edge, ...Array.from({ length: 300 }, () => rng.u64())];
      const buf = new Uint8Array(16);
      const dv = new DataView(buf.buffer);
      const out = new Uint32Array(2);
      for (let i = 0; i < vals.length; i++) {
        const a = vals[i];
        const b = vals[(i * 7 + 3) % vals.length];
        dv.setBigUint64(0, a, true);
        dv.setBigUint64(8, b, true);
        const want = oracle(buf, 1337n);
        expect(sequenceHashOf(a, b)).toBe(want);
        chainHashInto(
          Number(a & 0xffffffffn),
          Number(a >> 32n),
          Number(b & 0xffffffffn),
          Number(b >> 32n),
          out,
          0,
        );
        expect((BigInt(out[1]) << 32n) | BigInt(out[0])).toBe(want);
      }
    });

    it('in place (out aliases local), empty input, odd length rejected', () => {
      const rng = new Rng(43);
      const local = computeLocalBlockHashes(randomTokens(rng, 640), 16);
      const want = pairsToU64s(computeSequenceHashes(local));
      const inPlace = computeSequenceHashes(local, local);
      expect(inPlace).toBe(local);
      expect(pairsToU64s(inPlace)).toEqual(want);
      expect(computeSequenceHashes(new Uint32Array(0)).length).toBe(0);
      expect(sequenceHashes([])).toEqual([]);
      expect(() => computeSequenceHashes(new Uint32Array(3))).toThrow(KvrError);
    });
  });

  describe('computeBlockAndSequenceHashes (fused)', () => {
    it('16-token blocks (unrolled path) equal the oracle: base seed, LoRA, tails, tokens above 2^31', () => {
      const rng = new Rng(44);
      for (const [len, lora] of [
        [32768, undefined],
        [1000, 'my-lora'],
        [16, ''],
        [15, undefined],
        [0, undefined],
      ] as const) {
        const t = randomTokens(rng, len);
        for (let i = 0; i < len; i += 97) t[i] = 0xffffffff - i; // high words exercise the u32 products
        const n = Math.floor(len / 16);
        const local = new Uint32Array(2 * n + 6).fill(7);
        const seq = new Uint32Array(2 * n + 6).fill(7);
        const opts = lora === undefined ? undefined : { loraName: lora };
        expect(computeBlockAndSequenceHashes(t, 16, opts, local, seq)).toBe(n);
        const wantLocal = refLocal(t, 16, opts);
        expect(pairsToU64s(local.subarray(0, 2 * n))).toEqual(wantLocal);
        expect(pairsToU64s(seq.subarray(0, 2 * n))).toEqual(refSeq(wantLocal));
        // Nothing written past the blocks.
        expect([...local.subarray(2 * n)]).toEqual([7, 7, 7, 7, 7, 7]);
        expect([...seq.subarray(2 * n)]).toEqual([7, 7, 7, 7, 7, 7]);
      }
    });

    it('other block sizes, Eagle and multimodal blocks go through the general path with the same results', () => {
      const rng = new Rng(45);
      const t = randomTokens(rng, 1100);
      const cases: [number, BlockHashOptions | undefined][] = [
        [64, undefined],
        [32, { loraName: 'x' }],
        [16, { isEagle: true }],
        [15, { isEagle: true }], // 16-token windows advancing by 15: the unrolled path with a stride
        [16, { loraName: 'y' }],
        [16, { mmHashes: [undefined, [42n, 7n]] }],
        [17, undefined],
      ];
      for (const [bs, opts] of cases) {
        const local = new Uint32Array(2 * 1100);
        const seq = new Uint32Array(2 * 1100);
        const n = computeBlockAndSequenceHashes(t, bs, opts, local, seq);
        const wantLocal = refLocal(t, bs, opts);
        expect(n).toBe(wantLocal.length);
        expect(pairsToU64s(local.subarray(0, 2 * n))).toEqual(wantLocal);
        expect(pairsToU64s(seq.subarray(0, 2 * n))).toEqual(refSeq(wantLocal));
      }
    });

    it('buffers too small or bad block size: typed error naming the field, buffers untouched', () => {
      const t = new Uint32Array(64);
      const small = new Uint32Array(7).fill(5);
      const ok = new Uint32Array(8).fill(5);
      // 64 tokens / 16 = 4 blocks → 8 words each.
      expect(fieldOf(() => computeBlockAndSequenceHashes(t, 16, undefined, small, ok))).toBe('local');
      expect(fieldOf(() => computeBlockAndSequenceHashes(t, 16, undefined, ok, small))).toBe('seq');
      expect(fieldOf(() => computeBlockAndSequenceHashes(t, 1.5, undefined, ok, ok))).toBe('blockSize');
      expect([...small]).toEqual([5, 5, 5, 5, 5, 5, 5]);
      expect([...ok]).toEqual([5, 5, 5, 5, 5, 5, 5, 5]);
    });
  });
});

describe("extendBlockHashes (an earlier turn's chain, extended)", () => {
  it('the blocks after `from` hashed and chained onto the kept ones equal the oracle, for every cut', () => {
    const rng = new Rng(46);
    for (const bs of [16, 5]) {
      // Turn 1: 700 tokens; turn 2 resends them and adds 333 (a cut inside a block, not on one).
      const t2 = randomTokens(rng, 1033);
      for (let i = 0; i < t2.length; i += 89) t2[i] = 0xfffffff0 + (i & 7);
      const t1 = t2.slice(0, 700);
      const n1 = Math.floor(700 / bs);
      const n2 = Math.floor(1033 / bs);
      const wantLocal = refLocal(t2, bs);
      const wantSeq = refSeq(wantLocal);
      for (const from of [0, 1, n1 >> 1, n1]) {
        const local = new Uint32Array(2 * n2 + 4).fill(9);
        const seq = new Uint32Array(2 * n2 + 4).fill(9);
        // The kept chain: turn 1's first `from` blocks, as the router keeps them.
        computeBlockAndSequenceHashes(t1, bs, undefined, local, seq);
        local.fill(9, 2 * from);
        seq.fill(9, 2 * from);
        expect(extendBlockHashes(t2, bs, from, local, seq)).toBe(n2);
        expect(pairsToU64s(local.subarray(0, 2 * n2))).toEqual(wantLocal);
        expect(pairsToU64s(seq.subarray(0, 2 * n2))).toEqual(wantSeq);
        expect([...local.subarray(2 * n2)]).toEqual([9, 9, 9, 9]);
      }
    }
  });

  it('from = every block leaves the hashes as they are; bad from / buffers / block size name the field', () => {
    const t = randomTokens(new Rng(47), 64);
    const local = new Uint32Array(8).fill(3);
    const seq = new Uint32Array(8).fill(4);
    expect(extendBlockHashes(t, 16, 4, local, seq)).toBe(4);
    expect([...local, ...seq]).toEqual([3, 3, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4]);
    expect(fieldOf(() => extendBlockHashes(t, 16, 5, local, seq))).toBe('from');
    expect(fieldOf(() => extendBlockHashes(t, 16, -1, local, seq))).toBe('from');
    expect(fieldOf(() => extendBlockHashes(t, 16, 1.5, local, seq))).toBe('from');
    expect(fieldOf(() => extendBlockHashes(t, 0, 0, local, seq))).toBe('blockSize');
    expect(fieldOf(() => extendBlockHashes(t, 16, 1, new Uint32Array(7), seq))).toBe('local');
    expect(fieldOf(() => extendBlockHashes(t, 16, 1, local, new Uint32Array(6)))).toBe('seq');
    expect([...local, ...seq]).toEqual([3, 3, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4]);
  });
});

describe('pair conversions', () => {
  it('round-trip and layout (out[2i] = low word)', () => {
    const v = [0n, 1n, M64, 0x0123456789abcdefn];
    const p = u64sToPairs(v);
    expect([...p.subarray(6)]).toEqual([0x89abcdef, 0x01234567]);
    expect(pairsToU64s(p)).toEqual(v);
    expect(() => u64sToPairs([-1n])).toThrow(KvrError);
    expect(() => pairsToU64s(new Uint32Array(1))).toThrow(KvrError);
  });
});
