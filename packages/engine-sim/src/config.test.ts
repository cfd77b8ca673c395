import { KvrError } from '@kvrouter/protocols';
import { describe, expect, it } from 'vitest';
import { DEFAULT_ENGINE_CONFIG, resolveEngineConfig } from './config.js';

describe('engine config', () => {
  it('defaults are the §17 ones', () => {
    expect(DEFAULT_ENGINE_CONFIG).toEqual({
      numGpuBlocks: 16384,
      blockSize: 64,
      maxNumSeqs: 256,
      maxNumBatchedTokens: 8192,
      enablePrefixCaching: true,
      enableChunkedPrefill: true,
      preemptionMode: 'lifo',
      speedupRatio: 1,
      decodeSpeedupRatio: 1,
      dataParallelSize: 1,
      seed: 0,
      vocabSize: 32000,
      engineType: 'vllm',
      sglangMaxPrefillTokens: 16384,
      reasoning: null,
    });
    expect(Object.isFrozen(DEFAULT_ENGINE_CONFIG)).toBe(true);
    expect(resolveEngineConfig({ blockSize: 16 }).blockSize).toBe(16);
  });

  const cases: [Record<string, unknown>, string][] = [
    [{ numGpuBlocks: 0 }, 'numGpuBlocks'],
    [{ blockSize: 1.5 }, 'blockSize'],
    [{ maxNumSeqs: -1 }, 'maxNumSeqs'],
    [{ maxNumBatchedTokens: '8192' }, 'maxNumBatchedTokens'],
    [{ enablePrefixCaching: 1 }, 'enablePrefixCaching'],
    [{ preemptionMode: 'random' }, 'preemptionMode'],
    [{ speedupRatio: 0 }, 'speedupRatio'],
    [{ decodeSpeedupRatio: Infinity }, 'decodeSpeedupRatio'],
    [{ dataParallelSize: 0 }, 'dataParallelSize'],
    [{ vocabSize: 1 }, 'vocabSize'],
    [{ blockSzie: 64 }, 'blockSzie'],
    [{ engineType: 'trtllm' }, 'engineType'],
    [{ sglangMaxPrefillTokens: 0 }, 'sglangMaxPrefillTokens'],
    [{ reasoning: { startThinkingTokenId: 1, endThinkingTokenId: 2, thinkingRatio: 1.5 } }, 'reasoning'],
    [{ reasoning: { startThinkingTokenId: -1, endThinkingTokenId: 2, thinkingRatio: 0.5 } }, 'reasoning'],
    [{ reasoning: { startThinkingTokenId: 7, endThinkingTokenId: 7, thinkingRatio: 0.5 } }, 'reasoning'],
    [{ reasoning: [1, 2] }, 'reasoning'],
  ];
  it.each(cases)('rejects %o naming the field', (partial, field) => {
    try {
      resolveEngineConfig(partial);
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(KvrError);
      expect((e as KvrError).code).toBe('invalid_engine_config');
      expect((e as KvrError).detail).toEqual({ field });
      expect((e as KvrError).message).toContain(field);
    }
  });
});
