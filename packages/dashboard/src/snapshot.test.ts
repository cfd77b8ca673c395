import { describe, expect, it } from 'vitest';
import { DecisionTap, decisionLogWithTap } from './decisions.js';
import { quantile, readHistogram, windowOf } from './histogram.js';
import { SnapshotBuilder } from './snapshot.js';
import type { DashboardSource, MetricSample, RouterSetView } from './types.js';

/** Samples of a histogram `h` with bounds 0.1, 1 and the given cumulative counts (+Inf last). */
function hist(
  name: string,
  labels: Record<string, string>,
  cum: [number, number, number],
  sum: number,
): MetricSample[] {
  return [
    { metricName: `${name}_bucket`, labels: { le: 0.1 }, sharedLabels: labels, value: cum[0] },
    { metricName: `${name}_bucket`, labels: { ...labels, le: 1 }, value: cum[1] },
    { metricName: `${name}_bucket`, labels: { ...labels, le: '+Inf' }, value: cum[2] },
    { metricName: `${name}_sum`, labels, value: sum },
    { metricName: `${name}_count`, labels, value: cum[2] },
  ];
}

describe('histogram readings', () => {
  it('reads one series out of a family and estimates quantiles like histogram_quantile', () => {
    const s = [...hist('h', { model: 'a' }, [2, 6, 8], 5), ...hist('h', { model: 'b' }, [1, 1, 1], 0.05)];
    const h = readHistogram('h', s, { model: 'a' })!;
    expect(h).toEqual({ bounds: [0.1, 1], cumulative: [2, 6, 8], sum: 5, count: 8 });
    // rank 4 of 8: second bucket (0.1, 1] holds ranks 3..6 → 0.1 + 0.9 × (4 − 2) / 4 = 0.55
    expect(quantile(h, 0.5)).toBeCloseTo(0.55, 12);
    // rank 1 of 8: first bucket [0, 0.1] → 0.1 × 1/2 = 0.05
    expect(quantile(h, 0.125)).toBeCloseTo(0.05, 12);
    // rank 7.92 falls in +Inf: the highest bound
    expect(quantile(h, 0.99)).toBe(1);
    const w = windowOf(h, { bounds: [0.1, 1], cumulative: [1, 2, 2], sum: 1, count: 2 });
    expect(w).toEqual({ bounds: [0.1, 1], cumulative: [1, 4, 6], sum: 4, count: 6 });
    expect(readHistogram('h', s, { model: 'c' })).toBeNull();
  });
});

describe('decision tap', () => {
  it('takes at most one decision per gap while active and none while inactive', () => {
    let t = 0;
    const tap = new DecisionTap({ minGapMs: 200, now: () => t });
    const log = decisionLogWithTap(null, tap);
    const line = (id: string) =>
      `{"ts":5,"request_id":"${id}","reason":"kv_argmin","worker_id":18446744073709551615,"dp_rank":0,"required_blocks":4,"overlap_blocks":3,"kv_hit_rate":0.75,"queued_ms":0,"busy_filtered":0,"temperature":0,"candidates":[{"worker_id":18446744073709551615,"dp_rank":0,"device_blocks":3,"prefill_term":1,"decode":2,"additional":0,"cost":3}]}`;
    const decide = (id: string) => {
      if (log.random!() < log.sampleRate) log.sink(line(id));
    };
    decide('a'); // inactive: nothing
    tap.active = true;
    decide('b'); // taken at t=0
    t = 100;
    decide('c'); // within 200 ms: skipped
    t = 250;
    decide('d'); // taken
    expect(tap.recent(10).map((r) => r.request_id)).toEqual(['d', 'b']);
    // u64 worker ids stay exact
    expect(tap.recent(1)[0].worker_id).toBe('18446744073709551615');
    expect(tap.recent(1)[0].candidates[0]).toEqual({
      worker_id: '18446744073709551615',
      dp_rank: 0,
      device_blocks: 3,
      prefill_term: 1,
      decode: 2,
      additional: 0,
      cost: 3,
    });
  });

  it("keeps the user's log at its own rate beside the tap", () => {
    const lines: string[] = [];
    const draws = [0.005, 0.5, 0.009];
    const tap = new DecisionTap({ minGapMs: 1e9, now: () => 0 });
    const log = decisionLogWithTap(
      { sink: (l) => lines.push(l), sampleRate: 0.01, random: () => draws.shift()! },
      tap,
    );
    const taken: boolean[] = [];
    for (let i = 0; i < 3; i++) {
      const yes = log.random!() < log.sampleRate;
      taken.push(yes);
      if (yes) log.sink(`{"request_id":"r${i}"}`);
    }
    expect(taken).toEqual([true, false, true]);
    expect(lines).toEqual(['{"request_id":"r0"}', '{"request_id":"r2"}']);
    expect(tap.recent(5)).toEqual([]);
  });
});

describe('snapshot builder', () => {
  it('derives rates, hit rates and windows from two ticks', async () => {
    let now = 1_000_000;
    let hitSamples = hist(
      'dynamo_component_router_kv_hit_rate',
      { dynamo_endpoint: 'generate' },
      [0, 0, 0],
      0,
    );
    const reported = { requests: 0, promptTokens: 0, reportedCachedTokens: 0, predictedCachedTokens: 0 };
    let applied = 0;
    const set: RouterSetView = {
      model: 'm',
      namespace: 'ns',
      component: 'backend',
      endpoint: 'generate',
      role: 'decode',
      router: {
        mode: 'kv',
        blockSize: 16,
        queueDepth: 2,
        busyThresholds: { activeDecodeBlocks: 0.5, activePrefillTokens: null, activePrefillTokensFrac: null },
        rankLoad: (w) => ({
          active_prefill_tokens: 100,
          active_decode_blocks: w.worker_id === 1n ? 60 : 10,
          active_requests: 1,
        }),
        inflight: () => 3,
      },
      *workers() {
        yield { id: 2n, dpStart: 0, dpSize: 1, totalKvBlocks: 100, maxNumBatchedTokens: 8192 };
        yield { id: 1n, dpStart: 0, dpSize: 1, totalKvBlocks: 100, maxNumBatchedTokens: 8192 };
      },
      treeSizes: () => new Map([['1:0', 7]]),
      appliedCounts: () => new Map([['ok:stored', applied]]),
      cursor: (id) => ({ state: 'live', last: id * 10n, phase: 'none' }),
      reported: () => reported, // live object, as the frontend's
      series: {
        hitRate: { name: 'dynamo_component_router_kv_hit_rate', labels: { dynamo_endpoint: 'generate' } },
      },
    };
    const source: DashboardSource = {
      app: 'frontend',
      sets: () => [set],
      registry: {
        getSingleMetric: (name) =>
          name === 'dynamo_component_router_kv_hit_rate'
            ? { get: () => Promise.resolve({ name, type: 'histogram', values: hitSamples }) }
            : undefined,
        getMetricsAsArray: () => [{ name: 'dynamo_component_router_kv_hit_rate' }],
      },
    };
    const b = new SnapshotBuilder(source, null, { now: () => now, rateS: 5, windowS: 60 });
    const first = await b.build();
    expect(first.models[0].decisions_per_sec).toBeNull();
    // 10 s later: 20 decisions with hit rates summing to 12, 4 reported requests, 50 events.
    now += 10_000;
    hitSamples = hist(
      'dynamo_component_router_kv_hit_rate',
      { dynamo_endpoint: 'generate' },
      [5, 20, 20],
      12,
    );
    Object.assign(reported, {
      requests: 4,
      promptTokens: 1000,
      reportedCachedTokens: 500,
      predictedCachedTokens: 640,
    });
    applied = 50;
    const s = await b.build();
    const m = s.models[0];
    expect(m.decisions_per_sec).toBe(2); // 20 / 10 s
    expect(m.hit_rate.predicted).toBeCloseTo(0.6, 12); // 12 / 20
    expect(m.hit_rate.reported).toBe(0.5); // 500 / 1000
    expect(m.hit_rate.predicted_of_reported).toBe(0.64);
    expect(m.hit_rate.reported_requests).toBe(4);
    expect(m.events_per_sec).toBe(5);
    expect(m.queue_depth).toBe(2);
    // Sorted by id; worker 1 holds 60 of 100 blocks > 0.5 × 100: busy.
    expect(m.workers.map((w) => [w.worker_id, w.busy, w.cached_blocks, w.events?.last_event_id])).toEqual([
      ['1', true, 7, '10'],
      ['2', false, 0, '20'],
    ]);
    // The kv_hit_rate family does not match the truth-check pattern.
    expect(s.signals).toEqual([]);
  });
});
