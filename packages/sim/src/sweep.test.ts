import { describe, expect, it } from 'vitest';
import { sweepSvg, sweepTable, type SweepPoint } from './compare.js';
import type { Report } from './report.js';

const rep = (mean: number, p90: number, hit: number, ofOracle: number): Report =>
  ({
    ttft_ms: { n: 1, mean, p50: mean, p90, p99: p90, max: p90 },
    cache: { hit_rate: hit },
    oracle: { fraction_of_pooled: ofOracle },
  }) as unknown as Report;

const points: SweepPoint[] = [
  {
    load: 0.5,
    offeredRps: 2.5,
    idealTtftMs: 100,
    entries: [
      { label: 'kv', report: rep(300, 600, 0.15, 0.75) },
      { label: 'round-robin', report: rep(400, 900, 0.06, 0.3) },
    ],
  },
  {
    load: 1.1,
    offeredRps: 5.5,
    idealTtftMs: 100,
    entries: [
      { label: 'kv', report: rep(1000, 3000, 0.12, 0.6) },
      { label: 'round-robin', report: rep(8000, 20000, 0.06, 0.3) },
    ],
  },
];

describe('sweepTable / sweepSvg', () => {
  it('puts each policy against round-robin and the load point limit (RR mean / ideal TTFT)', () => {
    const t = sweepTable(points, 1).trim().split('\n');
    expect(t).toHaveLength(6);
    // 50 %: limit 400 / 100 = 4; kv ratio 400 / 300 = 1.33 → 33.3 % of the limit.
    expect(t[2]).toBe('| 50 % | 2.50 | kv | 300 | 600 | 15.0% | 75.0% | 1.33 | 4.00 | 33.3% |');
    expect(t[3]).toBe('| 50 % | 2.50 | round-robin | 400 | 900 | 6.0% | 30.0% | 1.00 | 4.00 | 25.0% |');
    // 110 %: limit 80; kv ratio 8 → 10 %.
    expect(t[4]).toBe('| 110 % | 5.50 | kv | 1000 | 3000 | 12.0% | 60.0% | 8.00 | 80.00 | 10.0% |');
  });

  it('with the idle-engine ideal too: both limits side by side', () => {
    const t = sweepTable([{ ...points[0]!, idealTtftMs: 200, idealIdleTtftMs: 100 }], 1)
      .trim()
      .split('\n');
    expect(t[0]).toContain('| limit | ratio / limit | limit, idle engine | ratio / idle-engine limit |');
    // limit 400 / 200 = 2 (kv 1.33 → 66.7 %), idle-engine limit 400 / 100 = 4 (33.3 %).
    expect(t[2]).toBe(
      '| 50 % | 2.50 | kv | 300 | 600 | 15.0% | 75.0% | 1.33 | 2.00 | 66.7% | 4.00 | 33.3% |',
    );
  });

  it('draws one line per policy in both panels, x at each load', () => {
    const svg = sweepSvg(points, 't');
    expect(svg.match(/<polyline/g)).toHaveLength(4);
    expect(svg).toContain('>50%</text>');
    expect(svg).toContain('>110%</text>');
    expect(svg).toContain('>round-robin</text>');
  });
});
