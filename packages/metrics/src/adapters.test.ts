/** The adapters wired to the real domain objects: KvRouter, RadixIndexer, and the hook shapes. */
import { describe, expect, it } from 'vitest';
import { KvrError, VirtualClock, type ActiveLoad, type WorkerId } from '@kvrouter/protocols';
import { RadixIndexer } from '@kvrouter/radix-indexer';
import { cleared, removed, stored } from '@kvrouter/radix-indexer/testing';
import { KvRouter, type RouterOverhead } from '@kvrouter/router';
import {
  appliedHook,
  engineDroppedHook,
  errorTypeOf,
  routerMetricsHooks,
  workerTypeOfPhase,
} from './adapters.js';
import { KvIndexMetrics, PublisherMetrics } from './kv.js';
import { createRegistry } from './registry.js';
import { RouterOverheadMetrics } from './router.js';
import { histogramOf, scrape, valueOf } from './test-helpers.js';
import { WorkerMetrics } from './workers.js';

const tokens = (n: number, f = 1) => Uint32Array.from({ length: n }, (_, i) => f * 1000 + i);

describe('router overhead → dynamo_router_overhead_*_ms', () => {
  it('places one decision in the buckets computed by hand', async () => {
    const reg = createRegistry();
    const m = new RouterOverheadMetrics(reg, 77n);
    m.observe({
      block_hashing: 0.003,
      seq_hashing: 0.001,
      indexer_find_matches: 0.05,
      scheduling: 0.2,
      total: 0.3,
    });
    const f = await scrape(reg);
    const id = { router_id: '77' };
    // exp(0.001, 2, 15): 0.002 < 0.003 <= 0.004; 0.001 <= 0.001 (inclusive)
    const bh = histogramOf(f, 'dynamo_router_overhead_block_hashing_ms', id)!;
    expect([bh.cumulative[bh.le.indexOf(0.002)], bh.cumulative[bh.le.indexOf(0.004)]]).toEqual([0, 1]);
    const sh = histogramOf(f, 'dynamo_router_overhead_seq_hashing_ms', id)!;
    expect(sh.cumulative[sh.le.indexOf(0.001)]).toBe(1);
    // exp(0.01, 3, 17): 0.03 < 0.05 <= 0.09; 0.09 < 0.2 <= 0.27; 0.27 < 0.3 <= 0.81
    const fm = histogramOf(f, 'dynamo_router_overhead_indexer_find_matches_ms', id)!;
    expect([fm.cumulative[fm.le.indexOf(0.03)], fm.cumulative[fm.le.indexOf(0.09)]]).toEqual([0, 1]);
    const sc = histogramOf(f, 'dynamo_router_overhead_scheduling_ms', id)!;
    expect([sc.cumulative[sc.le.indexOf(0.09)], sc.cumulative[sc.le.indexOf(0.27)]]).toEqual([0, 1]);
    const to = histogramOf(f, 'dynamo_router_overhead_total_ms', id)!;
    expect([to.cumulative[to.le.indexOf(0.27)], to.cumulative[to.le.indexOf(0.81)]]).toEqual([0, 1]);
  });

  it('a bad phase value records none of the five', async () => {
    const reg = createRegistry();
    const m = new RouterOverheadMetrics(reg, 'r1');
    const bad = { block_hashing: 1, seq_hashing: 1, indexer_find_matches: 1, scheduling: NaN, total: 1 };
    try {
      m.observe(bad);
      throw new Error('accepted NaN');
    } catch (e) {
      expect((e as KvrError).detail?.field).toBe('scheduling');
    }
    const f = await scrape(reg);
    for (const p of ['block_hashing', 'seq_hashing', 'indexer_find_matches', 'scheduling', 'total'])
      expect(histogramOf(f, `dynamo_router_overhead_${p}_ms`, { router_id: 'r1' })!.count).toBe(0);
  });

  it('each phase of a real KvRouter decision reaches its own histogram', async () => {
    const reg = createRegistry();
    const overhead = new RouterOverheadMetrics(reg, 1n);
    const hooks = routerMetricsHooks({ overhead, workerType: 'decode' });
    const seen: RouterOverhead[] = [];
    // Readings 0, 1, 3, 6, 10, 15, ...: consecutive phases get different lengths, so a phase sent
    // to the wrong histogram shows up as a wrong sum.
    let acc = 0;
    let step = 0;
    const router = new KvRouter({
      blockSize: 16,
      deps: {
        clock: new VirtualClock(0),
        random: () => 0,
        indexer: new RadixIndexer(),
        hrtime: () => {
          const v = acc;
          acc += ++step;
          return v;
        },
      },
      hooks: {
        onOverhead: (o) => {
          seen.push(o);
          hooks.onOverhead!(o);
        },
      },
    });
    router.addWorker({ workerId: 1 });
    await router.route({ requestId: 'a', tokens: tokens(64) });
    expect(seen.length).toBe(1);
    expect(new Set(Object.values(seen[0]!)).size).toBe(5);
    const f = await scrape(reg);
    for (const [phase, v] of Object.entries(seen[0]!)) {
      const h = histogramOf(f, `dynamo_router_overhead_${phase}_ms`, { router_id: '1' })!;
      expect([phase, h.count, h.sum]).toEqual([phase, 1, v]);
    }
  });
});

describe('router queue and load → worker gauges', () => {
  it('tracks the queue depth and every rank load, and still feeds the real publisher', async () => {
    const reg = createRegistry();
    const workers = new WorkerMetrics(reg);
    const published: ActiveLoad[] = [];
    const hooks = routerMetricsHooks({
      workers,
      workerType: workerTypeOfPhase('aggregated'),
      publishLoad: (l) => published.push(l),
    });
    expect(hooks.onOverhead).toBeUndefined();
    const router = new KvRouter({
      blockSize: 16,
      policy: { queueThreshold: 1 },
      deps: { clock: new VirtualClock(0), random: () => 0 },
      hooks,
    });
    // max_num_batched_tokens 10: a request is parked while the rank has > 1 × 10 prefill tokens.
    router.addWorker({ workerId: 5, maxNumBatchedTokens: 10 });
    await router.route({ requestId: 'a', tokens: tokens(48) }); // books 48 prefill tokens, 3 blocks
    const parked = router.route({ requestId: 'b', tokens: tokens(32, 2) });
    const W = { worker_id: '5', dp_rank: '0', worker_type: 'decode' };
    let f = await scrape(reg);
    expect(valueOf(f, 'dynamo_frontend_router_queue_pending_requests', { worker_type: 'decode' })).toBe(1);
    expect(valueOf(f, 'dynamo_frontend_worker_active_prefill_tokens', W)).toBe(48);
    expect(valueOf(f, 'dynamo_frontend_worker_active_decode_blocks', W)).toBe(3);
    router.markPrefillCompleted('a'); // prefill 0 -> 'b' admitted: 32 prefill tokens, 3 + 2 blocks
    await parked;
    f = await scrape(reg);
    expect(valueOf(f, 'dynamo_frontend_router_queue_pending_requests', { worker_type: 'decode' })).toBe(0);
    expect(valueOf(f, 'dynamo_frontend_worker_active_prefill_tokens', W)).toBe(32);
    expect(valueOf(f, 'dynamo_frontend_worker_active_decode_blocks', W)).toBe(5);
    expect(published.at(-1)).toEqual({
      worker_id: 5n,
      dp_rank: 0,
      active_decode_blocks: 5,
      active_prefill_tokens: 32,
      kv_used_blocks: null,
    });
  });

  it('removeWorker drops the series of a departed worker only', async () => {
    const reg = createRegistry();
    const workers = new WorkerMetrics(reg);
    const w = (id: bigint, dp = 0) => ({ worker_id: id as WorkerId, dp_rank: dp });
    workers.setLastTtft(w(1n), 'prefill', 0.5, 100);
    workers.setLastItl(w(1n, 1), 'decode', 0.01);
    workers.setLastTtft(w(2n), 'prefill', 0.7, 200);
    workers.removeWorker(1n);
    const f = await scrape(reg);
    expect(
      f
        .get('dynamo_frontend_worker_last_time_to_first_token_seconds')!
        .samples.map((s) => s.labels.worker_id),
    ).toEqual(['2']);
    expect(f.get('dynamo_frontend_worker_last_inter_token_latency_seconds')!.samples).toEqual([]);
  });

  it('rejects bad labels before setting anything', async () => {
    const reg = createRegistry();
    const workers = new WorkerMetrics(reg);
    const field = (fn: () => void) => {
      try {
        fn();
      } catch (e) {
        return (e as KvrError).detail?.field;
      }
      return 'no error';
    };
    const load = { worker_id: 1n, dp_rank: 0, active_decode_blocks: 3, active_prefill_tokens: -1 };
    expect(field(() => workers.setLoad(load, 'decode'))).toBe('active_prefill_tokens');
    expect(
      field(() => workers.setLoad({ ...load, active_prefill_tokens: 1 }, 'aggregated' as 'decode')),
    ).toBe('worker_type');
    expect(field(() => workers.setLoad({ ...load, worker_id: -1n }, 'decode'))).toBe('worker_id');
    expect(field(() => workers.setQueuePending('decode', 1.5))).toBe('pending');
    const f = await scrape(reg);
    expect(f.get('dynamo_frontend_worker_active_decode_blocks')!.samples).toEqual([]);
  });
});

describe('index AppliedHook → dynamo_component_kv_cache_events_applied', () => {
  it('counts each outcome of a real RadixIndexer, once per scrape cycle', async () => {
    const reg = createRegistry();
    const m = new KvIndexMetrics(reg);
    const ix = new RadixIndexer({ onApplied: appliedHook(m) });
    ix.applyEvent(
      stored(1n, [
        { ext: 1n, local: 1n },
        { ext: 2n, local: 2n },
      ]),
    ); // ok / stored
    ix.applyEvent(stored(1n, [{ ext: 3n, local: 3n }], 77n)); // parent 77 unknown: parent_block_not_found / stored
    ix.applyEvent(removed(1n, [2n])); // ok / removed
    ix.applyEvent(removed(1n, [99n])); // block_not_found / removed
    ix.applyEvent(cleared(1n)); // ok / cleared
    const expected: Record<string, number> = {
      'ok/stored': 1,
      'parent_block_not_found/stored': 1,
      'ok/removed': 1,
      'block_not_found/removed': 1,
      'ok/cleared': 1,
    };
    for (let scrapeNo = 0; scrapeNo < 2; scrapeNo++) {
      const f = await scrape(reg);
      for (const status of ['ok', 'parent_block_not_found', 'block_not_found', 'invalid_block'])
        for (const event_type of ['stored', 'removed', 'cleared'])
          expect([
            status,
            event_type,
            valueOf(f, 'dynamo_component_kv_cache_events_applied', { status, event_type }),
          ]).toEqual([status, event_type, expected[`${status}/${event_type}`] ?? 0]);
    }
  });

  it('syncFrom adds the growth of appliedCounts() snapshots and survives an index rebuild', async () => {
    const reg = createRegistry();
    const m = new KvIndexMetrics(reg);
    const v = async (status: string, event_type: string) =>
      valueOf(await scrape(reg), 'dynamo_component_kv_cache_events_applied', { status, event_type });
    m.syncFrom(new Map([['ok/stored', 5]]));
    expect(await v('ok', 'stored')).toBe(5);
    m.syncFrom(
      new Map([
        ['ok/stored', 8],
        ['ok/removed', 2],
      ]),
    ); // +3, +2
    expect([await v('ok', 'stored'), await v('ok', 'removed')]).toEqual([8, 2]);
    m.syncFrom(new Map([['ok/stored', 1]])); // rebuilt index: 1 new event -> 9
    expect(await v('ok', 'stored')).toBe(9);
    expect(() =>
      m.syncFrom(
        new Map([
          ['ok/stored', 2],
          ['bogus', 1],
        ]),
      ),
    ).toThrow(KvrError);
    expect(await v('ok', 'stored')).toBe(9); // rejected snapshot changed nothing
    expect(() => m.hook('fine' as 'ok', 'stored')).toThrow(/status/);
  });
});

describe('publisher onEngineDropped → dropped-events counter', () => {
  it('starts at zero for the worker and adds each gap', async () => {
    const reg = createRegistry();
    const m = new PublisherMetrics(reg);
    const hook = engineDroppedHook(m, 42n);
    expect(
      valueOf(await scrape(reg), 'dynamo_component_kv_publisher_engines_dropped_events_total', {
        worker_id: '42',
      }),
    ).toBe(0);
    hook(3, 0);
    hook(2, 1); // dp rank is not a label of this counter
    expect(
      valueOf(await scrape(reg), 'dynamo_component_kv_publisher_engines_dropped_events_total', {
        worker_id: '42',
      }),
    ).toBe(5);
    expect(() => hook(-1, 0)).toThrow(KvrError);
  });
});

describe('errorTypeOf', () => {
  it('classifies errors into the §16 error_type values', () => {
    // Codes from anywhere (relayed peers included), so relay() rather than the typed constructor.
    const k = (code: string, status: number, detail?: Record<string, unknown>) =>
      KvrError.relay(code, 'x', status, detail);
    expect(errorTypeOf(k('all_workers_busy', 503, { error_type: 'overload' }))).toBe('overload');
    expect(errorTypeOf(k('invalid_argument', 400))).toBe('validation');
    expect(errorTypeOf(k('anything', 422))).toBe('validation');
    expect(errorTypeOf(k('model_not_found', 404))).toBe('not_found');
    expect(errorTypeOf(k('resource_exhausted', 429))).toBe('overload');
    expect(errorTypeOf(k('no_eligible_workers', 503))).toBe('overload');
    expect(errorTypeOf(k('cancelled', 503))).toBe('cancelled');
    expect(errorTypeOf(k('client_closed', 499))).toBe('cancelled');
    expect(errorTypeOf(k('unsupported', 501))).toBe('not_implemented');
    expect(errorTypeOf(k('timeout', 504))).toBe('response_timeout');
    expect(errorTypeOf(k('disconnected', 502))).toBe('internal');
    expect(errorTypeOf(k('odd', 500, { error_type: 'not_a_type' }))).toBe('internal');
    expect(errorTypeOf(new DOMException('aborted', 'AbortError'))).toBe('cancelled');
    expect(errorTypeOf(new Error('boom'))).toBe('internal');
    expect(errorTypeOf('string')).toBe('internal');
  });
});
