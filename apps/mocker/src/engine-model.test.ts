import { describe, expect, it } from 'vitest';
import { resolveConfig } from '@kvrouter/config';
import { TcpRequestClient } from '@kvrouter/runtime';
import type { GenerateItem } from '@kvrouter/protocols';
import { startMocker } from './mocker.js';

describe('mocker: engine-model flags end to end (tcp request plane)', () => {
  it('--engine-type sglang with --reasoning: the stream opens with the reasoning span; a repeat hits at token granularity', async () => {
    const c = resolveConfig(
      'mocker',
      [
        '--model-path',
        'm',
        '--endpoint',
        'dyn://emtest.backend.generate',
        '--speedup-ratio',
        '20',
        '--block-size',
        '16',
        '--num-gpu-blocks-override',
        '256',
        '--engine-type',
        'sglang',
        '--reasoning',
        '{"start_thinking_token_id":151667,"end_thinking_token_id":151668,"thinking_ratio":0.5}',
      ],
      {},
    ).config;
    const m = await startMocker(c, { log: () => {} });
    const client = new TcpRequestClient();
    try {
      const w = m.fleet.workers[0];
      const gen = async (id: string, prompt: number[], max: number): Promise<GenerateItem[]> => {
        const out: GenerateItem[] = [];
        for await (const item of client.stream<GenerateItem>(w.instance.transport, 'generate', {
          request_id: id,
          model: 'm',
          token_ids: prompt,
          stop_conditions: { max_tokens: max },
        }))
          out.push(item);
        return out;
      };
      const prompt = Array.from({ length: 40 }, (_, i) => i + 1);
      const toks = (await gen('a', prompt, 10)).flatMap((i) => i.token_ids);
      // floor(0.5 · 10) = 5: <think> x x x </think> then 5 answer tokens.
      expect(toks).toHaveLength(10);
      expect(toks[0]).toBe(151667);
      expect(toks[4]).toBe(151668);
      expect(toks.slice(5)).not.toContain(151668);
      expect(w.engine.stats().reasoningTokens).toBe(5);
      // The same prompt again: 39 of 40 tokens from the radix cache (a vLLM engine: 2 blocks = 32).
      await gen('b', prompt, 1);
      expect(w.engine.stats().cachedTokens).toBe(39);
    } finally {
      await client.close();
      await m.stop();
    }
  }, 30_000);
});
