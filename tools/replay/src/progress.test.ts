import { describe, expect, it } from 'vitest';
import { ProgressBar, renderProgress } from './progress.js';

describe('renderProgress', () => {
  it('draws the bar, counts, trace clock and speed', () => {
    // 25 of 100 done: 25 % of 20 cells = 5 '#'. Trace 3 724 000 ms = 01:02:04; 2 s wall -> 1862x.
    expect(renderProgress({ done: 25, total: 100, traceMs: 3_724_000, wallMs: 2000 }, 20)).toBe(
      '[#####---------------]  25% 25/100 req · trace 01:02:04 · wall 2.0 s · 1862x real time',
    );
    expect(renderProgress({ done: 0, total: 0, traceMs: 0, wallMs: 0, label: 'kv' }, 4)).toBe(
      'kv [----]   0% 0/0 req · trace 00:00:00 · wall 0.0 s',
    );
    expect(renderProgress({ done: 9, total: 3, traceMs: 0, wallMs: 1 }, 2)).toMatch(/^\[##\] 100%/);
  });
});

describe('ProgressBar', () => {
  it('redraws in place at most once per interval and ends the line', () => {
    let t = 0;
    const out: string[] = [];
    const bar = new ProgressBar({ write: (s: string) => out.push(s), columns: 200 }, true, () => t, 100);
    bar.update(1, 10, 0);
    t = 50;
    bar.update(2, 10, 0); // within 100 ms: skipped
    t = 150;
    bar.update(3, 10, 0);
    bar.update(10, 10, 0, true); // forced
    bar.finish();
    expect(out.length).toBe(4);
    expect(out[0]).toMatch(/^\r.* 1\/10 req/);
    expect(out[1]).toMatch(/ 3\/10 req/);
    expect(out[2]).toMatch(/ 10\/10 req/);
    expect(out[3]).toBe('\n');
  });

  it('writes nothing when disabled and cuts lines to the terminal width', () => {
    const out: string[] = [];
    const off = new ProgressBar({ write: (s: string) => out.push(s) }, false, () => 0);
    off.update(1, 2, 3, true);
    off.finish();
    expect(out).toEqual([]);
    const narrow = new ProgressBar({ write: (s: string) => out.push(s), columns: 20 }, true, () => 0);
    narrow.update(1, 2, 3, true);
    expect(out[0]!.replace('\x1b[K', '').length).toBe(20); // '\r' + 19 characters
  });
});
