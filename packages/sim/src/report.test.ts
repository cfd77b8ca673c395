import { describe, expect, it } from 'vitest';
import { compareSvg, compareTable, ttftSamples, type CompareEntry } from './compare.js';
import { buildReport, distOf, reportJson, type RunData } from './report.js';
import type { RequestColumns, UnitSummary } from './simulation.js';
import type { WorkerId } from '@kvrouter/protocols';

function cols(
  rows: {
    arrival: number;
    routed: number;
    first: number;
    finish: number;
    isl: number;
    tokens: number;
    cached: number;
    overlap: number;
    status: number;
  }[],
): RequestColumns {
  const n = rows.length;
  const c: RequestColumns = {
    arrival: new Float64Array(n),
    routed: new Float64Array(n),
    firstToken: new Float64Array(n),
    finish: new Float64Array(n),
    isl: new Int32Array(n),
    tokens: new Int32Array(n),
    cachedTokens: new Int32Array(n),
    routerOverlapBlocks: new Int32Array(n),
    unit: new Int32Array(n),
    status: new Uint8Array(n),
  };
  rows.forEach((r, k) => {
    c.arrival[k] = r.arrival;
    c.routed[k] = r.routed;
    c.firstToken[k] = r.first;
    c.finish[k] = r.finish;
    c.isl[k] = r.isl;
    c.tokens[k] = r.tokens;
    c.cachedTokens[k] = r.cached;
    c.routerOverlapBlocks[k] = r.overlap;
    c.status[k] = r.status;
  });
  return c;
}

const unit = (w: number, busyMs: number, promptTokens: number, cachedTokens: number): UnitSummary => ({
  workerId: BigInt(w) as WorkerId,
  dpRank: 0,
  busyMs,
  decodingMs: 0,
  decodeSteps: 0,
  decodeStepMs: 0,
  passes: 1,
  requests: 1,
  preemptions: w,
  promptTokens,
  cachedTokens,
  evictedBlocks: 0,
});

const run: RunData = {
  policy: 'kv',
  config: { numWorkers: 2 },
  blockSize: 16,
  rejections: { request_too_large: { count: 1, example: 'too large' } },
  requests: cols([
    { arrival: 0, routed: 1, first: 11, finish: 41, isl: 64, tokens: 4, cached: 30, overlap: 2, status: 1 },
    {
      arrival: 10,
      routed: 10,
      first: 30,
      finish: 30,
      isl: 64,
      tokens: 1,
      cached: 60,
      overlap: 10,
      status: 1,
    },
    { arrival: 5, routed: NaN, first: NaN, finish: 5, isl: 999, tokens: 0, cached: 0, overlap: 0, status: 2 },
  ]),
  units: [unit(2, 10, 200, 60), unit(1, 30, 100, 30)],
};

describe('distOf', () => {
  it('uses nearest-rank percentiles and ignores non-finite values', () => {
    // Sorted 10, 20, 30, 40: p50 = value 2 (ceil(0.5·4) = 2), p90 and p99 = value 4, mean 25.
    expect(distOf([40, NaN, 10, 30, 20])).toEqual({ n: 4, mean: 25, p50: 20, p90: 40, p99: 40, max: 40 });
    expect(distOf([]).n).toBe(0);
  });
});

describe('buildReport', () => {
  it('summarises latencies, throughput, cache, oracle and balance (worked by hand)', () => {
    const oracle = {
      capacityBlocks: 10,
      promptTokens: 0,
      pooledCachedTokens: 0,
      infiniteCachedTokens: 0,
      pooledHitRate: 0.6,
      infiniteHitRate: 0.8,
    };
    const r = buildReport(run, oracle);
    // TTFT: 11 − 0 = 11 and 30 − 10 = 20; E2E 41 and 20; router queue 1 and 0.
    expect(r.ttft_ms).toMatchObject({ n: 2, mean: 15.5, p50: 11, max: 20 });
    expect(r.e2e_ms).toMatchObject({ n: 2, mean: 30.5 });
    expect(r.queue_wait_ms).toMatchObject({ n: 2, mean: 0.5 });
    // ITL only for ≥ 2 tokens: (41 − 11) / (4 − 1) = 10.
    expect(r.itl_ms).toMatchObject({ n: 1, mean: 10 });
    expect(r.requests).toMatchObject({ total: 3, finished: 2, rejected: 1, unfinished: 0 });
    // Duration 41 ms (first arrival 0, last finish 41): 2 / 0.041 = 48.780488 req/s, 128 / 0.041 input tok/s.
    expect(r.throughput).toEqual({
      duration_s: 0.041,
      requests_per_s: 48.780488,
      input_tokens_per_s: 3121.951,
      output_tokens_per_s: 121.951,
    });
    // Engines: 90 of 300 prompt tokens cached = 0.3; router expected min(2·16, 64) + min(10·16, 64) = 96 of 128.
    expect(r.cache).toEqual({
      prompt_tokens: 300,
      cached_tokens: 90,
      hit_rate: 0.3,
      router_expected_hit_rate: 0.75,
    });
    expect(r.oracle).toEqual({
      capacity_blocks: 10,
      pooled_lru_hit_rate: 0.6,
      infinite_hit_rate: 0.8,
      fraction_of_pooled: 0.5,
    });
    // Busy 30 and 10 ms (worker 1 first): mean 20, std 10, CV 0.5; utilization 20 / 41.
    expect(r.load_balance).toEqual({
      busy_ms: [30, 10],
      requests: [1, 1],
      busy_cv: 0.5,
      mean_utilization: 0.487805,
    });
    expect(r.preemptions).toBe(3);
  });

  it('reports client-side cache figures and no engine figures for online runs', () => {
    const r = buildReport({ ...run, units: null }, null);
    // Finished requests only: (30 + 60) / (64 + 64).
    expect(r.cache.hit_rate).toBeCloseTo(90 / 128, 6);
    expect(r.load_balance).toBeNull();
    expect(r.preemptions).toBeNull();
    expect(reportJson(r)).toContain('"load_balance": null');
  });
});

describe('compare output', () => {
  const a = buildReport(run, {
    capacityBlocks: 10,
    promptTokens: 0,
    pooledCachedTokens: 0,
    infiniteCachedTokens: 0,
    pooledHitRate: 0.6,
    infiniteHitRate: 0.8,
  });
  const faster = { ...a, ttft_ms: { ...a.ttft_ms, mean: 5.1667 }, cache: { ...a.cache, hit_rate: 0.45 } };
  const entries: CompareEntry[] = [
    { label: 'round-robin', report: a, ttftMs: ttftSamples(run.requests) },
    { label: 'kv <fast>', report: faster, ttftMs: Float64Array.of(1, 2, 3) },
  ];

  it('prints ratios against the first configuration', () => {
    const t = compareTable(entries);
    const lines = t.split('\n');
    expect(lines[0]).toMatch(/^config\s+TTFT mean ms\s+x base/);
    // 5.1667 / 15.5 = 0.33; hit 0.45 / 0.3 = 1.50.
    expect(lines[3]).toMatch(/^kv <fast>\s+5\.2\s+0\.33x/);
    expect(lines[3]).toContain('1.50x');
    expect(lines[2]).toContain('1.00x');
    expect(t).toContain('oracle: pooled LRU 60.0% · infinite cache 80.0%');
  });

  it('draws one CDF and one bar per configuration in a standalone SVG', () => {
    expect(Array.from(ttftSamples(run.requests))).toEqual([11, 20]);
    const svg = compareSvg(entries, 'a & b');
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
    expect(svg.match(/<polyline /g)).toHaveLength(2);
    expect(svg).toContain('a &amp; b');
    expect(svg).toContain('kv &lt;fast&gt;');
    expect(svg).toContain('>45.0<');
    expect(svg).toContain('pooled LRU');
  });
});
