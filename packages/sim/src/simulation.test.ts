import { resolveConfig } from '@kvrouter/config';
import { describe, expect, it } from 'vitest';
import { kvRouterPolicy, roundRobinPolicy } from './policy.js';
import { buildReport, reportJson } from './report.js';
import { runSimulation } from './simulation.js';
import { generateSynthetic } from './synthetic.js';
import type { TraceRow } from './trace.js';

const router = (...argv: string[]) => kvRouterPolicy(resolveConfig('router', argv, {}).config);
const row = (
  index: number,
  timestamp: number,
  hash_ids: number[],
  input_length: number,
  output_length: number,
  extra: Partial<TraceRow> = {},
): TraceRow => ({
  timestamp,
  input_length,
  output_length,
  hash_ids,
  index,
  ...extra,
});
// Trace blocks of 64 tokens = KV blocks of 64 tokens (the engine default block size).
const base = { traceBlockSize: 64 };

// §17 prefill polynomial for x = 64 new tokens, the whole first pass (nothing decodes yet):
// 4.209989e-7·64² + 1.518344e-2·64 + 16.50142 = 0.0017244 + 0.9717402 + 16.50142 = 17.4748846 ms.
const PREFILL_64 = 17.4748846;

describe('runSimulation', () => {
  it('times a lone request: TTFT = dispatch delay + one prefill pass', async () => {
    const res = await runSimulation(
      [row(0, 0, [1], 64, 3)],
      { ...base, numWorkers: 1, dispatchDelayMs: 5 },
      roundRobinPolicy,
    );
    const c = res.requests;
    expect(c.status[0]).toBe(1);
    expect(c.tokens[0]).toBe(3);
    expect(c.routed[0]).toBe(0);
    expect(c.firstToken[0]! - c.arrival[0]!).toBeCloseTo(5 + PREFILL_64, 5);
    expect(c.finish[0]).toBeGreaterThan(c.firstToken[0]!);
    const r = buildReport(res, null);
    expect(r.ttft_ms.mean).toBe(22.475);
    expect(r.requests).toMatchObject({ total: 1, finished: 1, rejected: 0, unfinished: 0 });
    // One worker: its busy time is the whole run after dispatch, so the CV is 0.
    expect(r.load_balance!.busy_cv).toBe(0);
    expect(r.cache.hit_rate).toBe(0);
  });

  it('lets the kv router send a repeat to the worker that cached it, once the events arrived', async () => {
    // A = 3 blocks at t = 0 (done after ~50 ms); B = the same prompt at t = 1000. The engine can hit
    // at most floor((192 − 1)/64) = 2 blocks = 128 tokens; the router sees all 3 blocks.
    const rows = [row(0, 0, [1, 2, 3], 192, 2), row(1, 1000, [1, 2, 3], 192, 2)];
    const kv = await runSimulation(rows, { ...base, numWorkers: 2 }, router('--router-mode', 'kv'));
    expect(kv.requests.unit[1]).toBe(kv.requests.unit[0]);
    expect(kv.requests.routerOverlapBlocks[1]).toBe(3);
    expect(kv.requests.cachedTokens[1]).toBe(128);
    expect(buildReport(kv, null).cache.hit_rate).toBeCloseTo(128 / 384, 6);
    // Events delayed past B's arrival: the router has not seen A's blocks yet.
    const late = await runSimulation(
      rows,
      { ...base, numWorkers: 2, eventDelayMs: 2000 },
      router('--router-mode', 'kv'),
    );
    expect(late.requests.routerOverlapBlocks[1]).toBe(0);
    // Round-robin alternates workers, so the repeat misses.
    const rr = await runSimulation(rows, { ...base, numWorkers: 2 }, router('--router-mode', 'round-robin'));
    expect(rr.requests.unit[1]).not.toBe(rr.requests.unit[0]);
    expect(rr.requests.cachedTokens[1]).toBe(0);
  });

  it('releases a session turn when the previous one ends, plus its delay over the speedup ratio', async () => {
    const rows = [
      row(0, 0, [1], 64, 4, { session_id: 's' }),
      row(1, 0, [1, 2], 128, 2, { session_id: 's', delay: 300 }),
      row(2, 5000, [9], 64, 1, { session_id: 's', delay: 0 }), // its timestamp is later than the release
    ];
    const res = await runSimulation(
      rows,
      { ...base, numWorkers: 1, arrivalSpeedupRatio: 2 },
      roundRobinPolicy,
    );
    const c = res.requests;
    expect(c.arrival[1]).toBeCloseTo(c.finish[0]! + 150, 9);
    expect(c.arrival[2]).toBe(2500); // 5000 / 2
  });

  it('counts an engine rejection and carries on with the session', async () => {
    // 8 GPU blocks of 64 tokens cannot hold a 640-token prompt: engine-sim rejects it at enqueue.
    const rows = [row(0, 0, [1], 640, 2, { session_id: 'a' }), row(1, 0, [2], 64, 2, { session_id: 'a' })];
    const res = await runSimulation(
      rows,
      { ...base, numWorkers: 1, engine: { numGpuBlocks: 8 } },
      router('--router-mode', 'kv'),
    );
    const r = buildReport(res, null);
    expect(r.requests).toMatchObject({ total: 2, finished: 1, rejected: 1, unfinished: 0 });
    expect(Object.keys(r.requests.rejections)).toEqual(['request_too_large']);
    expect(res.requests.status[1]).toBe(1);
  });

  it('is deterministic: same rows, config and seed give byte-identical JSON', async () => {
    const rows = generateSynthetic(
      {
        sessions: 40,
        turns: { kind: 'uniform', min: 2, max: 4 },
        systemPrompts: 2,
        systemPromptTokens: 1024,
        userTokens: { kind: 'lognormal', median: 400, sigma: 0.5, min: 16, max: 2000 },
        outputTokens: { kind: 'uniform', min: 4, max: 40 },
        sessionRate: 20,
        thinkTimeMs: { kind: 'exp', mean: 100 },
      },
      7,
    );
    const run = async (seed: number) => {
      const res = await runSimulation(
        rows,
        { numWorkers: 4, seed, eventDelayMs: 20, dispatchDelayMs: 1, engine: { numGpuBlocks: 512 } },
        router('--router-mode', 'kv', '--router-predicted-ttl-secs', '5', '--router-temperature', '0.5'),
      );
      return reportJson(buildReport(res, null));
    };
    const a = await run(3);
    expect(await run(3)).toBe(a);
    const r = JSON.parse(a) as { requests: { finished: number }; cache: { hit_rate: number } };
    expect(r.requests.finished).toBe(rows.length);
    expect(r.cache.hit_rate).toBeGreaterThan(0);
    // The router's softmax draws come from the seed: another seed routes differently.
    expect(await run(4)).not.toBe(a);
  });

  it('rejects bad configuration naming the field', async () => {
    await expect(runSimulation([], { numWorkers: 0 }, roundRobinPolicy)).rejects.toThrow(/numWorkers/);
    await expect(runSimulation([], { eventDelayMs: -1 }, roundRobinPolicy)).rejects.toThrow(/eventDelayMs/);
    await expect(runSimulation([], { engine: { seed: 1 } as never }, roundRobinPolicy)).rejects.toThrow(
      /engine.seed/,
    );
    await expect(runSimulation([], { engine: { blockSize: 0 } }, roundRobinPolicy)).rejects.toThrow(
      /blockSize/,
    );
  });
});

describe('kvRouterPolicy', () => {
  it('refuses what the simulator cannot honour', async () => {
    expect(() => router('--router-mode', 'kv', '--use-remote-indexer')).toThrow(/--use-remote-indexer/);
    expect(() =>
      router('--router-mode', 'kv', '--no-router-kv-events', '--router-approximate-cache-policy', 'lru'),
    ).toThrow(/--router-approximate-cache-policy/);
    const mismatch = router('--router-mode', 'kv', '--kv-cache-block-size', '32');
    await expect(runSimulation([], { numWorkers: 1 }, mismatch)).rejects.toThrow(
      /--kv-cache-block-size 32 differs/,
    );
  });

  it('runs approximate mode from its own decisions', async () => {
    const rows = [row(0, 0, [1, 2, 3], 192, 2), row(1, 1000, [1, 2, 3], 192, 2)];
    const res = await runSimulation(
      rows,
      { ...base, numWorkers: 2 },
      router('--router-mode', 'kv', '--no-router-kv-events'),
    );
    // The recorded decision for A predicts all 3 blocks on A's worker.
    expect(res.requests.routerOverlapBlocks[1]).toBe(3);
    expect(res.requests.unit[1]).toBe(res.requests.unit[0]);
  });
});
