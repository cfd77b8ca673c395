import { describe, expect, it } from 'vitest';
import { builtinModel, BUILTIN_MODEL_IDS, parseHfConfig, totalParams } from './models.js';

const B = (id: string) => builtinModel(id)!;

describe('built-in configs', () => {
  it('parameter counts match the model cards (within 1%)', () => {
    // Llama-3.1-8B: per layer 4096·4096·2 + 4096·1024·2 = 41.9M attention + 3·4096·14336 = 176.2M MLP;
    // 32 layers = 6.98B + 2·128256·4096 = 1.05B embeddings -> 8.03B (card: 8.03B).
    const cases: [string, number, boolean][] = [
      ['meta-llama/Llama-3.1-8B-Instruct', 8.03e9, false],
      ['meta-llama/Llama-3.1-70B-Instruct', 70.6e9, false],
      ['Qwen/Qwen3-32B', 32.8e9, false],
      ['Qwen/Qwen3-8B', 8.2e9, false],
      ['Qwen/Qwen3-0.6B', 0.6e9, true],
      ['Qwen/Qwen3-30B-A3B', 30.5e9, false],
      ['deepseek-ai/DeepSeek-V3', 671e9, false],
    ];
    for (const [id, card, tied] of cases) {
      const p = totalParams(B(id), tied);
      expect(Math.abs(p / card - 1), `${id}: ${p}`).toBeLessThan(0.01);
    }
  });

  it('FP8 checkpoints have 1-byte weights, BF16 ones 2', () => {
    expect(B('nvidia/Llama-3.1-8B-Instruct-FP8').weights).toBe('fp8');
    expect(B('nvidia/Llama-3.1-8B-Instruct-FP8').weightBytes).toBe(1);
    expect(B('meta-llama/Llama-3.1-8B-Instruct').weightBytes).toBe(2);
    expect(B('deepseek-ai/DeepSeek-V3').weights).toBe('fp8');
  });

  it('ids match case-insensitively and without the org', () => {
    expect(builtinModel('qwen/qwen3-32b')?.id).toBe('Qwen/Qwen3-32B');
    expect(builtinModel('Qwen3-32B')?.id).toBe('Qwen/Qwen3-32B');
    expect(builtinModel('Llama-3.1-8B')?.id).toBe('meta-llama/Llama-3.1-8B');
    expect(builtinModel('not/a-model')).toBeNull();
    expect(BUILTIN_MODEL_IDS).toContain('nvidia/Llama-3.1-8B-Instruct-FP8');
  });

  it('MoE and MLA layouts', () => {
    const q = B('Qwen/Qwen3-30B-A3B');
    // 48 sparse layers, 128 experts of 3·2048·768 = 4 718 592 parameters, top-8, no shared expert.
    expect(q.moe).toEqual({ layers: 48, experts: 128, topK: 8, expertParams: 4718592, sharedParams: 0 });
    const d = B('deepseek-ai/DeepSeek-V3');
    // first_k_dense_replace 3 of 61 layers; 1 shared expert of moe_intermediate 2048.
    expect(d.moe?.layers).toBe(58);
    expect(d.moe?.sharedParams).toBe(3 * 7168 * 2048);
    // MLA caches the 512-wide latent plus the 64-wide rope key; TP does not split it.
    expect(d.kvElemsPerToken).toBe(576);
    expect(d.kvSplitsByTp).toBe(false);
    // 2·128·(128 + 64 + 128) FLOPs per (query, key) pair.
    expect(d.attnFlopsPerPair).toBe(81920);
  });
});

describe('parseHfConfig', () => {
  const base = {
    hidden_size: 2048,
    num_hidden_layers: 4,
    num_attention_heads: 16,
    intermediate_size: 8192,
    vocab_size: 32000,
  };

  it('defaults kv heads to the heads and head_dim to hidden / heads (GQA off)', () => {
    const m = parseHfConfig(base, 'x');
    expect(m.numKvHeads).toBe(16);
    // head_dim 128: K and V of 16 heads.
    expect(m.kvElemsPerToken).toBe(2 * 16 * 128);
    expect(m.weights).toBe('bf16');
  });

  it('missing and bad fields are named', () => {
    const { hidden_size: _h, ...noHidden } = base;
    expect(() => parseHfConfig(noHidden, 'x')).toThrow(
      "--aic-model-path: x: config.json field 'hidden_size' is missing",
    );
    expect(() => parseHfConfig({ ...base, num_hidden_layers: 0 }, 'x')).toThrow(
      "config.json field 'num_hidden_layers' must be a positive integer, got 0",
    );
    expect(() => parseHfConfig({ ...base, num_key_value_heads: 3 }, 'x')).toThrow(
      "'num_key_value_heads' (3) must divide num_attention_heads (16)",
    );
    expect(() => parseHfConfig([], 'x')).toThrow('config.json must be a JSON object');
    expect(() => parseHfConfig({ ...base, torch_dtype: 'int8' }, 'x')).toThrow(
      "'torch_dtype' is not one of bfloat16, float16, float32",
    );
    expect(() =>
      parseHfConfig({ ...base, quantization_config: { quant_method: 'bitsandbytes' } }, 'x'),
    ).toThrow("unsupported quant_method 'bitsandbytes'");
  });

  it('recognises FP8 and 4-bit quantization configs', () => {
    expect(parseHfConfig({ ...base, quantization_config: { quant_method: 'fp8' } }).weights).toBe('fp8');
    const ct = {
      quant_method: 'compressed-tensors',
      config_groups: { g: { weights: { num_bits: 8, type: 'float' } } },
    };
    expect(parseHfConfig({ ...base, quantization_config: ct }).weights).toBe('fp8');
    expect(parseHfConfig({ ...base, quantization_config: { quant_method: 'awq' } }).weightBytes).toBe(0.5);
  });

  it('Qwen-MoE sparse-step and MLP-only layers', () => {
    // 4 layers, step 2: layers 1 and 3 are sparse ((i+1) % 2 == 0); layer 3 forced dense -> 1 MoE layer.
    const m = parseHfConfig({
      ...base,
      num_experts: 8,
      num_experts_per_tok: 2,
      decoder_sparse_step: 2,
      mlp_only_layers: [3],
    });
    expect(m.moe?.layers).toBe(1);
    expect(() => parseHfConfig({ ...base, num_experts: 8, num_experts_per_tok: 9 })).toThrow(
      "'num_experts_per_tok' (9) exceeds the number of experts (8)",
    );
  });
});
