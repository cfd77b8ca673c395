/**
 * Block + sequence hashing of whole prompts (8k and 32k tokens, block sizes 16 and 64):
 * (a) JS: computeLocalBlockHashes + computeSequenceHashes into reused pair arrays, wasm off
 *     (16-token blocks take the unrolled 64-byte path);
 * (w) wasm: the same two calls with the WebAssembly path on (the default), and the fused
 *     computeBlockAndSequenceHashes; local-only and sequence-only timings of both paths too;
 * (b) oracle: @node-rs/xxhash (native XXH3) called per block on a per-block view, bigint
 *     results collected, sequence hashes by the oracle too (LE64 ‖ LE64 in a reused buffer).
 * Figures: median ns per prompt and per block; ratios per rep, then the median: oracle/JS
 * (target >= 1.3), JS/wasm for local+seq, fused, local only and sequence only.
 */
import {
  computeBlockAndSequenceHashes,
  computeLocalBlockHashes,
  computeSequenceHashes,
  configureWasmHashing,
  pairsToU64s,
  wasmHashingAvailable,
} from '@kvrouter/protocols';
import { Rng } from '@kvrouter/testkit';
import xxhash from '@node-rs/xxhash';
import type { Row, Suite, SuiteContext } from '../harness.js';

const SEED = 1337n;
const PROMPTS = 8;

function oracle(tokens: Uint32Array, bs: number, pair: BigUint64Array, pairBytes: Uint8Array): bigint[] {
  const bytes = new Uint8Array(tokens.buffer, tokens.byteOffset, tokens.byteLength);
  const n = Math.floor(tokens.length / bs);
  const step = 4 * bs;
  const seq: bigint[] = new Array<bigint>(n);
  for (let i = 0; i < n; i++) {
    const local = xxhash.xxh3.xxh64(bytes.subarray(i * step, (i + 1) * step), SEED);
    if (i === 0) seq[0] = local;
    else {
      pair[0] = seq[i - 1];
      pair[1] = local;
      seq[i] = xxhash.xxh3.xxh64(pairBytes, SEED);
    }
  }
  return seq;
}

/** Mean ns per call of `fn` over `iters` calls. */
function timeNs(fn: (i: number) => void, iters: number): number {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < iters; i++) fn(i);
  return Number(process.hrtime.bigint() - t0) / iters;
}

const median = (v: number[]): number => [...v].sort((x, y) => x - y)[Math.floor(v.length / 2)];

type Side = { name: string; wasm: boolean; fn: (i: number) => void };

export const suite: Suite = {
  name: 'hashing',
  description:
    'local block + sequence hashes per prompt: JS XXH3 vs WebAssembly XXH3 vs @node-rs/xxhash per block',
  run(ctx: SuiteContext): Promise<Row[]> {
    if (!wasmHashingAvailable()) throw new Error('hashing: the WebAssembly path did not load on this host');
    const rng = new Rng(42);
    const rows: Row[] = [];
    const reps = ctx.quick ? 5 : 15;
    const pair = new BigUint64Array(2);
    const pairBytes = new Uint8Array(pair.buffer);
    const cases = [
      [8192, 16],
      [8192, 64],
      [32768, 16],
      [32768, 64],
    ] as const;
    const defaults = configureWasmHashing({});
    try {
      for (const [len, bs] of cases) {
        const prompts = Array.from({ length: PROMPTS }, () => {
          const t = new Uint32Array(len);
          for (let i = 0; i < len; i++) t[i] = rng.int(0, 200_000);
          return t;
        });
        const n = Math.floor(len / bs);
        const local = new Uint32Array(2 * n);
        const seq = new Uint32Array(2 * n);
        // Pre-computed local hashes of every prompt, for the sequence-only timings.
        const locals = prompts.map((p) => computeLocalBlockHashes(p, bs));
        // The comparison is only meaningful if every side produces the same hashes.
        const theirs = oracle(prompts[0], bs, pair, pairBytes);
        for (const wasm of [false, true]) {
          configureWasmHashing({ enabled: wasm });
          const ours = pairsToU64s(
            computeSequenceHashes(computeLocalBlockHashes(prompts[0], bs, undefined, local), seq),
          );
          computeBlockAndSequenceHashes(prompts[0], bs, undefined, local, seq);
          const fused = pairsToU64s(seq);
          if (ours.length !== theirs.length || ours.some((v, i) => v !== theirs[i] || v !== fused[i])) {
            throw new Error(
              `hashing: ${wasm ? 'wasm' : 'JS'} and oracle sequence hashes differ for len=${len} bs=${bs}`,
            );
          }
        }
        const iters = Math.max(4, Math.round((ctx.quick ? 2e6 : 8e6) / len));
        const both = (i: number) => {
          computeSequenceHashes(computeLocalBlockHashes(prompts[i % PROMPTS], bs, undefined, local), seq);
        };
        const sides: Side[] = [
          { name: 'JS', wasm: false, fn: both },
          { name: 'wasm', wasm: true, fn: both },
          {
            name: 'wasm fused',
            wasm: true,
            fn: (i) => computeBlockAndSequenceHashes(prompts[i % PROMPTS], bs, undefined, local, seq),
          },
          {
            name: 'JS local only',
            wasm: false,
            fn: (i) => computeLocalBlockHashes(prompts[i % PROMPTS], bs, undefined, local),
          },
          {
            name: 'wasm local only',
            wasm: true,
            fn: (i) => computeLocalBlockHashes(prompts[i % PROMPTS], bs, undefined, local),
          },
          { name: 'JS seq only', wasm: false, fn: (i) => computeSequenceHashes(locals[i % PROMPTS], seq) },
          { name: 'wasm seq only', wasm: true, fn: (i) => computeSequenceHashes(locals[i % PROMPTS], seq) },
          {
            name: '@node-rs/xxhash',
            wasm: false,
            fn: (i) => oracle(prompts[i % PROMPTS], bs, pair, pairBytes),
          },
        ];
        const run = (s: Side): number => {
          configureWasmHashing({ enabled: s.wasm });
          return timeNs(s.fn, iters);
        };
        for (const s of sides) run(s); // warm-up
        // Interleaved reps: on a shared, noisy machine every side sees the same conditions, and
        // ratios are taken per rep before the median.
        const t = sides.map(() => [] as number[]);
        for (let r = 0; r < reps; r++) {
          sides.forEach((s, k) => t[k].push(run(s)));
          ctx.progress(`hashing ${len / 1024}k bs=${bs}`, r + 1, reps);
        }
        const label = `${len / 1024}k tokens bs=${bs} (${n} blocks)`;
        sides.forEach((s, k) => {
          const v = median(t[k]);
          rows.push({
            name: `${s.name} ${label}`,
            value: v,
            unit: 'ns/prompt',
            extra: { 'ns/block': v / n },
          });
        });
        const ratio = (num: number, den: number, name: string, target?: number) => {
          const rs = t[num].map((v, r) => v / t[den][r]);
          rows.push({
            name: `ratio ${name} ${label}`,
            value: median(rs),
            unit: 'x',
            extra: target === undefined ? { min: Math.min(...rs) } : { min: Math.min(...rs), target },
          });
        };
        ratio(7, 0, 'oracle/JS', 1.3);
        ratio(0, 1, 'JS/wasm');
        ratio(0, 2, 'JS/wasm fused');
        ratio(3, 4, 'JS/wasm local only');
        ratio(5, 6, 'JS/wasm seq only');
      }
    } finally {
      configureWasmHashing(defaults);
    }
    return Promise.resolve(rows);
  },
};
