/**
 * Tokenizer throughput on the committed corpus (packages/tokenizer/fixtures/corpus: prose, code,
 * JSON, 13 languages, emoji, chat transcripts with special tokens; ~130k tokens per family), per
 * family (Qwen3, Llama 3.1, DeepSeek V3, gpt-oss tokenizer.json), single thread, one file per
 * `encode(text, add_special_tokens=False)` call:
 * - fast: @kvrouter/tokenizer (warm: its word cache filled by an earlier pass; cold: a fresh
 *   pipeline with an empty cache per pass);
 * - native: the `tokenizers` npm package (Hugging Face's Rust core through N-API; its encode is
 *   async, awaited one call at a time, so one libuv thread does the work; CPU time is process time);
 * - hf-js: @huggingface/tokenizers (the frontend's fallback path).
 * Figures: median tokens/s over passes (wall), tokens per CPU-second, load time, and the ratio
 * fast/native (target >= 5). Every pass also checks fast ids == native ids.
 */
import fs from 'node:fs';
import * as hfTokenizers from '@huggingface/tokenizers';
import { compileTokenizer, type FastTokenizer } from '@kvrouter/tokenizer';
import {
  corpusFiles,
  FAMILIES,
  readCorpus,
  readTokenizerJson,
  tokenizerJsonPath,
} from '@kvrouter/tokenizer/testing';
import { Tokenizer as NativeTokenizer } from 'tokenizers';
import type { Row, Suite, SuiteContext } from '../harness.js';

interface HfApi {
  encode(text: string, opts: { add_special_tokens: boolean }): { ids: number[] };
}
const HfTokenizer = (hfTokenizers as unknown as { Tokenizer: new (json: object, config: object) => HfApi })
  .Tokenizer;

const median = (v: number[]): number => [...v].sort((x, y) => x - y)[Math.floor(v.length / 2)]!;

interface Pass {
  wallS: number;
  cpuS: number;
}

async function pass(fn: () => Promise<void> | void): Promise<Pass> {
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  await fn();
  const wallS = Number(process.hrtime.bigint() - t0) / 1e9;
  const c = process.cpuUsage(c0);
  return { wallS, cpuS: (c.user + c.system) / 1e6 };
}

function sameIds(a: ArrayLike<number>, b: ArrayLike<number>): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

export const suite: Suite = {
  name: 'tokenizer',
  description:
    'tokens/s per tokenizer family on the committed corpus: @kvrouter/tokenizer vs tokenizers (native) vs @huggingface/tokenizers, single thread',
  async run(ctx: SuiteContext): Promise<Row[]> {
    const rows: Row[] = [];
    const files = corpusFiles();
    const texts = files.map(readCorpus);
    const chars = texts.reduce((s, t) => s + t.length, 0);
    const passes = ctx.quick ? 3 : 7;
    const families = ctx.quick ? FAMILIES.slice(0, 1) : FAMILIES;
    for (const fam of families) {
      const json = readTokenizerJson(fam);
      let t0 = performance.now();
      const fast: FastTokenizer = compileTokenizer(json);
      const fastLoadMs = performance.now() - t0;
      t0 = performance.now();
      const native = NativeTokenizer.fromFile(tokenizerJsonPath(fam));
      const nativeLoadMs = performance.now() - t0;
      const config = JSON.parse(
        fs.readFileSync(tokenizerJsonPath(fam).replace(/tokenizer\.json$/, 'tokenizer_config.json'), 'utf8'),
      ) as object;
      t0 = performance.now();
      const hf = new HfTokenizer(json, config);
      const hfLoadMs = performance.now() - t0;

      const want: number[][] = [];
      for (const t of texts) want.push((await native.encode(t, null, { addSpecialTokens: false })).getIds());
      const tokens = want.reduce((s, w) => s + w.length, 0);
      let mismatches = 0;

      const runs: Record<string, Pass[]> = { 'fast warm': [], 'fast cold': [], native: [], 'hf-js': [] };
      // A first pass fills the warm pipeline's cache.
      for (const t of texts) fast.encode(t);
      for (let p = 0; p < passes; p++) {
        ctx.progress(`${fam.name} pass`, p, passes);
        runs['fast warm']!.push(
          await pass(() => {
            for (let i = 0; i < texts.length; i++)
              if (!sameIds(fast.encode(texts[i]!), want[i]!)) mismatches++;
          }),
        );
        const cold = fast.withOptions({});
        runs['fast cold']!.push(
          await pass(() => {
            for (const t of texts) cold.encode(t);
          }),
        );
        runs.native!.push(
          await pass(async () => {
            for (const t of texts) await native.encode(t, null, { addSpecialTokens: false });
          }),
        );
        if (p < Math.min(passes, 3))
          runs['hf-js']!.push(
            await pass(() => {
              for (const t of texts) hf.encode(t, { add_special_tokens: false });
            }),
          );
      }
      ctx.progress(`${fam.name} pass`, passes, passes);
      const tps: Record<string, number> = {};
      for (const [name, ps] of Object.entries(runs)) {
        tps[name] = tokens / median(ps.map((x) => x.wallS));
        const cpu = tokens / median(ps.map((x) => x.cpuS));
        const load = name.startsWith('fast') ? fastLoadMs : name === 'native' ? nativeLoadMs : hfLoadMs;
        rows.push({
          name: `${fam.name} ${name}`,
          value: Math.round(tps[name]!),
          unit: 'tokens/s',
          extra: {
            'Mtok/cpu-s': +(cpu / 1e6).toFixed(2),
            'ms/8k tok': +((8192 / tps[name]!) * 1000).toFixed(2),
            'load ms': Math.round(load),
            passes: ps.length,
            ...(name.startsWith('fast')
              ? {
                  'x native': +(tps[name]! / tps.native!).toFixed(2),
                  pretok: fast.preTokenizerKind,
                  mismatches,
                }
              : {}),
          },
        });
      }
      // Ratios once the native figure exists.
      for (const r of rows)
        if (r.name.startsWith(`${fam.name} fast`)) r.extra!['x native'] = +(r.value / tps.native!).toFixed(2);
      rows.push({
        name: `${fam.name} corpus`,
        value: tokens,
        unit: 'tokens',
        extra: { files: files.length, chars, 'fast/hf-js': +(tps['fast warm']! / tps['hf-js']!).toFixed(2) },
      });
    }
    return rows;
  },
};
