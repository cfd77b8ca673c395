import { resolveConfig } from '@kvrouter/config';
import { describe, expect, it } from 'vitest';
import { kvRouterPolicy } from './policy.js';
import { runSimulation } from './simulation.js';
import type { TraceRow } from './trace.js';

const cfg = (...argv: string[]) => resolveConfig('router', ['--router-mode', 'kv', ...argv], {}).config;
const AIC = [
  '--router-prefill-load-model',
  'aic',
  '--aic-backend',
  'vllm',
  '--aic-system',
  'b200_sxm',
  '--aic-model-path',
  'Qwen/Qwen3-0.6B',
];
const ids = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);
const row = (index: number, timestamp: number, hash_ids: number[], output_length: number): TraceRow => ({
  timestamp,
  input_length: hash_ids.length * 64,
  output_length,
  hash_ids,
  index,
});

describe('--router-prefill-load-model aic in the simulator', () => {
  // Trace blocks of 64 tokens = KV blocks; no request shares a block, so every overlap is 0.
  // A: t = 0, 16 384 tokens (256 blocks) -> worker X. The engine needs two 8 192-token passes
  //    (§17: 2 · (4.209989e-7·8192² + 1.518344e-2·8192 + 16.50142) ≈ 338 ms) before A's first token.
  // B: t = 100, 9 024 tokens (141 blocks); C: t = 100, 1 024 tokens (16 blocks).
  // The predictor (Qwen3-0.6B on B200, vLLM) puts A's prefill well under 100 ms, so with aic A's
  // prompt load has fully decayed at t = 100; with none it counts until the first token at ~338 ms.
  // Logits (§8.3, scale 1, bs 64; the `additional_active_blocks` term is equal on both workers):
  //   B, none: X = (16384 + 9024)/64 + 256 = 653,  Y = 9024/64 = 141    -> Y
  //   B, aic:  X = 9024/64 + 256 = 397,            Y = 141              -> Y
  //   C, none: X = (16384 + 1024)/64 + 256 = 527.75, Y = (9024 + 1024)/64 + 141 = 297.75 -> Y
  //   C, aic:  X = 1024/64 + 256 = 272,            Y = 297.75 (B booked at this instant: no decay) -> X
  const rows = [row(0, 0, ids(1000, 256), 4), row(1, 100, ids(2000, 141), 4), row(2, 100, ids(3000, 16), 4)];
  const sim = { numWorkers: 2, traceBlockSize: 64 };

  it('routes by the decayed prefill load: C joins the worker whose old prefill is predicted done', async () => {
    const none = await runSimulation(rows, sim, kvRouterPolicy(cfg()));
    const aic = await runSimulation(rows, sim, kvRouterPolicy(cfg(...AIC)));
    for (const r of [none, aic]) {
      expect(r.requests.status.every((s) => s === 1)).toBe(true);
      expect(r.requests.unit[1]).not.toBe(r.requests.unit[0]);
      // A is still prefilling on the engine when B and C arrive.
      expect(r.requests.firstToken[0]).toBeGreaterThan(300);
    }
    expect(none.requests.unit[2]).toBe(none.requests.unit[1]);
    expect(aic.requests.unit[2]).toBe(aic.requests.unit[0]);
  });

  it('reads a config.json --aic-model-path through the injected reader', async () => {
    const read = (p: string) =>
      p === '/m/config.json'
        ? JSON.stringify({
            hidden_size: 1024,
            num_hidden_layers: 28,
            num_attention_heads: 16,
            num_key_value_heads: 8,
            head_dim: 128,
            intermediate_size: 3072,
            vocab_size: 151936,
          })
        : null;
    const argv = [...AIC.slice(0, -1), '/m'];
    expect(() => kvRouterPolicy(cfg(...argv))).toThrow(
      "--aic-model-path: '/m' is neither a readable config.json",
    );
    const r = await runSimulation(rows, sim, kvRouterPolicy(cfg(...argv), { readText: read }));
    // The same shape as the built-in Qwen3-0.6B, so the same decisions.
    expect(r.requests.unit[2]).toBe(r.requests.unit[0]);
  });

  it('refuses a bad --aic-system before anything runs, naming the flag', () => {
    const argv = AIC.map((a) => (a === 'b200_sxm' ? 'tpu_v5' : a));
    expect(() => kvRouterPolicy(cfg(...argv))).toThrow(
      "--aic-system: unknown system 'tpu_v5' (choose from h100_sxm, h200_sxm, b200_sxm, a100_sxm, l40s)",
    );
  });
});
