import { describe, expect, it } from 'vitest';
import { KvrError, parseJson, type Nvext, type RoutingConstraints } from '@kvrouter/protocols';
import { RadixIndexer } from '@kvrouter/radix-indexer';
import { VirtualClock } from '@kvrouter/protocols';
import { KvRouter } from './router.js';
import { cat, harness, storeEvent, toks, w, type TestOptions } from './test-fixtures.js';
import type { RouterOverhead } from './types.js';

const BS = 16;

async function rejection(p: Promise<unknown>): Promise<KvrError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(KvrError);
    return e as KvrError;
  }
  throw new Error('expected a rejection');
}

const pin = (id: number, extra: Partial<Nvext> = {}): Nvext => ({
  backend_instance_id: BigInt(id) as Nvext['backend_instance_id'],
  ...extra,
});

/**
 * docs/protocol.md §8.9 reproduced through the router: bs 16, prompt P of 160 tokens (10 blocks).
 *
 * Loads are built by pinned bookings made while the index is still empty (so each books its whole
 * prompt as prefill), then the engines' Stored events arrive:
 *  W1: A = P[0:128] ‖ Z(32) (10 blocks, first token seen → no prefill), B = P[0:64] ‖ Y(32)
 *      (6 blocks, 4 shared with A, still prefilling 96 tokens). Unique blocks 10 + 2 = 12; P's
 *      prefix depth 8 (A holds P's first 8 sequence hashes). Index: P blocks 0..7 → overlap 8.
 *  W2: C = 64 random tokens (4 blocks, done prefilling) → decode 4, prefill 0, overlap 0.
 *  W3: D = 112 tokens (7 blocks, done) + E = 32 tokens (2 blocks, prefilling 32) → decode 9,
 *      prefill 32, depth 0. Index: P blocks 0..3 → overlap 4.
 */
async function example(opts: TestOptions = {}, taintsW2: string[] = []) {
  const indexer = new RadixIndexer();
  const h = harness({ indexer, ...opts });
  const r = h.router;
  r.addWorker({ workerId: 1 });
  r.addWorker({ workerId: 2, taints: taintsW2 });
  r.addWorker({ workerId: 3 });
  const P = toks(1, 160);
  await r.route({ requestId: 'A', tokens: cat(P.subarray(0, 128), toks(2, 32)), nvext: pin(1) });
  r.markPrefillCompleted('A');
  await r.route({ requestId: 'B', tokens: cat(P.subarray(0, 64), toks(3, 32)), nvext: pin(1) });
  await r.route({ requestId: 'C', tokens: toks(4, 64), nvext: pin(2) });
  r.markPrefillCompleted('C');
  await r.route({ requestId: 'D', tokens: toks(5, 112), nvext: pin(3) });
  r.markPrefillCompleted('D');
  await r.route({ requestId: 'E', tokens: toks(6, 32), nvext: pin(3) });
  indexer.applyEvent(storeEvent(w(1), P, BS, 8));
  indexer.applyEvent(storeEvent(w(3), P, BS, 4));
  return { ...h, P, indexer };
}

describe('§8.9 worked example through the router', () => {
  it('loads and overlaps as in the table; W1 wins with logits 22 / 24 / 27', async () => {
    const { router, P } = await example();
    expect(router.rankLoad(w(1))).toEqual({
      active_prefill_tokens: 96,
      active_decode_blocks: 12,
      active_requests: 2,
    });
    expect(router.rankLoad(w(2))).toEqual({
      active_prefill_tokens: 0,
      active_decode_blocks: 4,
      active_requests: 1,
    });
    expect(router.rankLoad(w(3))).toEqual({
      active_prefill_tokens: 32,
      active_decode_blocks: 9,
      active_requests: 2,
    });

    const d = await router.route({ requestId: 'P', tokens: P, explain: true });
    expect(d.workerId).toBe(1n);
    expect(d.explanation.reason).toBe('kv_argmin');
    const c = d.explanation.candidates!;
    expect(c.map((x) => x.worker_id)).toEqual([1n, 2n, 3n]);
    expect(c.map((x) => x.device_blocks)).toEqual([8, 0, 4]);
    expect(c.map((x) => x.active_prefix_depth)).toEqual([8, 0, 0]);
    // raw (96+160)/16 = 16, 160/16 = 10, (32+160)/16 = 12
    expect(c.map((x) => x.raw_prefill)).toEqual([16, 10, 12]);
    expect(c.map((x) => x.prefill_term)).toEqual([8, 10, 8]);
    expect(c.map((x) => x.additional)).toEqual([2, 10, 10]);
    expect(c.map((x) => x.cost)).toEqual([22, 24, 27]);
    // 8 of 10 blocks cached on W1.
    expect(d).toMatchObject({
      overlapBlocks: 8,
      cachedTokens: 128,
      requiredBlocks: 10,
      kvHitRate: 0.8,
      booked: true,
    });
    // Booked: prefill 96 + (160 − 128) = 128; blocks 12 + P's 2 blocks not yet held = 14.
    expect(router.rankLoad(w(1))).toEqual({
      active_prefill_tokens: 128,
      active_decode_blocks: 14,
      active_requests: 3,
    });
  });

  it('T = 1: p ≈ 0.491 / 0.329 / 0.180 sampled with one u', async () => {
    // weights e^0, e^−2/5, e^−5/5 = 1, 0.67032, 0.36788 (range 5); cumulative 0.4906, 0.8195, 1.
    for (const [u, want] of [
      [0.3, 1n],
      [0.6, 2n],
      [0.85, 3n],
    ] as const) {
      const { router, P } = await example({ cost: { temperature: 1 }, random: () => u });
      const d = await router.route({ requestId: 'P', tokens: P });
      expect(d.workerId).toBe(want);
      expect(d.explanation.reason).toBe('kv_softmax');
    }
  });

  it('credit decay 1: W1 decays to 0.625 (logit 25) and W2 wins', async () => {
    const { router, P } = await example({ cost: { creditDecay: 1 } });
    const d = await router.route({ requestId: 'P', tokens: P, explain: true });
    // W1: 1/(1 + (96/16)/10) = 0.625 → credit 5 → 16 − 5 + 12 + 2 = 25.
    // W3: 1/(1 + (32/16)/10) = 5/6 → credit 10/3 → 12 − 10/3 + 9 + 10 = 27.67.
    const c = d.explanation.candidates!;
    expect(c[0].decay).toBeCloseTo(0.625, 12);
    expect(c[0].cost).toBeCloseTo(25, 12);
    expect(c[2].cost).toBeCloseTo(27 + 2 / 3, 12);
    expect(d.workerId).toBe(2n);
  });

  it('legacy weight 2 per request (→ scale 2): 30 / 34 / 35', async () => {
    const { router, P } = await example();
    const d = await router.route({
      requestId: 'P',
      tokens: P,
      explain: true,
      overrides: { overlap_score_weight: 2 },
    });
    expect(d.explanation.candidates!.map((x) => x.cost)).toEqual([30, 34, 35]);
    expect(d.workerId).toBe(1n);
  });

  it('preferred taint of weight 0.85 on W2: m = exp(−tanh 0.85) ≈ 0.501, cost ≈ 12.02 → W2', async () => {
    const { router, P } = await example({}, ['zone=a']);
    const constraints: RoutingConstraints = {
      required_taints: new Set(),
      preferred_taints: new Map([['zone=a', 0.85]]),
    };
    const d = await router.route({ requestId: 'P', tokens: P, explain: true, constraints });
    expect(d.explanation.candidates![1].taint_multiplier).toBeCloseTo(0.50105, 4);
    expect(d.explanation.candidates![1].cost).toBeCloseTo(12.025, 2);
    expect(d.workerId).toBe(2n);
  });

  it('per-request credit from agent_hints: credit 0 removes the overlap discount', async () => {
    const { router, P } = await example();
    const d = await router.route({
      requestId: 'P',
      tokens: P,
      explain: true,
      nvext: { agent_hints: { kv_overlap_score_credit: 0 } },
    });
    // W1: 16 + 12 + 2 = 30; W2: 10 + 4 + 10 = 24; W3: 12 + 9 + 10 = 31.
    expect(d.explanation.candidates!.map((x) => x.cost)).toEqual([30, 24, 31]);
    expect(d.workerId).toBe(2n);
  });
});

describe('eligibility and errors (§8.1)', () => {
  it('no workers, or none holding a required taint → 503 no eligible workers', async () => {
    const { router } = harness();
    let e = await rejection(router.route({ requestId: 'a', tokens: toks(1, 32) }));
    expect([e.status, e.message]).toEqual([503, 'no eligible workers']);
    router.addWorker({ workerId: 1, topologyDomains: { rack: 'r1' } });
    const constraints: RoutingConstraints = {
      required_taints: new Set(['dynamo.topology/rack=r2']),
      preferred_taints: new Map(),
    };
    e = await rejection(router.route({ requestId: 'b', tokens: toks(1, 32), constraints }));
    expect(e.code).toBe('no_eligible_workers');
    constraints.required_taints = new Set(['dynamo.topology/rack=r1']);
    expect((await router.route({ requestId: 'c', tokens: toks(1, 32), constraints })).workerId).toBe(1n);
  });

  it('allowed worker ids restrict the candidates', async () => {
    const { router } = harness();
    for (const id of [1, 2, 3]) router.addWorker({ workerId: id });
    const d = await router.route({
      requestId: 'a',
      tokens: toks(1, 64),
      allowedWorkerIds: [3n],
      explain: true,
    });
    expect(d.workerId).toBe(3n);
    expect(d.explanation.candidateCount).toBe(1);
  });

  it('every rank over the busy threshold → 503 "All workers are busy, please retry later"; a free one is used', async () => {
    const { router } = harness({
      admissionControl: 'token-capacity',
      busyThresholds: { activePrefillTokens: 100 },
    });
    router.addWorker({ workerId: 1 });
    router.addWorker({ workerId: 2 });
    await router.route({ requestId: 'x', tokens: toks(1, 160), nvext: pin(1) });
    // W1 has 160 prefill tokens > 100: busy, filtered; W2 takes the next one even though it is worse on nothing.
    const d = await router.route({ requestId: 'y', tokens: toks(2, 160), explain: true });
    expect(d.workerId).toBe(2n);
    expect(d.explanation.busyFiltered).toBe(1);
    const e = await rejection(router.route({ requestId: 'z', tokens: toks(3, 16) }));
    expect([e.status, e.message, e.detail?.error_type]).toEqual([
      503,
      'All workers are busy, please retry later',
      'overload',
    ]);
    // Pinned to a busy worker: 503, never rerouted.
    const pe = await rejection(router.route({ requestId: 'p', tokens: toks(3, 16), nvext: pin(2) }));
    expect([pe.status, pe.code]).toEqual([503, 'pinned_worker_busy']);
    // Thresholds are settable at runtime; null disables the check.
    router.setBusyThresholds({ activePrefillTokens: null });
    expect((await router.route({ requestId: 'z2', tokens: toks(3, 16) })).booked).toBe(true);
  });

  it('a worker is busy only when all its ranks are', async () => {
    const { router } = harness({
      admissionControl: 'token-capacity',
      busyThresholds: { activePrefillTokens: 100 },
    });
    router.addWorker({ workerId: 1, dpSize: 2 });
    await router.route({ requestId: 'x', tokens: toks(1, 160), nvext: pin(1, { dp_rank: 0 }) });
    // Rank 0 is over, rank 1 is not: worker 1 stays a candidate with both ranks; the cost prefers rank 1.
    const d = await router.route({ requestId: 'y', tokens: toks(2, 160), explain: true });
    expect([d.workerId, d.dpRank, d.explanation.candidateCount]).toEqual([1n, 1, 2]);
    await expect(router.route({ requestId: 'z', tokens: toks(3, 16) })).rejects.toMatchObject({
      code: 'all_workers_busy',
    });
  });

  it('decode latch from worker-published kv_used_blocks (> t × total_kv_blocks) with hysteresis per signal', async () => {
    const { router } = harness({
      admissionControl: 'token-capacity',
      busyThresholds: { activeDecodeBlocks: 0.5 },
    });
    router.addWorker({ workerId: 1, totalKvBlocks: 100 });
    router.addWorker({ workerId: 2, totalKvBlocks: 100 });
    // 51 > 0.5 × 100 → W1 busy.
    expect(
      router.ingestLoad({
        worker_id: 1n,
        dp_rank: 0,
        active_decode_blocks: null,
        active_prefill_tokens: null,
        kv_used_blocks: 51,
      }),
    ).toBe(true);
    expect((await router.route({ requestId: 'a', tokens: toks(1, 16) })).workerId).toBe(2n);
    await expect(router.route({ requestId: 'p', tokens: toks(1, 16), nvext: pin(1) })).rejects.toMatchObject({
      code: 'pinned_worker_busy',
    });
    // 50 is at the limit, not over: W1 is free again.
    router.ingestLoad({ worker_id: 1n, dp_rank: 0, kv_used_blocks: 50 });
    expect((await router.route({ requestId: 'p', tokens: toks(1, 16), nvext: pin(1) })).workerId).toBe(1n);
    expect(router.ingestLoad({ worker_id: 9n, dp_rank: 0, kv_used_blocks: 1 })).toBe(false);
  });

  it('bad input: typed errors naming the field, nothing booked', async () => {
    const { router } = harness();
    router.addWorker({ workerId: 1 });
    await expect(router.route({ requestId: '', tokens: toks(1, 16) })).rejects.toMatchObject({
      detail: { field: 'requestId' },
    });
    await expect(router.route({ requestId: 'a' })).rejects.toMatchObject({ detail: { field: 'tokens' } });
    await expect(
      router.route({ requestId: 'a', tokens: toks(1, 16), overrides: { router_temperature: -1 } }),
    ).rejects.toMatchObject({
      detail: { field: 'router_temperature' },
    });
    await expect(
      router.route({ requestId: 'a', tokens: toks(1, 16), pinHeader: 'abc' }),
    ).rejects.toMatchObject({
      detail: { field: 'x-worker-instance-id' },
    });
    expect(() => router.addWorker({ workerId: 2, dpSize: 0 })).toThrow(
      expect.objectContaining({ detail: { field: 'dpSize' } }) as Error,
    );
    expect(router.workerCount).toBe(1);
    expect(router.rankLoad(w(1))).toEqual({
      active_prefill_tokens: 0,
      active_decode_blocks: 0,
      active_requests: 0,
    });
    await router.route({ requestId: 'a', tokens: toks(1, 16) });
    await expect(router.route({ requestId: 'a', tokens: toks(1, 16) })).rejects.toMatchObject({
      code: 'duplicate_request',
    });
  });
});

describe('index failures', () => {
  it('a failing findMatches routes with empty overlaps and reports the error', async () => {
    const errors: string[] = [];
    const broken = new RadixIndexer();
    broken.findMatchesBySeq = () => {
      throw new Error('index gone');
    };
    const { router } = harness({
      indexer: broken,
      onError: (e, ctx) => errors.push(`${ctx}: ${(e as Error).message}`),
    });
    router.addWorker({ workerId: 1 });
    const d = await router.route({ requestId: 'a', tokens: toks(1, 64) });
    expect([d.workerId, d.overlapBlocks, d.booked]).toEqual([1n, 0, true]);
    expect(errors).toEqual(['findMatches: index gone']);
  });
});

describe('pins (§15)', () => {
  it('backend_instance_id skips scoring but books with the pinned rank’s overlap', async () => {
    const indexer = new RadixIndexer();
    const { router } = harness({ indexer });
    router.addWorker({ workerId: 1 });
    router.addWorker({ workerId: 2 });
    const P = toks(1, 64);
    indexer.applyEvent(storeEvent(w(2), P, BS, 3));
    await router.route({ requestId: 'load', tokens: toks(2, 320), nvext: pin(2) });
    const d = await router.route({ requestId: 'a', tokens: P, nvext: pin(2) });
    expect([d.workerId, d.explanation.reason, d.overlapBlocks, d.cachedTokens]).toEqual([
      2n,
      'pinned',
      3,
      48,
    ]);
    // Prefill booked = 320 + (64 − 48) = 336.
    expect(router.rankLoad(w(2)).active_prefill_tokens).toBe(336);
  });

  it('dp_rank pin, header over nvext, out-of-range rank, unknown worker (sent direct, not booked)', async () => {
    const { router } = harness();
    router.addWorker({ workerId: 1, dpStart: 2, dpSize: 2 });
    router.addWorker({ workerId: 5 });
    let d = await router.route({ requestId: 'a', tokens: toks(1, 32), nvext: pin(1) });
    expect([d.workerId, d.dpRank]).toEqual([1n, 2]); // default: the start rank
    d = await router.route({ requestId: 'b', tokens: toks(1, 32), nvext: pin(1, { dp_rank: 3 }) });
    expect(d.dpRank).toBe(3);
    d = await router.route({ requestId: 'c', tokens: toks(1, 32), nvext: pin(1), pinHeader: '5' });
    expect(d.workerId).toBe(5n);
    await expect(
      router.route({ requestId: 'd', tokens: toks(1, 32), nvext: pin(1, { dp_rank: 4 }) }),
    ).rejects.toMatchObject({
      code: 'no_eligible_workers',
    });
    d = await router.route({ requestId: 'e', tokens: toks(1, 32), nvext: pin(77, { dp_rank: 1 }) });
    expect([d.workerId, d.dpRank, d.booked, d.explanation.reason]).toEqual([
      77n,
      1,
      false,
      'pinned_unbooked',
    ]);
    expect(router.free('e')).toBe(true);
    expect(router.free('e')).toBe(false);
  });

  it('prefill phase uses prefill_worker_id / prefill_dp_rank; decode phase decode_worker_id', async () => {
    for (const [phase, nvext, want] of [
      ['prefill', { prefill_worker_id: 2n, backend_instance_id: 1n }, 2n],
      ['decode', { decode_worker_id: 2n, backend_instance_id: 1n }, 2n],
      ['aggregated', { prefill_worker_id: 2n, backend_instance_id: 1n }, 1n],
    ] as const) {
      const { router } = harness({ phase });
      router.addWorker({ workerId: 1 });
      router.addWorker({ workerId: 2 });
      const d = await router.route({ requestId: 'a', tokens: toks(1, 32), nvext: nvext as Nvext });
      expect(d.workerId).toBe(want);
    }
  });
});

describe('router modes (§8.8)', () => {
  const three = (opts: TestOptions) => {
    const h = harness(opts);
    h.router.addWorker({ workerId: 30 });
    h.router.addWorker({ workerId: 10 });
    h.router.addWorker({ workerId: 20, deviceType: 'cpu' });
    return h;
  };

  it('round-robin cycles ascending ids and skips busy workers', async () => {
    const { router } = three({
      mode: 'round-robin',
      admissionControl: 'token-capacity',
      busyThresholds: { activePrefillTokens: 100 },
    });
    const seen: bigint[] = [];
    for (let i = 0; i < 4; i++)
      seen.push((await router.route({ requestId: `r${i}`, tokens: toks(i, 16) })).workerId);
    expect(seen).toEqual([10n, 20n, 30n, 10n]);
    // Router-published load makes 20 busy (in non-kv modes only published values exist).
    router.ingestLoad({ worker_id: 20n, dp_rank: 0, active_prefill_tokens: 101 });
    expect((await router.route({ requestId: 'r4', tokens: toks(4, 16) })).workerId).toBe(30n);
    expect(router.rankLoad(w(10)).active_requests).toBe(0); // no booking outside kv mode
  });

  it('random picks the ⌊u · free⌋-th free instance', async () => {
    let u = 0.5;
    const { router } = three({ mode: 'random', random: () => u });
    expect((await router.route({ requestId: 'a', tokens: toks(1, 16) })).workerId).toBe(20n); // ⌊0.5·3⌋ = 1 → 20
    u = 0.99;
    expect((await router.route({ requestId: 'b', tokens: toks(1, 16) })).workerId).toBe(30n);
  });

  it('least-loaded follows the in-flight counts kept by route / free', async () => {
    const { router } = three({ mode: 'least-loaded' });
    const first = await router.route({ requestId: 'a', tokens: toks(1, 16) });
    const second = await router.route({ requestId: 'b', tokens: toks(1, 16) });
    const third = await router.route({ requestId: 'c', tokens: toks(1, 16) });
    expect(new Set([first.workerId, second.workerId, third.workerId])).toEqual(new Set([10n, 20n, 30n]));
    router.free('b');
    expect(router.inflight(second.workerId)).toBe(0);
    expect((await router.route({ requestId: 'd', tokens: toks(1, 16) })).workerId).toBe(second.workerId);
  });

  it('device-aware-weighted: CPU group only while cpu_inflight < ⌊gpu_inflight · cpu / (ratio · gpu)⌋', async () => {
    const { router } = three({ mode: 'device-aware-weighted', cudaToCpuRatio: 2 });
    // 2 GPU, 1 CPU, ratio 2: CPU threshold = ⌊g·1/(2·2)⌋ = ⌊g/4⌋. g = 0..3 → 0 → GPU group.
    const picks: bigint[] = [];
    for (let i = 0; i < 4; i++)
      picks.push((await router.route({ requestId: `g${i}`, tokens: toks(1, 16) })).workerId);
    expect(picks.every((x) => x !== 20n)).toBe(true);
    // g = 4 → ⌊4/4⌋ = 1 > cpu 0 → CPU.
    expect((await router.route({ requestId: 'c', tokens: toks(1, 16) })).workerId).toBe(20n);
  });

  it('direct: the pin is required (400 with the docs/configuration.md message); a known busy pin is 503', async () => {
    const { router } = three({
      mode: 'direct',
      admissionControl: 'token-capacity',
      busyThresholds: { activePrefillTokens: 10 },
    });
    const e = await rejection(router.route({ requestId: 'a', tokens: toks(1, 16) }));
    expect([e.status, e.message]).toEqual([
      400,
      'direct routing requires nvext.backend_instance_id or x-worker-instance-id',
    ]);
    const d = await router.route({ requestId: 'b', tokens: toks(1, 16), nvext: pin(30) });
    expect([d.workerId, d.explanation.reason, d.booked]).toEqual([30n, 'direct', false]);
    expect(router.inflight(30n)).toBe(1);
    // A worker the router has not seen: sent direct, nothing to count.
    const u = await router.route({ requestId: 'u', tokens: toks(1, 16), nvext: pin(99) });
    expect([u.workerId, u.explanation.reason, u.booked]).toEqual([99n, 'direct', false]);
    router.ingestLoad({ worker_id: 30n, dp_rank: 0, active_prefill_tokens: 11 });
    await expect(router.route({ requestId: 'c', tokens: toks(1, 16), nvext: pin(30) })).rejects.toMatchObject(
      { status: 503 },
    );
  });
});

describe('query-only, explanation, decision log, overhead', () => {
  it('query_instance_id annotation: route without booking, return the worker and token ids', async () => {
    const { router } = harness();
    router.addWorker({ workerId: 1 });
    const t = toks(1, 40);
    const d = await router.route({
      requestId: 'q',
      tokens: t,
      nvext: { annotations: ['query_instance_id:x'] },
    });
    expect([d.workerId, d.queryOnly, d.booked, d.requiredBlocks]).toEqual([1n, true, false, 3]);
    expect(d.tokenData).toBe(t);
    expect(router.rankLoad(w(1)).active_requests).toBe(0);
    expect(router.liveRequestCount).toBe(0);
  });

  it('sampled JSON decision log: candidates and terms, never prompt text or token ids', async () => {
    const lines: string[] = [];
    let u = 0.005;
    const { router } = harness({
      decisionLog: { sink: (l) => lines.push(l), sampleRate: 0.01, random: () => u },
    });
    router.addWorker({ workerId: 7587872800778374919n });
    router.addWorker({ workerId: 2 });
    await router.route({ requestId: 'a', tokens: toks(1, 48) });
    u = 0.5; // above the rate: not logged
    await router.route({ requestId: 'b', tokens: toks(1, 48) });
    expect(lines).toHaveLength(1);
    const rec = parseJson(lines[0]) as Record<string, unknown>;
    expect(rec.request_id).toBe('a');
    expect((rec.candidates as unknown[]).length).toBe(2);
    // u64 worker ids stay exact in the JSON.
    expect(lines[0]).toContain('7587872800778374919');
    expect(lines[0]).not.toContain('"tokens"');
    expect(lines[0]).not.toContain('token_data');
    expect(lines[0]).not.toContain(String(toks(1, 48)[0]));
  });

  it('overhead per phase through the injected high-resolution timer', async () => {
    const seen: RouterOverhead[] = [];
    let t = 0;
    // Each reading advances 1 ms: start, after hashing, after seq hashing, after find, scheduling start/end, total.
    const { router } = harness({
      hrtime: () => t++,
      onOverhead: (o) => seen.push(o),
      indexer: new RadixIndexer(),
    });
    router.addWorker({ workerId: 1 });
    await router.route({ requestId: 'a', tokens: toks(1, 64) });
    expect(seen).toEqual([
      { block_hashing: 1, seq_hashing: 1, indexer_find_matches: 1, scheduling: 1, total: 5 },
    ]);
  });
});

describe('worker set', () => {
  it('removal drops the index entries and frees the bookings; update shrinks ranks', async () => {
    const indexer = new RadixIndexer();
    const clock = new VirtualClock();
    const router = new KvRouter({ blockSize: BS, deps: { clock, random: () => 0, indexer } });
    router.addWorker({ workerId: 1, dpSize: 2 });
    const P = toks(1, 64);
    indexer.applyEvent(storeEvent(w(1, 1), P, BS, 4));
    const d = await router.route({ requestId: 'a', tokens: P });
    expect([d.dpRank, d.overlapBlocks]).toEqual([1, 4]);
    await router.route({ requestId: 'b', tokens: toks(2, 64), nvext: pin(1, { dp_rank: 0 }) });
    expect([...indexer.treeSizes().keys()]).toEqual(['1:1']);
    router.updateWorker({ workerId: 1, dpSize: 1 }); // rank 1 goes
    expect(router.rankLoad(w(1, 1)).active_requests).toBe(0);
    expect([...indexer.treeSizes().keys()]).toEqual([]);
    expect(router.free('a')).toBe(false); // already dropped with its rank
    expect(router.rankLoad(w(1, 0)).active_requests).toBe(1);
    expect(router.removeWorker(1n)).toBe(true);
    expect(router.rankLoad(w(1, 0)).active_requests).toBe(0);
    expect(router.liveRequestCount).toBe(0);
    expect(router.removeWorker(1n)).toBe(false);
    expect(() => router.updateWorker({ workerId: 9 })).toThrow(
      expect.objectContaining({ code: 'unknown_worker' }) as Error,
    );
  });
});
