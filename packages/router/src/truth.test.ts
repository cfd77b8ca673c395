import { VirtualClock } from '@kvrouter/protocols';
import { RadixIndexer } from '@kvrouter/radix-indexer';
import { describe, expect, it } from 'vitest';
import { KvRouter } from './router.js';
import { storeEvent, toks, w } from './test-fixtures.js';
import { DEFAULT_TRUTH_THRESHOLDS, TRUTH_INDEX_POLL_MS, TruthMonitor } from './truth.js';

const BS = 16;

/** A monitor over workers 1..n with a settable per-worker index size. */
function monitor(n: number, sizes: Map<string, number> | null = new Map()) {
  const flips: [bigint, boolean][] = [];
  const m = new TruthMonitor({ blockSize: BS, treeSizes: sizes ? () => sizes : null }, (id, on) =>
    flips.push([id, on]),
  );
  for (let i = 1; i <= n; i++) m.addWorker(BigInt(i));
  return { m, flips };
}

const state = (m: TruthMonitor, id: number) => m.report().workers.find((x) => x.workerId === BigInt(id))!;

describe('TruthMonitor', () => {
  it('drift: the error beyond one block per prompt token, a mean over the first samples', () => {
    const sizes = new Map([['1:0', 10]]);
    const { m, flips } = monitor(1, sizes);
    // isl 160, predicted 0, engine 96: (96 − 16) / 160 = 0.5 per request.
    for (let i = 0; i < 7; i++) m.observe(1n, 0, 96, 160, i);
    expect(state(m, 1).drift).toBeCloseTo(0.5, 12);
    expect(state(m, 1).state).toBe('converging');
    expect(flips).toEqual([]);
    // The 8th comparison (minSamples) with drift 0.5 >= 0.35: load-only.
    m.observe(1n, 0, 96, 160, 7);
    expect(flips).toEqual([[1n, true]]);
    expect(state(m, 1)).toMatchObject({ state: 'load_only', reason: 'drift', samples: 8 });
    expect(m.report().mode).toBe('fallback');
    // Agreement again: the 9th sample weighs 1/9 (0.5 → 0.5·8/9), later ones 1/10 (×0.9 each), so
    // after k exact comparisons drift = 0.5·(8/9)·0.9^(k−1): 0.155 at k = 11, 0.139 < 0.15 at k = 12.
    for (let k = 1; k <= 11; k++) m.observe(1n, 96, 96, 160, 100 + k);
    expect(state(m, 1).drift).toBeCloseTo(0.5 * (8 / 9) * 0.9 ** 10, 12);
    expect(flips).toEqual([[1n, true]]);
    m.observe(1n, 96, 96, 160, 200);
    expect(flips).toEqual([
      [1n, true],
      [1n, false],
    ]);
    expect(state(m, 1).state).toBe('ok');
  });

  it('one block of difference (vLLM recomputes the last prompt token) is no error', () => {
    const { m } = monitor(
      2,
      new Map([
        ['1:0', 3],
        ['2:0', 3],
      ]),
    );
    for (let i = 0; i < 8; i++) m.observe(1n, 96, 80, 100, i);
    for (let i = 0; i < 7; i++) m.observe(2n, 48, 48, 100, i);
    // 15 checks: never exact while converging.
    expect(m.report()).toMatchObject({ mode: 'degraded', reasons: ['converging: 15/16 requests checked'] });
    m.observe(2n, 48, 64, 100, 9);
    expect(m.report()).toMatchObject({ mode: 'exact', reasons: [], samples: 16 });
    expect(state(m, 1).drift).toBe(0);
  });

  it('a report within the prefix active requests were computing is no error; beyond it or below the index is', () => {
    const sizes = new Map([
      ['1:0', 10],
      ['2:0', 10],
      ['3:0', 10],
    ]);
    const { m, flips } = monitor(3, sizes);
    for (let i = 0; i < 8; i++) {
      // Index 0 tokens, active requests computing 8 blocks (128 tokens), engine 128: no error
      // (without the bound: (128 − 16) / 160 = 0.7).
      m.observe(1n, 0, 128, 160, i, 128);
      // Active prefix 96 tokens, engine 144: (144 − 96 − 16) / 160 = 0.2 per request.
      m.observe(2n, 0, 144, 160, i, 96);
      // Engine below the index (evicted): (64 − 0 − 16) / 160 = 0.3, whatever the upper bound.
      m.observe(3n, 64, 0, 160, i, 128);
    }
    expect(state(m, 1)).toMatchObject({ state: 'ok', drift: 0, samples: 8 });
    expect(state(m, 2).state).toBe('drifting');
    expect(state(m, 2).drift).toBeCloseTo(0.2, 12);
    expect(state(m, 3).state).toBe('drifting');
    expect(state(m, 3).drift).toBeCloseTo(0.3, 12);
    expect(flips).toEqual([]);
    expect(m.report()).toMatchObject({ mode: 'degraded', reasons: ['2 worker(s) drifting'] });
  });

  it('a worker the index holds nothing for is silent after 8 requests (5 s after the first), and recovers once its events arrive', () => {
    const sizes = new Map([
      ['1:0', 0],
      ['2:0', 40],
    ]);
    const { m, flips } = monitor(2, sizes);
    for (let i = 0; i < 16; i++) m.observe(2n, 32, 32, 64, i);
    for (let i = 0; i < 7; i++) m.observe(1n, 0, 0, 64, i);
    expect(flips).toEqual([]);
    // The 8th request, but the first one is only 8 ms old: a pause in delivery, not yet silence.
    m.observe(1n, 0, 0, 64, 8);
    expect(flips).toEqual([]);
    m.evaluate(DEFAULT_TRUTH_THRESHOLDS.silentMinMs - 1);
    expect(flips).toEqual([]);
    m.evaluate(DEFAULT_TRUTH_THRESHOLDS.silentMinMs);
    expect(flips).toEqual([[1n, true]]);
    expect(m.report()).toMatchObject({ mode: 'degraded' });
    expect(m.report().reasons).toContain('worker 1: no KV events from it reach the index');
    // Events arrive: after the next poll the worker gathers fresh comparisons, still load-only.
    sizes.set('1:0', 4);
    const t1 = DEFAULT_TRUTH_THRESHOLDS.silentMinMs + TRUTH_INDEX_POLL_MS;
    m.evaluate(t1);
    expect(state(m, 1)).toMatchObject({ state: 'load_only', samples: 0, indexBlocks: 4 });
    for (let i = 0; i < 7; i++) m.observe(1n, 32, 32, 64, t1 + i);
    expect(flips).toHaveLength(1);
    m.observe(1n, 32, 32, 64, t1 + 8);
    expect(flips).toEqual([
      [1n, true],
      [1n, false],
    ]);
    expect(m.report().mode).toBe('exact');
  });

  it('a worker checked a few times once and never since stops holding the mode back', () => {
    const { m } = monitor(
      2,
      new Map([
        ['1:0', 5],
        ['2:0', 5],
      ]),
    );
    m.observe(2n, 32, 32, 64, 0);
    m.observe(2n, 32, 32, 64, 1);
    // Worker 2 has 2 checks (< 8): converging while it was checked within the router's last 32.
    for (let i = 0; i < 31; i++) m.observe(1n, 32, 32, 64, 2 + i);
    expect(m.report()).toMatchObject({
      mode: 'degraded',
      reasons: ['converging: 1 worker(s) under 8 checks'],
    });
    // 33 checks in all, worker 2's last was check 2: 33 − 2 = 31 < 32, still converging. The 34th
    // check makes it 32 old: no longer judged.
    m.observe(1n, 32, 32, 64, 40);
    expect(m.report()).toMatchObject({ mode: 'exact', reasons: [] });
    expect(m.report().workers.find((x) => x.workerId === 2n)!.state).toBe('converging');
  });

  it('the time rule: one request, then 30 s without events', () => {
    const { m, flips } = monitor(1, new Map([['1:0', 0]]));
    m.observe(1n, 0, 0, 64, 1000);
    expect(m.evaluate(1000 + DEFAULT_TRUTH_THRESHOLDS.silentAfterMs - 1).workers[0]!.state).toBe(
      'converging',
    );
    m.evaluate(1000 + DEFAULT_TRUTH_THRESHOLDS.silentAfterMs);
    expect(flips).toEqual([[1n, true]]);
  });

  it('an index that never applied an event: every worker load-only after 16 requests and 5 s (fallback)', () => {
    const { m, flips } = monitor(8, new Map());
    // 15 requests over 8 workers: at most 2 each, so no worker is silent on its own yet.
    for (let i = 0; i < 15; i++) m.observe(BigInt((i % 8) + 1), 0, 0, 64, i);
    expect(flips).toEqual([]);
    expect(m.report().mode).toBe('degraded');
    m.observe(1n, 0, 0, 64, 15);
    m.evaluate(4999);
    expect(flips).toEqual([]);
    // 16 requests, the first 5 s ago: every worker at once (the poll of the frontend, or a request).
    m.evaluate(5000);
    expect(flips.filter(([, on]) => on)).toHaveLength(8);
    const r = m.report();
    expect(r.mode).toBe('fallback');
    expect(r.workers.every((x) => x.reason === 'index_empty')).toBe(true);
    expect(m.loadOnlyWorkers).toBe(8);
  });

  it('prompts shorter than a block say nothing about silence; a remote index is never silent', () => {
    const a = monitor(1, new Map());
    for (let i = 0; i < 50; i++) a.m.observe(1n, 0, 0, BS - 1, i);
    expect(a.flips).toEqual([]);
    const b = monitor(1, null);
    for (let i = 0; i < 50; i++) b.m.observe(1n, 0, 0, 64, i);
    b.m.evaluate(1e9);
    expect(b.flips).toEqual([]);
    expect(b.m.report().mode).toBe('exact');
  });

  it('rejects bad thresholds naming the field; forgets departed workers', () => {
    expect(
      () =>
        new TruthMonitor({ blockSize: BS, treeSizes: null, thresholds: { driftFallback: 0.1 } }, () => {}),
    ).toThrow(/truth.driftFallback/);
    expect(
      () => new TruthMonitor({ blockSize: BS, treeSizes: null, thresholds: { minSamples: 0 } }, () => {}),
    ).toThrow(/truth.minSamples/);
    const { m } = monitor(3);
    m.removeWorker(2n);
    expect(m.report().workers.map((x) => x.workerId)).toEqual([1n, 3n]);
  });
});

describe('KvRouter with the truth check', () => {
  function makeRouter(truth?: false) {
    const clock = new VirtualClock(0);
    const indexer = new RadixIndexer();
    let r = 0;
    const router = new KvRouter({
      blockSize: BS,
      policy: { mode: 'kv', cost: { temperature: 0 } },
      deps: { clock, random: () => (r = (r + 0.37) % 1), indexer },
      ...(truth === false ? { truth } : {}),
    });
    router.addWorker({ workerId: 1n, dpStart: 0, dpSize: 1, totalKvBlocks: 1000 });
    router.addWorker({ workerId: 2n, dpStart: 0, dpSize: 1, totalKvBlocks: 1000 });
    return { router, indexer, clock };
  }

  it('a load-only worker is scored with overlap 0; the decision keeps the index overlap', async () => {
    const { router, indexer } = makeRouter();
    const prompt = toks(1, 160);
    indexer.applyEvent(storeEvent(w(1), prompt, BS, 8));
    const d0 = await router.route({ requestId: 'a', tokens: prompt });
    expect(d0).toMatchObject({ workerId: 1n, overlapBlocks: 8, indexOverlapBlocks: 8, cachedTokens: 128 });
    router.free('a');
    // The engine keeps reporting nothing cached: (128 − 16) / 160 = 0.7 per request.
    for (let i = 0; i < 8; i++) router.observeEngineCached(d0, 0, 160);
    expect(router.truth!.report().workers[0]).toMatchObject({ state: 'load_only', reason: 'drift' });
    const d1 = await router.route({ requestId: 'b', tokens: prompt });
    expect(d1.overlapBlocks).toBe(0);
    expect(d1.cachedTokens).toBe(0);
    // Equal loads, no overlap credit for worker 1: the candidates tie and either may win, but the
    // index's answer for the chosen rank is still reported.
    expect(d1.indexOverlapBlocks).toBe(d1.workerId === 1n ? 8 : 0);
    router.free('b');
  });

  it('a prompt an active request on the same worker is prefilling: the engine may count it cached', async () => {
    const clock = new VirtualClock(0);
    const indexer = new RadixIndexer();
    const router = new KvRouter({
      blockSize: BS,
      policy: { mode: 'kv', cost: { temperature: 0 } },
      deps: { clock, random: () => 0.5, indexer },
    });
    router.addWorker({ workerId: 1n, dpStart: 0, dpSize: 1, totalKvBlocks: 1000 });
    // The index holds another prompt of worker 1 (not silent), none of this one.
    indexer.applyEvent(storeEvent(w(1), toks(9, 160), BS, 10));
    const prompt = toks(1, 160);
    const a = await router.route({ requestId: 'a', tokens: prompt });
    // 'a' still active (prefilling): 'b' with the same 10-block prompt comes while the index knows nothing.
    const b = await router.route({ requestId: 'b', tokens: prompt });
    expect(a).toMatchObject({ workerId: 1n, indexOverlapBlocks: 0, inflightPrefixBlocks: 0 });
    expect(b).toMatchObject({ workerId: 1n, indexOverlapBlocks: 0, inflightPrefixBlocks: 10 });
    // The engine admits 'b' after 'a' prefilled: 9 blocks cached (144, the last token recomputed).
    for (let i = 0; i < 16; i++) router.observeEngineCached(b, 144, 160);
    expect(router.truth!.report()).toMatchObject({ mode: 'exact', reasons: [], samples: 16 });
    // The same report for 'a' (nothing active when it was routed) is the index's fault:
    // (144 − 16) / 160 = 0.8 per request, each weighing 1/10 past 10 samples: drift 0.8·(1 − 0.9^k)
    // after k of them, 0.3276 at k = 5 (drifting), 0.3748 >= 0.35 at k = 6 (load-only).
    for (let k = 1; k <= 5; k++) router.observeEngineCached(a, 144, 160);
    expect(router.truth!.report().workers[0]).toMatchObject({ state: 'drifting' });
    expect(router.truth!.report().workers[0]!.drift).toBeCloseTo(0.8 * (1 - 0.9 ** 5), 12);
    router.observeEngineCached(a, 144, 160);
    expect(router.truth!.report()).toMatchObject({ mode: 'fallback' });
    expect(router.truth!.report().workers[0]).toMatchObject({ state: 'load_only', reason: 'drift' });
    router.free('a');
    router.free('b');
  });

  it('truth: false turns the check off', () => {
    expect(makeRouter(false).router.truth).toBeNull();
  });
});
