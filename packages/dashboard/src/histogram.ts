/**
 * Prometheus histogram readings: cumulative `_bucket` samples of one series → per-bucket counts,
 * window differences and `histogram_quantile`-style estimates (linear inside the bucket).
 */
import type { HistogramSnapshot, MetricSample } from './types.js';

/** Cumulative state of one histogram series at one moment. */
export interface HistogramReading {
  bounds: number[];
  /** Cumulative counts per bound, then +Inf (bounds.length + 1 entries). */
  cumulative: number[];
  sum: number;
  count: number;
}

const matches = (s: MetricSample, want: Readonly<Record<string, string>>): boolean => {
  for (const k in want) if (String(s.labels[k] ?? s.sharedLabels?.[k]) !== want[k]) return false;
  return true;
};

/** The series of `name` whose labels include `want`, from a family's samples; null when it has none. */
export function readHistogram(
  name: string,
  samples: readonly MetricSample[],
  want: Readonly<Record<string, string>>,
): HistogramReading | null {
  const buckets: { le: number; v: number }[] = [];
  let sum = 0;
  let count = 0;
  let seen = false;
  for (const s of samples) {
    if (!matches(s, want)) continue;
    const m = s.metricName ?? name;
    if (m === `${name}_bucket`) {
      const le = s.labels.le;
      buckets.push({ le: le === '+Inf' ? Infinity : Number(le), v: s.value });
      seen = true;
    } else if (m === `${name}_sum`) sum += s.value;
    else if (m === `${name}_count`) count += s.value;
  }
  if (!seen) return null;
  // Several series may match a label subset: add them bucket by bucket.
  const by = new Map<number, number>();
  for (const b of buckets) by.set(b.le, (by.get(b.le) ?? 0) + b.v);
  const les = [...by.keys()].sort((a, b) => a - b);
  return {
    bounds: les.filter((x) => x !== Infinity),
    cumulative: les.map((x) => by.get(x)!),
    sum,
    count,
  };
}

/** `now − then` (then null or with other bounds: `now` itself). */
export function windowOf(now: HistogramReading, then: HistogramReading | null): HistogramReading {
  if (!then || then.bounds.length !== now.bounds.length || then.count > now.count) return now;
  return {
    bounds: now.bounds,
    cumulative: now.cumulative.map((v, i) => v - (then.cumulative[i] ?? 0)),
    sum: now.sum - then.sum,
    count: now.count - then.count,
  };
}

/**
 * The q-quantile as Prometheus' `histogram_quantile` estimates it: linear inside the bucket that
 * holds rank q·count (the first bucket's lower edge is 0); in the +Inf bucket, the highest bound.
 */
export function quantile(h: HistogramReading, q: number): number | null {
  const total = h.cumulative[h.cumulative.length - 1] ?? 0;
  if (total <= 0) return null;
  const rank = q * total;
  for (let i = 0; i < h.cumulative.length; i++) {
    if (h.cumulative[i] >= rank) {
      if (i >= h.bounds.length) return h.bounds[h.bounds.length - 1] ?? null;
      const lo = i === 0 ? 0 : h.bounds[i - 1];
      const hi = h.bounds[i];
      const below = i === 0 ? 0 : h.cumulative[i - 1];
      const inBucket = h.cumulative[i] - below;
      return inBucket > 0 ? lo + ((hi - lo) * (rank - below)) / inBucket : hi;
    }
  }
  return h.bounds[h.bounds.length - 1] ?? null;
}

export function histogramSnapshot(h: HistogramReading): HistogramSnapshot {
  const counts = h.cumulative.map((v, i) => v - (i === 0 ? 0 : h.cumulative[i - 1]));
  return {
    bounds: h.bounds,
    counts,
    count: h.count,
    sum: h.sum,
    p50: quantile(h, 0.5),
    p90: quantile(h, 0.9),
    p99: quantile(h, 0.99),
  };
}
