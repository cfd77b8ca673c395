/**
 * Block + sequence hashing of whole prompts (8k and 32k tokens, block sizes 16 and 64):
 * (a) ours: computeLocalBlockHashes + computeSequenceHashes into reused pair arrays;
 * (b) oracle: @node-rs/xxhash (native XXH3) called per block on a per-block view, bigint
 *     results collected, sequence hashes by the oracle too (LE64 ‖ LE64 in a reused buffer).
 * 16-token blocks take the unrolled 64-byte path of computeLocalBlockHashes.
 * Figures: median ns per prompt and per block, ratio b/a (target >= 1.3).
 */
import { computeLocalBlockHashes, computeSequenceHashes, pairsToU64s } from '@kvrouter/protocols';
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

export const suite: Suite = {
  name: 'hashing',
  description: 'local block + sequence hashes per prompt: pure-JS XXH3 vs @node-rs/xxhash per block',
  run(ctx: SuiteContext): Promise<Row[]> {
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
    for (const [len, bs] of cases) {
      const prompts = Array.from({ length: PROMPTS }, () => {
        const t = new Uint32Array(len);
        for (let i = 0; i < len; i++) t[i] = rng.int(0, 200_000);
        return t;
      });
      const n = Math.floor(len / bs);
      const local = new Uint32Array(2 * n);
      const seq = new Uint32Array(2 * n);
      // The comparison is only meaningful if both produce the same hashes.
      const ours = pairsToU64s(computeSequenceHashes(computeLocalBlockHashes(prompts[0], bs, undefined, local), seq));
      const theirs = oracle(prompts[0], bs, pair, pairBytes);
      if (ours.length !== theirs.length || ours.some((v, i) => v !== theirs[i])) {
        throw new Error(`hashing: pure-JS and oracle sequence hashes differ for len=${len} bs=${bs}`);
      }
      const iters = Math.max(4, Math.round((ctx.quick ? 2e6 : 8e6) / len));
      const fa = (i: number) => {
        computeSequenceHashes(computeLocalBlockHashes(prompts[i % PROMPTS], bs, undefined, local), seq);
      };
      const fb = (i: number) => {
        oracle(prompts[i % PROMPTS], bs, pair, pairBytes);
      };
      timeNs(fa, iters);
      timeNs(fb, iters);
      // Interleaved reps: on a shared, noisy machine both sides see the same conditions, and the
      // ratio is taken per rep before the median.
      const ta: number[] = [];
      const tb: number[] = [];
      const ratios: number[] = [];
      for (let r = 0; r < reps; r++) {
        ta.push(timeNs(fa, iters));
        tb.push(timeNs(fb, iters));
        ratios.push(tb[r] / ta[r]);
        ctx.progress(`hashing ${len / 1024}k bs=${bs}`, r + 1, reps);
      }
      const a = median(ta);
      const b = median(tb);
      const label = `${len / 1024}k tokens bs=${bs} (${n} blocks)`;
      rows.push({ name: `ours ${label}`, value: a, unit: 'ns/prompt', extra: { 'ns/block': a / n } });
      rows.push({ name: `@node-rs/xxhash ${label}`, value: b, unit: 'ns/prompt', extra: { 'ns/block': b / n } });
      rows.push({ name: `ratio oracle/ours ${label}`, value: median(ratios), unit: 'x', extra: { min: Math.min(...ratios), target: 1.3 } });
    }
    return Promise.resolve(rows);
  },
};
