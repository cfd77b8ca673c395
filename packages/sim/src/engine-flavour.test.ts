import { describe, expect, it } from 'vitest';
import { roundRobinPolicy } from './policy.js';
import { runSimulation } from './simulation.js';
import type { TraceRow } from './trace.js';

const row = (
  index: number,
  timestamp: number,
  hash_ids: number[],
  input_length: number,
  output_length: number,
): TraceRow => ({
  timestamp,
  input_length,
  output_length,
  hash_ids,
  index,
});

describe('runSimulation: engine flavour and timing', () => {
  // The same 64-token prompt twice, 1 s apart, on one worker with 64-token blocks.
  const rows = [row(0, 0, [1], 64, 2), row(1, 1000, [1], 64, 2)];
  const base = { traceBlockSize: 64, numWorkers: 1 };

  it('sglang engines hit at token granularity: the repeat reuses 63 of 64 tokens (vLLM: floor(63 / 64) = 0 blocks)', async () => {
    const sgl = await runSimulation(rows, { ...base, engine: { engineType: 'sglang' } }, roundRobinPolicy);
    expect(sgl.requests.cachedTokens[1]).toBe(63);
    expect(sgl.requests.tokens[1]).toBe(2);
    const vllm = await runSimulation(rows, base, roundRobinPolicy);
    expect(vllm.requests.cachedTokens[1]).toBe(0);
  });

  it('takes the engines pass timing from the engineTiming hook', async () => {
    const res = await runSimulation([rows[0]], { ...base, dispatchDelayMs: 5 }, roundRobinPolicy, {
      engineTiming: { prefillMs: () => 10, decodeMs: () => 3 },
    });
    const c = res.requests;
    // dispatch 5 + one 10 ms prefill pass; the second token after one 3 ms decode pass.
    expect(c.firstToken[0]! - c.arrival[0]!).toBeCloseTo(15, 9);
    expect(c.finish[0]! - c.firstToken[0]!).toBeCloseTo(3, 9);
  });
});
