/**
 * Router queue through the router (docs/protocol.md §10). One worker with max_num_batched_tokens 100 and
 * threshold 1: a request parks while the worker's active prefill is > 1 × 100 tokens. Every queued
 * prompt is over 100 tokens, so each admission re-parks the rest until the next first token.
 */
import { describe, expect, it } from 'vitest';
import { KvrError, type Nvext } from '@kvrouter/protocols';
import { RadixIndexer } from '@kvrouter/radix-indexer';
import type { QueuePolicy } from '@kvrouter/core-cost';
import type { Clock } from '@kvrouter/protocols';
import { KvRouter } from './router.js';
import { flush, harness, storeEvent, toks, w, type TestOptions } from './test-fixtures.js';
import type { RoutingDecision } from './types.js';

const pri = (p: number): Nvext => ({ agent_hints: { priority: p } });

function queued(policy: QueuePolicy, opts: TestOptions = {}) {
  const h = harness({ queueThreshold: 1, queuePolicy: policy, ...opts });
  h.router.addWorker({ workerId: 1, maxNumBatchedTokens: 100 });
  const order: string[] = [];
  const track = (p: Promise<RoutingDecision>) =>
    p.then(
      (d) => {
        order.push(d.requestId);
        return d;
      },
      (e: unknown) => {
        order.push(`!${(e as KvrError).code}`);
        throw e;
      },
    );
  return { ...h, order, track };
}

async function releaseAll(router: KvRouter, first: string, order: string[], count: number): Promise<void> {
  // Each first token releases the prefill of the last admitted request; the next head goes.
  let last = first;
  for (let i = 0; i < count; i++) {
    router.markPrefillCompleted(last);
    await flush();
    last = order[order.length - 1];
  }
}

describe('queue ordering', () => {
  it('fcfs: key = priority_jump − arrival_offset (priority p ≈ arriving p seconds earlier)', async () => {
    const { router, clock, order, track } = queued('fcfs');
    await router.route({ requestId: 'R0', tokens: toks(0, 200) }); // 200 > 100: the worker is over
    const ps = [track(router.route({ requestId: 'Q1', tokens: toks(1, 150) }))];
    clock.advance(1000);
    ps.push(track(router.route({ requestId: 'Q2', tokens: toks(2, 150) })));
    clock.advance(1000);
    ps.push(track(router.route({ requestId: 'Q3', tokens: toks(3, 150), nvext: pri(5) })));
    await flush();
    expect(router.queueDepth).toBe(3);
    expect(order).toEqual([]);
    // keys: Q1 0 − 0 = 0, Q2 0 − 1 = −1, Q3 5 − 2 = 3 → Q3, Q1, Q2.
    await releaseAll(router, 'R0', order, 3);
    expect(order).toEqual(['Q3', 'Q1', 'Q2']);
    const ds = await Promise.all(ps);
    // Q1 waited from t = 0 to its admission at t = 2000.
    expect(ds[0].explanation.queuedMs).toBe(2000);
  });

  it('lcfs: key = priority_jump + arrival_offset', async () => {
    const { router, clock, order, track } = queued('lcfs');
    await router.route({ requestId: 'R0', tokens: toks(0, 200) });
    void track(router.route({ requestId: 'Q1', tokens: toks(1, 150), nvext: pri(3) }));
    clock.advance(1000);
    void track(router.route({ requestId: 'Q2', tokens: toks(2, 150) }));
    clock.advance(1000);
    void track(router.route({ requestId: 'Q3', tokens: toks(3, 150) }));
    // keys: Q1 3 + 0 = 3, Q2 0 + 1 = 1, Q3 0 + 2 = 2 → Q1, Q3, Q2.
    await releaseAll(router, 'R0', order, 3);
    expect(order).toEqual(['Q1', 'Q3', 'Q2']);
  });

  it('wspt: key = (1 + priority_jump) / max(1, isl − cached_tokens)', async () => {
    const { router, order, track } = queued('wspt');
    await router.route({ requestId: 'R0', tokens: toks(0, 200) });
    void track(router.route({ requestId: 'Q1', tokens: toks(1, 400) }));
    void track(router.route({ requestId: 'Q2', tokens: toks(2, 150) }));
    void track(router.route({ requestId: 'Q3', tokens: toks(3, 1000), nvext: pri(5) }));
    // keys: Q1 1/400 = 0.0025, Q2 1/150 ≈ 0.00667, Q3 6/1000 = 0.006 → Q2, Q3, Q1.
    await releaseAll(router, 'R0', order, 3);
    expect(order).toEqual(['Q2', 'Q3', 'Q1']);
  });

  it('wspt counts the best cached prefix at arrival', async () => {
    const indexer = new RadixIndexer();
    const { router, order, track } = queued('wspt', { indexer });
    const A = toks(1, 400);
    indexer.applyEvent(storeEvent(w(1), A, 16, 20)); // 320 of A's 400 tokens cached
    await router.route({ requestId: 'R0', tokens: toks(0, 200) });
    void track(router.route({ requestId: 'Q1', tokens: toks(2, 150) }));
    void track(router.route({ requestId: 'QA', tokens: A }));
    // Q1: 1/150 ≈ 0.0067; QA: 1/(400 − 320) = 0.0125 → QA first (it books only 80, so Q1 follows).
    await flush();
    router.markPrefillCompleted('R0');
    await flush();
    expect(order).toEqual(['QA', 'Q1']);
  });
});

describe('parking and release', () => {
  it('parks only while every eligible rank is over threshold × max_num_batched_tokens', async () => {
    const { router, order, track } = queued('fcfs');
    router.addWorker({ workerId: 2, maxNumBatchedTokens: 100 });
    await router.route({
      requestId: 'R1',
      tokens: toks(1, 101),
      nvext: { backend_instance_id: 1n } as Nvext,
    });
    // W2 is still at 0: not parked.
    expect((await router.route({ requestId: 'a', tokens: toks(2, 16) })).workerId).toBe(2n);
    await router.route({
      requestId: 'R2',
      tokens: toks(3, 101),
      nvext: { backend_instance_id: 2n } as Nvext,
    });
    // W1 101 > 100 and W2 101 + 16 > 100: parked.
    void track(router.route({ requestId: 'b', tokens: toks(4, 16) }));
    await flush();
    expect(router.queueDepth).toBe(1);
    // A pinned request checks only its rank; it parks behind too.
    void track(
      router.route({ requestId: 'c', tokens: toks(5, 16), nvext: { backend_instance_id: 1n } as Nvext }),
    );
    await flush();
    expect(router.queueDepth).toBe(2);
    router.free('R2');
    await flush();
    // b goes (W2 back to 16); c is pinned to W1 and W1 is still over: head-of-line blocking.
    expect(order).toEqual(['b']);
    expect(router.queueDepth).toBe(1);
    router.markPrefillCompleted('R1');
    await flush();
    expect(order).toEqual(['b', 'c']);
  });

  it('exactly 100 tokens is not over the threshold; a threshold of null disables the queue', async () => {
    let h = queued('fcfs');
    await h.router.route({ requestId: 'R0', tokens: toks(0, 100) });
    expect((await h.router.route({ requestId: 'a', tokens: toks(1, 16) })).booked).toBe(true);
    h = queued('fcfs', { queueThreshold: null });
    await h.router.route({ requestId: 'R0', tokens: toks(0, 10_000) });
    expect((await h.router.route({ requestId: 'a', tokens: toks(1, 16) })).booked).toBe(true);
  });

  it('a cancelled or aborted queued request is removed (rejected with code cancelled)', async () => {
    const { router, order, track } = queued('fcfs');
    await router.route({ requestId: 'R0', tokens: toks(0, 200) });
    const p1 = track(router.route({ requestId: 'Q1', tokens: toks(1, 150) }));
    const ac = new AbortController();
    const p2 = track(router.route({ requestId: 'Q2', tokens: toks(2, 150), signal: ac.signal }));
    void track(router.route({ requestId: 'Q3', tokens: toks(3, 150) }));
    expect(router.free('Q1')).toBe(true);
    ac.abort();
    await expect(p1).rejects.toMatchObject({ code: 'cancelled' });
    await expect(p2).rejects.toMatchObject({ code: 'cancelled' });
    expect(router.queueDepth).toBe(1);
    router.markPrefillCompleted('R0');
    await flush();
    expect(order).toEqual(['!cancelled', '!cancelled', 'Q3']);
    expect(router.free('Q1')).toBe(false);
  });

  it('a queued request whose workers all left is failed at the next dequeue with no eligible workers', async () => {
    const { router, track } = queued('fcfs');
    await router.route({ requestId: 'R0', tokens: toks(0, 200) });
    const p = track(router.route({ requestId: 'Q', tokens: toks(1, 150) }));
    router.removeWorker(1n);
    await expect(p).rejects.toMatchObject({ code: 'no_eligible_workers' });
    expect(router.queueDepth).toBe(0);
  });

  it('the periodic re-check (60 s) admits when no other trigger fires; worker changes also wake the queue', async () => {
    const { router, order, track } = queued('fcfs');
    await router.route({ requestId: 'R0', tokens: toks(0, 200) });
    void track(router.route({ requestId: 'Q', tokens: toks(1, 150) }));
    // A larger max_num_batched_tokens lifts the limit; the update wakes the queue at once.
    router.updateWorker({ workerId: 1, maxNumBatchedTokens: 1000 });
    await flush();
    expect(order).toEqual(['Q']);
    // Timer path: with AIC the anchor's prefill decays without any event.
    const h = queued('fcfs', { prefillDurationPredictor: () => 1000 });
    await h.router.route({ requestId: 'R0', tokens: toks(0, 200) });
    void h.track(h.router.route({ requestId: 'Q', tokens: toks(1, 150) }));
    // The anchor decays: ceil(200 · (1 − t/1000)); at t = 500 it is 100, not over; the 100 ms re-check admits.
    h.clock.advance(400);
    await flush();
    expect(h.order).toEqual([]);
    h.clock.advance(100);
    await flush();
    expect(h.order).toEqual(['Q']);
  });

  it('without AIC the re-check runs every 60 s', async () => {
    const { router, clock } = queued('fcfs');
    await router.route({ requestId: 'R0', tokens: toks(0, 200) });
    void router.route({ requestId: 'Q', tokens: toks(1, 150) }).catch(() => undefined);
    expect(clock.nextDue()).toBe(30_000); // maintenance tick first
    clock.advance(30_000);
    expect(clock.nextDue()).toBe(60_000);
    router.close();
  });
});

describe('no starvation', () => {
  it('a newcomer never overtakes a queued request that could be admitted', async () => {
    // A clock whose timers never fire: only the arrival itself can notice that load decayed.
    let t = 0;
    const clock: Clock = { now: () => t, setTimeout: () => ({}), clearTimeout: () => undefined };
    const router = new KvRouter({
      blockSize: 16,
      policy: { queueThreshold: 1 },
      deps: { clock, random: () => 0, prefillDurationPredictor: () => 1000 },
    });
    router.addWorker({ workerId: 1, maxNumBatchedTokens: 100 });
    const order: string[] = [];
    await router.route({ requestId: 'R0', tokens: toks(0, 200) });
    void router.route({ requestId: 'Q1', tokens: toks(1, 150) }).then((d) => order.push(d.requestId));
    t = 600; // R0 decayed to ceil(200 · 0.4) = 80 ≤ 100
    void router.route({ requestId: 'Q2', tokens: toks(2, 150) }).then((d) => order.push(d.requestId));
    await flush();
    // Q1 went first (80 + 150 = 230 > 100), so Q2 parks behind.
    expect(order).toEqual(['Q1']);
    expect(router.queueDepth).toBe(1);
  });

  it('under a steady stream of arrivals every request is admitted, in arrival order', async () => {
    const { router, clock, order, track } = queued('fcfs');
    await router.route({ requestId: 'R0', tokens: toks(0, 200) });
    let last = 'R0';
    const all: Promise<RoutingDecision>[] = [];
    for (let i = 0; i < 20; i++) {
      clock.advance(100);
      all.push(track(router.route({ requestId: `Q${i}`, tokens: toks(i + 1, 150) })));
      all.push(track(router.route({ requestId: `N${i}`, tokens: toks(i + 100, 150) })));
      // One first token per step: exactly one waiting request can go.
      router.markPrefillCompleted(last);
      await flush();
      last = order[order.length - 1];
    }
    for (let i = 0; i < 40; i++) {
      router.markPrefillCompleted(last);
      await flush();
      last = order[order.length - 1];
    }
    await Promise.all(all);
    const expected = Array.from({ length: 20 }, (_, i) => [`Q${i}`, `N${i}`]).flat();
    expect(order).toEqual(expected);
  });
});

describe('overlap refresh at dequeue', () => {
  async function refreshCase(refreshSecs: number | undefined, waitMs: number) {
    const indexer = new RadixIndexer();
    const { router, clock } = queued('fcfs', { indexer, overlapRefreshAfterSecs: refreshSecs });
    const P = toks(9, 160);
    await router.route({ requestId: 'R0', tokens: toks(0, 200) });
    const p = router.route({ requestId: 'Q', tokens: P });
    // The engine caches P while Q waits.
    indexer.applyEvent(storeEvent(w(1), P, 16, 6));
    clock.advance(waitMs);
    router.markPrefillCompleted('R0');
    return p;
  }

  it('re-queries overlaps for a request queued longer than the refresh age (default 10 s)', async () => {
    const d = await refreshCase(undefined, 11_000);
    expect([d.overlapBlocks, d.explanation.overlapRefreshed, d.explanation.queuedMs]).toEqual([
      6,
      true,
      11_000,
    ]);
  });

  it('keeps the arrival overlaps when younger than the refresh age, or when refresh is disabled (0)', async () => {
    let d = await refreshCase(undefined, 9_000);
    expect([d.overlapBlocks, d.explanation.overlapRefreshed]).toEqual([0, false]);
    d = await refreshCase(0, 11_000);
    expect([d.overlapBlocks, d.explanation.overlapRefreshed]).toEqual([0, false]);
  });
});

describe('bounded queue (issue 17)', () => {
  it('parks at most MAX_PARKED_REQUESTS requests; the next is refused as all_workers_busy', async () => {
    const { MAX_PARKED_REQUESTS } = await import('./queue-driver.js');
    expect(MAX_PARKED_REQUESTS).toBe(10_000);
    const { router } = queued('fcfs');
    // 150 prompt tokens > 1 × 100: the worker is over the threshold, every later request parks.
    await router.route({ requestId: 'first', tokens: toks(1, 150) });
    const parked: Promise<unknown>[] = [];
    for (let i = 0; i < MAX_PARKED_REQUESTS; i++)
      parked.push(router.route({ requestId: `p${i}`, tokens: toks(2, 150) }).catch(() => undefined));
    expect(router.queueDepth).toBe(MAX_PARKED_REQUESTS);
    const e = await router
      .route({ requestId: 'one-too-many', tokens: toks(3, 150) })
      .catch((x: unknown) => x);
    expect((e as KvrError).code).toBe('all_workers_busy');
    expect(router.queueDepth).toBe(MAX_PARKED_REQUESTS);
    router.close();
    await Promise.all(parked);
  });
});
