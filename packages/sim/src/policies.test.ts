/**
 * The issue-19 router knobs assembled as the apps assemble them (planRouter) and driven by the
 * simulator: power-of-two, --agentic, --ttft-aware.
 */
import { resolveConfig } from '@kvrouter/config';
import { describe, expect, it } from 'vitest';
import { kvRouterPolicy } from './policy.js';
import { runSimulation } from './simulation.js';
import type { TraceRow } from './trace.js';

const rows: TraceRow[] = Array.from({ length: 6 }, (_, index) => ({
  timestamp: index * 1000,
  input_length: 128,
  output_length: 2,
  hash_ids: [index % 2 === 0 ? 1 : 2, 10 + index],
  index,
}));
const run = (...argv: string[]) =>
  runSimulation(
    rows,
    { numWorkers: 3, traceBlockSize: 64 },
    kvRouterPolicy(resolveConfig('router', argv, {}).config),
  );

describe('issue-19 modes and presets through the simulator', () => {
  it('power-of-two serves every request without booking load (a non-kv mode)', async () => {
    const res = await run('--router-mode', 'power-of-two');
    expect(res.policy).toBe('power-of-two');
    expect([...res.requests.status]).toEqual([1, 1, 1, 1, 1, 1]);
    // Every request arrives after the previous one finished: in-flight counts are 0, so the
    // first draw always wins and no worker sees a cache-aware choice.
    expect(res.requests.routerOverlapBlocks.every((b) => b === 0)).toBe(true);
  });

  it('--agentic and --ttft-aware run kv mode; the ttft run is labelled as such', async () => {
    const a = await run('--agentic');
    expect(a.policy).toBe('kv');
    const t = await run('--ttft-aware');
    expect(t.policy).toBe('kv (ttft)');
    // Alternate rows share their first 64-token block with the row two before: from the third row
    // on, both policies send each to the worker that holds it (1 block of overlap expected).
    for (const r of [a, t]) expect([...r.requests.routerOverlapBlocks.subarray(2)]).toEqual([1, 1, 1, 1]);
  });
});
