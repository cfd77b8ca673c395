import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AicModel, resolveAicModel } from '@kvrouter/aic-model';
import { afterAll, describe, expect, it } from 'vitest';
import { main } from './main.js';

const dir = mkdtempSync(join(tmpdir(), 'replay-engine-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function cli(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await main(
    argv,
    { stdout: { write: (s: string) => (out += s) }, stderr: { write: (s: string) => (err += s) } },
    {},
  );
  return { code, out, err };
}

interface Rep {
  cache: { prompt_tokens: number; cached_tokens: number; hit_rate: number };
  ttft_ms: { n: number; mean: number };
  itl_ms: { mean: number };
  e2e_ms: { mean: number };
  config: { engine: Record<string, unknown>; engineTiming: Record<string, unknown> };
}

let nReports = 0;
async function replay(trace: string, ...flags: string[]): Promise<{ rep: Rep; err: string }> {
  const json = join(dir, `r${nReports++}.json`);
  const r = await cli(
    trace,
    '--num-workers',
    '1',
    '--no-progress',
    '--no-oracle',
    '--report-json',
    json,
    ...flags,
  );
  expect(r.err.replace(/^warning: .*\n/gm, '')).toBe('');
  expect(r.code).toBe(0);
  return { rep: JSON.parse(readFileSync(json, 'utf8')) as Rep, err: r.err };
}

const file = (name: string, text: string): string => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};

// The same 100-token prompt twice, 1 s apart (the first has finished), 64-token trace blocks.
const repeated = file(
  'repeated.jsonl',
  '{"timestamp":0,"input_length":100,"output_length":2,"hash_ids":[1,2]}\n{"timestamp":1000,"input_length":100,"output_length":2,"hash_ids":[1,2]}\n',
);
// One 1000-token prompt (two 512-token trace blocks), 3 output tokens.
const single = file(
  'single.jsonl',
  '{"timestamp":0,"input_length":1000,"output_length":3,"hash_ids":[1,2]}\n',
);

describe('replay engine flags: --engine-type, --sglang-max-prefill-tokens, --reasoning', () => {
  it('--engine-type sglang hits at token granularity where the vLLM flavour hits whole blocks', async () => {
    const base = ['--trace-block-size', '64', '--block-size', '64'];
    const vllm = (await replay(repeated, ...base)).rep;
    // vLLM: at most floor((100 − 1) / 64) = 1 block = 64 tokens of the repeat; 64 / 200 = 0.32.
    expect(vllm.cache).toMatchObject({ prompt_tokens: 200, cached_tokens: 64, hit_rate: 0.32 });
    expect(vllm.config.engine.engineType).toBe('vllm');
    const sgl = (
      await replay(repeated, ...base, '--engine-type', 'sglang', '--sglang-max-prefill-tokens', '4096')
    ).rep;
    // SGLang: every token but the last one (which must yield logits): 99; 99 / 200 = 0.495.
    expect(sgl.cache).toMatchObject({ prompt_tokens: 200, cached_tokens: 99, hit_rate: 0.495 });
    expect(sgl.config.engine).toMatchObject({ engineType: 'sglang', sglangMaxPrefillTokens: 4096 });
  });

  it('--reasoning reaches the engines in the mocker spelling', async () => {
    const { rep } = await replay(
      single,
      '--reasoning',
      '{"start_thinking_token_id": 7, "end_thinking_token_id": 8, "thinking_ratio": 0.5}',
    );
    expect(rep.config.engine.reasoning).toEqual({
      startThinkingTokenId: 7,
      endThinkingTokenId: 8,
      thinkingRatio: 0.5,
    });
  });
});

describe('replay engine flags: pass timing (--planner-profile-data, --aic-perf-model)', () => {
  it('a planner-profile JSON sets TTFT and ITL to the interpolated values', async () => {
    const profile = file(
      'profile.json',
      JSON.stringify({
        prefill_isl: [500, 1500],
        prefill_ttft_ms: [40, 90],
        decode_active_kv_tokens: [0, 1000000],
        decode_context_length: [1, 100000],
        decode_itl: [
          [7, 7],
          [7, 7],
        ],
      }),
    );
    const { rep } = await replay(single, '--planner-profile-data', profile);
    // One prefill pass of all 1000 tokens: 1000 is halfway from 500 to 1500, 40 + 0.5 · (90 − 40) = 65 ms.
    expect(rep.ttft_ms.n).toBe(1);
    expect(rep.ttft_ms.mean).toBeCloseTo(65, 6);
    // Two decode passes of 7 ms each (the grid is flat): ITL 7, E2E 65 + 2 · 7 = 79.
    expect(rep.itl_ms.mean).toBeCloseTo(7, 6);
    expect(rep.e2e_ms.mean).toBeCloseTo(79, 6);
    expect(rep.config.engineTiming).toEqual({ kind: 'profile', path: profile });
  });

  it('reads upstream .npz profiles (deflated members) too', async () => {
    // engine-sim's fixture: prefill_isl [100, 1100], prefill_ttft_ms [20, 70].
    const npz = fileURLToPath(
      new URL('../../../packages/engine-sim/src/testdata/profile-compressed.npz', import.meta.url),
    );
    const { rep } = await replay(single, '--planner-profile-data', npz);
    // 1000 tokens: 20 + (1000 − 100) / 1000 · 50 = 65 ms.
    expect(rep.ttft_ms.mean).toBeCloseTo(65, 6);
  });

  it('--aic-perf-model times passes with the AIC model of --engine-type, --aic-system, --model-path', async () => {
    const model = 'nvidia/Llama-3.1-8B-Instruct-FP8';
    const { rep } = await replay(
      single,
      '--aic-perf-model',
      '--aic-system',
      'h200_sxm',
      '--model-path',
      model,
      '--engine-type',
      'sglang',
    );
    // Wiring check against aic-model's own (separately tested) prediction for one 1000-token prefill.
    const capacity = 16384 * 64;
    const want = new AicModel({ backend: 'sglang', system: 'h200_sxm', model: resolveAicModel(model) })
      .engineTiming(capacity)
      .prefillMs(1000);
    // The report rounds to 3 decimals.
    expect(rep.ttft_ms.mean).toBeCloseTo(want, 2);
    expect(rep.config.engineTiming).toEqual({ kind: 'aic', backend: 'sglang', system: 'h200_sxm', model });
    const { err } = await replay(single, '--aic-perf-model', '--model-path', model);
    expect(err).toContain('warning: --aic-perf-model without --aic-system: modelling h200_sxm');
  });
});

describe('replay engine flags: bad values name the flag (exit 2, the mocker messages)', () => {
  const cases: Array<[string, string[], string]> = [
    [
      'an unknown engine type',
      ['--engine-type', 'trtllm'],
      "argument --engine-type: invalid choice: 'trtllm' (choose from 'vllm', 'sglang')",
    ],
    [
      'a zero prefill budget',
      ['--sglang-max-prefill-tokens', '0'],
      '--sglang-max-prefill-tokens must be >= 1, got 0',
    ],
    [
      'a non-integer prefill budget',
      ['--sglang-max-prefill-tokens', '1.5'],
      '--sglang-max-prefill-tokens must be an integer',
    ],
    ['reasoning that is not JSON', ['--reasoning', '{nope'], 'argument --reasoning: invalid JSON value'],
    ['reasoning with an unknown field', ['--reasoning', '{"ratio": 1}'], '--reasoning: unknown field ratio'],
    [
      'reasoning with equal markers',
      ['--reasoning', '{"start_thinking_token_id": 3, "end_thinking_token_id": 3, "thinking_ratio": 0.2}'],
      '--reasoning: start_thinking_token_id and end_thinking_token_id must differ',
    ],
    [
      'a missing profile file',
      ['--planner-profile-data', '/nonexistent/p.json'],
      '--planner-profile-data /nonexistent/p.json: cannot read the file',
    ],
    [
      'both timing sources',
      ['--planner-profile-data', '/nonexistent/p.json', '--aic-perf-model', '--model-path', 'x'],
      '--aic-perf-model and --planner-profile-data both set pass times; choose one',
    ],
    ['AIC without a model', ['--aic-perf-model'], '--aic-perf-model needs --model-path'],
    [
      'AIC with an unknown model',
      ['--aic-perf-model', '--model-path', 'no/such-model'],
      '--aic-perf-model: --model-path "no/such-model": ',
    ],
  ];
  for (const [what, flags, msg] of cases) {
    it(what, async () => {
      const r = await cli(single, '--no-progress', ...flags);
      expect(r.code).toBe(2);
      expect(r.err).toContain(`error: ${msg}`);
      expect(r.out).toBe('');
    });
  }

  it('a malformed profile names the flag, the file and the field', async () => {
    const p = file('bad-profile.json', JSON.stringify({ prefill_isl: [10, 5], prefill_ttft_ms: [1, 2] }));
    const r = await cli(single, '--no-progress', '--planner-profile-data', p);
    expect(r.code).toBe(2);
    expect(r.err).toContain(
      `error: --planner-profile-data ${p}: prefill_isl[1]: values must increase strictly`,
    );
  });
});
