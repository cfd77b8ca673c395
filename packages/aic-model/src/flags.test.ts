import { describe, expect, it } from 'vitest';
import { aicModelFromFlags, resolveAicModel } from './flags.js';

const base = { aicBackend: 'vllm', aicSystem: 'h200_sxm', aicModelPath: 'nvidia/Llama-3.1-8B-Instruct-FP8' };

describe('aicModelFromFlags', () => {
  it('builds from the seed example (vllm, h200_sxm, nvidia/Llama-3.1-8B-Instruct-FP8)', () => {
    const m = aicModelFromFlags(base);
    expect([m.backend.id, m.system.id, m.model.id, m.tp]).toEqual([
      'vllm',
      'h200_sxm',
      'nvidia/Llama-3.1-8B-Instruct-FP8',
      1,
    ]);
    expect(m.backendVersion).toBe('0.10');
  });

  it('names the missing required flags, only those, in table order', () => {
    expect(() => aicModelFromFlags({ aicBackend: null, aicSystem: null, aicModelPath: null })).toThrow(
      '--router-prefill-load-model=aic requires --aic-backend, --aic-system, --aic-model-path',
    );
    expect(() => aicModelFromFlags({ ...base, aicSystem: null })).toThrow(
      /^--router-prefill-load-model=aic requires --aic-system$/,
    );
  });

  it('passes the parallel sizes through to the model checks', () => {
    expect(() =>
      aicModelFromFlags({ ...base, aicModelPath: 'Qwen/Qwen3-30B-A3B', aicTpSize: 2, aicMoeEpSize: 4 }),
    ).toThrow('(got 2 * 1 != 1 * 4)');
    const m = aicModelFromFlags({
      ...base,
      aicModelPath: 'Qwen/Qwen3-30B-A3B',
      aicTpSize: 2,
      aicAttentionDpSize: 2,
      aicMoeEpSize: 4,
    });
    expect([m.moeTp, m.moeEp, m.attentionDp]).toEqual([1, 4, 2]);
  });
});

describe('resolveAicModel', () => {
  const files: Record<string, string> = {
    '/models/tiny/config.json': JSON.stringify({
      hidden_size: 512,
      num_hidden_layers: 2,
      num_attention_heads: 8,
      intermediate_size: 1024,
      vocab_size: 1000,
    }),
    '/models/broken/config.json': '{ not json',
    // A local checkout named like a built-in id wins over the built-in.
    'Qwen/Qwen3-32B/config.json': JSON.stringify({
      hidden_size: 256,
      num_hidden_layers: 1,
      num_attention_heads: 2,
      intermediate_size: 512,
      vocab_size: 100,
    }),
  };
  const read = (p: string) => files[p] ?? null;

  it('reads <dir>/config.json or a .json path through the injected reader', () => {
    expect(resolveAicModel('/models/tiny', read).hidden).toBe(512);
    expect(resolveAicModel('/models/tiny/', read).hidden).toBe(512);
    expect(resolveAicModel('/models/tiny/config.json', read).hidden).toBe(512);
    expect(resolveAicModel('Qwen/Qwen3-32B', read).hidden).toBe(256);
    expect(resolveAicModel('Qwen/Qwen3-32B').hidden).toBe(5120);
  });

  it('errors name the flag: bad JSON, and neither a file nor a built-in', () => {
    expect(() => resolveAicModel('/models/broken', read)).toThrow(
      /^--aic-model-path: \/models\/broken\/config\.json is not valid JSON/,
    );
    expect(() => resolveAicModel('/nowhere', read)).toThrow(
      "--aic-model-path: '/nowhere' is neither a readable config.json (/nowhere/config.json) nor a built-in model id (meta-llama/Llama-3.1-8B-Instruct,",
    );
  });
});
