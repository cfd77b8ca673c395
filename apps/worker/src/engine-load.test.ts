import { describe, expect, it } from 'vitest';
import { parseKvUsage, usedBlocks } from './engine-load.js';

describe('engine KV usage from /metrics', () => {
  it('reads the usage fraction per engine label, new and old metric names', () => {
    const text = [
      '# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.',
      '# TYPE vllm:kv_cache_usage_perc gauge',
      'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25',
      'vllm:kv_cache_usage_perc{model_name="m",engine="1"} 1.0',
      'vllm:num_requests_running{engine="0",model_name="m"} 3.0',
    ].join('\n');
    expect([...parseKvUsage(text)]).toEqual([
      [0, 0.25],
      [1, 1],
    ]);
    expect([...parseKvUsage('vllm:gpu_cache_usage_perc 0.5\n')]).toEqual([[0, 0.5]]);
    expect([...parseKvUsage('vllm:kv_cache_usage_perc{engine="0"} NaN\nother 1\n')]).toEqual([]);
  });

  it('blocks = round(fraction × total): 0.25 × 9000 = 2250; 1/3 × 10 = 3.33 → 3', () => {
    expect(usedBlocks(0.25, 9000)).toBe(2250);
    expect(usedBlocks(1 / 3, 10)).toBe(3);
  });
});
