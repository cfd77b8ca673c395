import { describe, expect, it } from 'vitest';
import { KvrError } from '@kvrouter/protocols';
import { MAX_TABLES, MemoryMetrics } from './memory.js';
import { createRegistry } from './registry.js';
import { scrape, valueOf } from './test-helpers.js';
import { TruthMetrics } from './truth.js';

describe('TruthMetrics', () => {
  it('one mode series per mode (1 = current), per-worker drift and load-only, checks as a counter', async () => {
    const r = createRegistry();
    const t = new TruthMetrics(r);
    t.update([
      {
        model: 'm',
        mode: 'fallback',
        checks: 40,
        workers: [
          { workerId: 1n, drift: 0.5, loadOnly: true },
          { workerId: 2n, drift: 0, loadOnly: true },
        ],
      },
    ]);
    let f = await scrape(r);
    expect(valueOf(f, 'dynamo_frontend_router_truth_mode', { model: 'm', mode: 'fallback' })).toBe(1);
    expect(valueOf(f, 'dynamo_frontend_router_truth_mode', { model: 'm', mode: 'exact' })).toBe(0);
    expect(valueOf(f, 'dynamo_frontend_router_truth_drift', { model: 'm', worker_id: '1' })).toBe(0.5);
    expect(valueOf(f, 'dynamo_frontend_router_truth_load_only', { model: 'm', worker_id: '2' })).toBe(1);
    expect(valueOf(f, 'dynamo_frontend_router_truth_checks_total', { model: 'm' })).toBe(40);
    // Worker 2 left, the model recovered: its series go, the counter only grows.
    t.update([
      { model: 'm', mode: 'exact', checks: 55, workers: [{ workerId: 1n, drift: 0.1, loadOnly: false }] },
    ]);
    f = await scrape(r);
    expect(valueOf(f, 'dynamo_frontend_router_truth_mode', { model: 'm', mode: 'exact' })).toBe(1);
    expect(valueOf(f, 'dynamo_frontend_router_truth_mode', { model: 'm', mode: 'fallback' })).toBe(0);
    expect(
      valueOf(f, 'dynamo_frontend_router_truth_load_only', { model: 'm', worker_id: '2' }),
    ).toBeUndefined();
    expect(valueOf(f, 'dynamo_frontend_router_truth_checks_total', { model: 'm' })).toBe(55);
    // The model is gone: every series of it goes.
    t.update([]);
    f = await scrape(r);
    expect(f.get('dynamo_frontend_router_truth_mode')?.samples ?? []).toEqual([]);
    expect(f.get('dynamo_frontend_router_truth_drift')?.samples ?? []).toEqual([]);
  });

  it('rejects a bad snapshot before changing anything', async () => {
    const r = createRegistry();
    const t = new TruthMetrics(r);
    expect(() =>
      t.update([
        { model: 'm', mode: 'exact', checks: 1, workers: [{ workerId: 1n, drift: 2, loadOnly: false }] },
      ]),
    ).toThrow(KvrError);
    expect((await scrape(r)).get('dynamo_frontend_router_truth_mode')?.samples ?? []).toEqual([]);
  });
});

describe('MemoryMetrics', () => {
  it('copies every reader into entries / limit / evicted_total at sync', async () => {
    const r = createRegistry();
    const m = new MemoryMetrics(r);
    let n = 5;
    m.register('sessions', () => ({ entries: n, limit: 8, evicted: Math.max(0, n - 8) }));
    m.register('absent', () => null);
    m.sync();
    n = 11;
    m.sync();
    const f = await scrape(r);
    expect(valueOf(f, 'dynamo_frontend_table_entries', { table: 'sessions' })).toBe(11);
    expect(valueOf(f, 'dynamo_frontend_table_limit', { table: 'sessions' })).toBe(8);
    expect(valueOf(f, 'dynamo_frontend_table_evicted_total', { table: 'sessions' })).toBe(3);
    expect(valueOf(f, 'dynamo_frontend_table_entries', { table: 'absent' })).toBeUndefined();
    m.unregister('sessions');
    expect(valueOf(await scrape(r), 'dynamo_frontend_table_entries', { table: 'sessions' })).toBeUndefined();
  });

  it('holds at most MAX_TABLES tables', () => {
    const m = new MemoryMetrics(createRegistry());
    for (let i = 0; i < MAX_TABLES; i++) m.register(`t${i}`, () => null);
    m.register('t0', () => null);
    expect(() => m.register('one-too-many', () => null)).toThrow(/at most 64 tables/);
  });
});
