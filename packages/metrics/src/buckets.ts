/**
 * Histogram bucket generators of PROTOCOL §16 and the bucket list of every histogram.
 *
 * `log(min, max, n)` = 0 followed by n log-spaced points from min to max, each rounded to 2
 * significant figures, duplicates removed. `exp(a, r, n)` = a·r^k for k = 0..n−1.
 */
import { invalid } from './validate.js';

/**
 * Upper bound on generated points: with 2 significant figures there are only ~90 distinct values
 * per decade, so more points only produce duplicates, and an unbounded count from an env var
 * would let a typo allocate without limit (upstream caps at the same number).
 */
export const MAX_BUCKET_COUNT = 512;

/**
 * Rounds to `digits` significant figures in decimal. `toPrecision` rounds the exact binary value,
 * and parsing its text gives the double nearest the decimal result, so `0.0022` comes back as the
 * literal `0.0022` and the exposition's `le` labels stay short.
 */
export function roundSig(v: number, digits = 2): number {
  return v === 0 ? 0 : Number(v.toPrecision(digits));
}

export interface LogBucketSpec {
  min: number;
  max: number;
  count: number;
}

/** `log(min, max, n)` of §16. With n = 1 the single point is `min`. */
export function logBuckets(min: number, max: number, n: number): number[] {
  if (typeof min !== 'number' || !Number.isFinite(min) || !(min > 0))
    throw invalid('min', 'must be a finite number > 0', min);
  if (typeof max !== 'number' || !Number.isFinite(max) || !(max > min))
    throw invalid('max', `must be a finite number > min (${min})`, max);
  checkN(n);
  const out = [0];
  const lo = Math.log(min);
  const span = Math.log(max) - lo;
  for (let i = 0; i < n; i++) {
    // The ends are exact rather than exp(log(x)), which can land a ulp off (e.g. 0.0010000000000000002).
    const v = i === 0 ? min : i === n - 1 ? max : Math.exp(lo + (span * i) / (n - 1));
    const r = roundSig(v);
    if (r !== out[out.length - 1]) out.push(r);
  }
  return out;
}

/**
 * `exp(a, r, n)` of §16. Each point is a·r^k with the float noise of the product removed
 * (15 significant digits), so `0.01·3^2` is the literal `0.09`, not `0.09000000000000001`.
 */
export function expBuckets(a: number, r: number, n: number): number[] {
  if (typeof a !== 'number' || !Number.isFinite(a) || !(a > 0))
    throw invalid('a', 'must be a finite number > 0', a);
  if (typeof r !== 'number' || !Number.isFinite(r) || !(r > 1))
    throw invalid('r', 'must be a finite number > 1', r);
  checkN(n);
  const out: number[] = [];
  for (let k = 0; k < n; k++) out.push(roundSig(a * r ** k, 15));
  return out;
}

/** n evenly spaced points from `start` by `step` (noise removed like `expBuckets`). */
export function linearBuckets(start: number, step: number, n: number): number[] {
  if (typeof start !== 'number' || !Number.isFinite(start))
    throw invalid('start', 'must be a finite number', start);
  if (typeof step !== 'number' || !Number.isFinite(step) || !(step > 0))
    throw invalid('step', 'must be a finite number > 0', step);
  checkN(n);
  const out: number[] = [];
  for (let k = 0; k < n; k++) out.push(roundSig(start + step * k, 15));
  return out;
}

function checkN(n: number): void {
  if (!Number.isInteger(n) || n < 1 || n > MAX_BUCKET_COUNT)
    throw invalid('count', `must be an integer in [1, ${MAX_BUCKET_COUNT}]`, n);
}

/** §16 defaults of the five frontend histograms that `DYN_METRICS_*` may override. */
export const DEFAULT_LOG_SPECS = Object.freeze({
  requestDuration: Object.freeze({ min: 1, max: 256, count: 10 }),
  inputSequence: Object.freeze({ min: 50, max: 128000, count: 12 }),
  outputSequence: Object.freeze({ min: 50, max: 32000, count: 10 }),
  ttft: Object.freeze({ min: 0.001, max: 480, count: 18 }),
  itl: Object.freeze({ min: 0.001, max: 2, count: 13 }),
} satisfies Record<string, LogBucketSpec>);

export type OverridableHistogram = keyof typeof DEFAULT_LOG_SPECS;

const fromSpec = (s: LogBucketSpec) => Object.freeze(logBuckets(s.min, s.max, s.count));

/** Fixed bucket lists (the router's histograms never take the frontend overrides). */
export const BUCKETS = Object.freeze({
  requestDuration: fromSpec(DEFAULT_LOG_SPECS.requestDuration),
  inputSequence: fromSpec(DEFAULT_LOG_SPECS.inputSequence),
  outputSequence: fromSpec(DEFAULT_LOG_SPECS.outputSequence),
  ttft: fromSpec(DEFAULT_LOG_SPECS.ttft),
  itl: fromSpec(DEFAULT_LOG_SPECS.itl),
  /** 0, 0.05, …, 1.0 (21 points). */
  kvHitRate: Object.freeze(linearBuckets(0, 0.05, 21)),
  kvTransferLatency: Object.freeze(logBuckets(0.001, 10, 15)),
  /** block_hashing and seq_hashing: exp(0.001, 2, 15). */
  overheadHashing: Object.freeze(expBuckets(0.001, 2, 15)),
  /** indexer_find_matches, scheduling and total: exp(0.01, 3, 17). */
  overheadRouting: Object.freeze(expBuckets(0.01, 3, 17)),
  /** Implementation choice (§16 names no buckets): upstream's 0.5 ms · 2^k up to 512 ms. */
  tokenizerLatencyMs: Object.freeze(expBuckets(0.5, 2, 11)),
  /** Implementation choice (§16 names no buckets): upstream's stage-duration list. */
  stageDuration: Object.freeze([0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5]),
});
