/**
 * Benchmark harness: each suite module in ./suites exports `suite: Suite`. The runner prints a
 * progress line per step and a readable table, and writes benchmarks/results/<suite>.json with
 * machine info. Latency figures come from per-call hrtime samples (percentiles), throughput from
 * wall time over a fixed amount of work. Quote medians and ratios; never assert timings in tests.
 */
import { cpus, totalmem, arch, platform, release } from 'node:os';

export interface Row {
  /** What was measured, e.g. "findMatches depth=128 workers=64 blocks=1M". */
  name: string;
  /** Main figure. */
  value: number;
  unit: string;
  /** Further figures (p50/p99, ratios, counts). */
  extra?: Record<string, number | string>;
}

export interface SuiteContext {
  /** Progress line for long steps: `label done/total`. */
  progress(label: string, done: number, total: number): void;
  /** Scale factor from `--quick` (smaller inputs for smoke runs). */
  quick: boolean;
}

export interface Suite {
  name: string;
  description: string;
  run(ctx: SuiteContext): Promise<Row[]>;
}

export function machineInfo(): Record<string, string | number> {
  const c = cpus();
  return {
    node: process.version,
    platform: `${platform()} ${release()} ${arch()}`,
    cpu: c[0]?.model ?? 'unknown',
    cores: c.length,
    memGiB: Math.round(totalmem() / 2 ** 30),
    date: new Date().toISOString(),
  };
}

export interface LatencyStats {
  n: number;
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

/** Percentiles of samples in the same unit as given. */
export function stats(samples: Float64Array | number[]): LatencyStats {
  const s = Float64Array.from(samples).sort();
  const n = s.length;
  const at = (q: number) => (n === 0 ? NaN : s[Math.min(n - 1, Math.floor(q * n))]);
  let sum = 0;
  for (const v of s) sum += v;
  return { n, mean: n ? sum / n : NaN, p50: at(0.5), p90: at(0.9), p99: at(0.99), max: n ? s[n - 1] : NaN };
}

/**
 * Times `fn(i)` per call in microseconds with process.hrtime.bigint. `warmup` calls first are
 * discarded. The timer itself costs ~30-50 ns here, included in every sample.
 */
export function measureLatencyUs(fn: (i: number) => void, iterations: number, warmup = 1000): LatencyStats {
  for (let i = 0; i < warmup; i++) fn(i);
  const out = new Float64Array(iterations);
  for (let i = 0; i < iterations; i++) {
    const t0 = process.hrtime.bigint();
    fn(i);
    out[i] = Number(process.hrtime.bigint() - t0) / 1000;
  }
  return stats(out);
}

export const fmt = (v: number, digits = 3): string =>
  !Number.isFinite(v)
    ? String(v)
    : Math.abs(v) >= 1000
      ? Math.round(v).toLocaleString('en-US')
      : v.toPrecision(digits);
