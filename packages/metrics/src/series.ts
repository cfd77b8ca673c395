/**
 * Counter, gauge and histogram families that plug into a prom-client `Registry` (which owns
 * registration, name clashes and the text exposition) but keep their series in bound handles.
 *
 * Why not prom-client's own metric classes: every `observe` / `inc` / `set` there hashes and
 * validates the label object (≈0.3 µs with one label, ≈1.5 µs with three), and a bound child is no
 * cheaper. The frontend updates several series per streamed chunk and per routing decision, so that
 * cost lands on the request path. Here labels are checked once when a handle is created; an update
 * through a handle is a field write (a bucket search for histograms).
 */
import type { Metric, Registry } from 'prom-client';
import { KvrError } from '@kvrouter/protocols';
import { invalid } from './validate.js';

const NAME_RE = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_RE = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const SEP = '\u0001';

/**
 * Fails before anything is registered when a group's name is taken (e.g. the same group built twice
 * on one registry), so a group is registered whole or not at all.
 */
export function reserveNames(registry: Registry, names: readonly string[]): void {
  for (const name of names)
    if (registry.getSingleMetric(name))
      throw new KvrError('metric_exists', `metric ${name} is already registered on this registry`, 500, {
        field: name,
      });
}

export type LabelValues<L extends string> = Readonly<Record<L, string | number>>;

/** One exposition sample, in the shape prom-client's registry formats. */
interface Sample {
  labels: Record<string, string | number>;
  sharedLabels?: Record<string, string>;
  value: number;
  metricName?: string;
}

abstract class Family<L extends string, S extends { readonly labels: Readonly<Record<L, string>> }> {
  readonly aggregator = 'sum';
  abstract readonly type: 'counter' | 'gauge' | 'histogram';
  readonly labelNames: readonly L[];
  protected readonly series = new Map<string, S>();

  constructor(
    registry: Registry,
    readonly name: string,
    readonly help: string,
    labelNames: readonly L[],
  ) {
    if (!NAME_RE.test(name)) throw invalid('name', 'must match [a-zA-Z_:][a-zA-Z0-9_:]*', name);
    if (typeof help !== 'string' || help === '') throw invalid('help', 'must be a non-empty string', help);
    for (const l of labelNames)
      if (!LABEL_RE.test(l) || l.startsWith('__'))
        throw invalid('labelNames', 'must be valid label names', l);
    if (new Set(labelNames).size !== labelNames.length)
      throw invalid('labelNames', 'must not repeat', labelNames.join(','));
    this.labelNames = Object.freeze([...labelNames]);
    reserveNames(registry, [name]);
    registry.registerMetric(this as unknown as Metric);
  }

  /** The series of these label values, created (at zero) on first use. */
  labels(values: LabelValues<L>): S {
    const key = this.key(values);
    let s = this.series.get(key);
    if (!s) {
      const labels = {} as Record<L, string>;
      for (const n of this.labelNames) labels[n] = String(values[n]);
      s = this.create(Object.freeze(labels));
      this.series.set(key, s);
    }
    return s;
  }

  /** Creates the series at zero so it is exported before its first update. */
  zero(values: LabelValues<L>): void {
    this.labels(values);
  }

  remove(values: LabelValues<L>): void {
    this.series.delete(this.key(values));
  }

  reset(): void {
    this.series.clear();
  }

  /** All series, for tests and adapters. */
  *all(): IterableIterator<S> {
    yield* this.series.values();
  }

  /** prom-client's registry calls this on every scrape. */
  async get(): Promise<{ name: string; help: string; type: string; values: Sample[]; aggregator: string }> {
    const values: Sample[] = [];
    for (const s of this.series.values()) this.samples(s, values);
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  protected abstract create(labels: Readonly<Record<L, string>>): S;
  protected abstract samples(s: S, out: Sample[]): void;

  private key(values: LabelValues<L>): string {
    if (values === null || typeof values !== 'object')
      throw invalid(`${this.name} labels`, 'must be an object', values);
    let key = '';
    let given = 0;
    for (const k in values) if (Object.prototype.hasOwnProperty.call(values, k)) given++;
    if (given !== this.labelNames.length)
      throw invalid(
        `${this.name} labels`,
        `must be exactly {${this.labelNames.join(', ')}}`,
        Object.keys(values).join(','),
      );
    for (let i = 0; i < this.labelNames.length; i++) {
      const v = values[this.labelNames[i]!];
      if (typeof v !== 'string' && typeof v !== 'number')
        throw invalid(`${this.name} label ${this.labelNames[i]}`, 'must be a string or number', v);
      key = i === 0 ? String(v) : key + SEP + String(v);
    }
    return key;
  }
}

export class CounterSeries<L extends string> {
  value = 0;
  constructor(readonly labels: Readonly<Record<L, string>>) {}
  inc(v = 1): void {
    if (!(v >= 0) || v === Infinity) throw invalid('counter increment', 'must be a finite number >= 0', v);
    this.value += v;
  }
}

/** A family of one-value series (counters, gauges): an unlabelled family has its series from the start. */
abstract class ValueFamily<
  L extends string,
  S extends { readonly labels: Readonly<Record<L, string>>; value: number },
> extends Family<L, S> {
  constructor(registry: Registry, name: string, help: string, labelNames: readonly L[]) {
    super(registry, name, help, labelNames);
    if (labelNames.length === 0) this.labels({} as LabelValues<L>);
  }
  protected samples(s: S, out: Sample[]): void {
    out.push({ labels: s.labels, value: s.value });
  }
}

export class CounterFamily<L extends string> extends ValueFamily<L, CounterSeries<L>> {
  readonly type = 'counter';
  inc(values: LabelValues<L>, v = 1): void {
    this.labels(values).inc(v);
  }
  protected create(labels: Readonly<Record<L, string>>): CounterSeries<L> {
    return new CounterSeries(labels);
  }
}

export class GaugeSeries<L extends string> {
  value = 0;
  constructor(readonly labels: Readonly<Record<L, string>>) {}
  set(v: number): void {
    if (typeof v !== 'number' || Number.isNaN(v)) throw invalid('gauge value', 'must be a number', v);
    this.value = v;
  }
  inc(v = 1): void {
    this.set(this.value + v);
  }
  dec(v = 1): void {
    this.set(this.value - v);
  }
}

export class GaugeFamily<L extends string> extends ValueFamily<L, GaugeSeries<L>> {
  readonly type = 'gauge';
  set(values: LabelValues<L>, v: number): void {
    this.labels(values).set(v);
  }
  inc(values: LabelValues<L>, v = 1): void {
    this.labels(values).inc(v);
  }
  dec(values: LabelValues<L>, v = 1): void {
    this.labels(values).dec(v);
  }
  protected create(labels: Readonly<Record<L, string>>): GaugeSeries<L> {
    return new GaugeSeries(labels);
  }
}

export class HistogramSeries<L extends string> {
  /** Per-bucket (not cumulative) counts; the last slot is (max bound, +Inf). */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  constructor(
    readonly labels: Readonly<Record<L, string>>,
    private readonly bounds: Float64Array,
  ) {
    this.counts = new Float64Array(bounds.length + 1);
  }
  observe(v: number): void {
    if (typeof v !== 'number' || !Number.isFinite(v))
      throw invalid('histogram value', 'must be a finite number', v);
    this.add(v, 1);
  }
  /** `n` observations of the same value (one streamed chunk of n tokens has n equal ITLs). */
  observeMany(v: number, n: number): void {
    if (typeof v !== 'number' || !Number.isFinite(v))
      throw invalid('histogram value', 'must be a finite number', v);
    if (!Number.isSafeInteger(n) || n < 0) throw invalid('histogram repeat', 'must be an integer >= 0', n);
    if (n > 0) this.add(v, n);
  }
  private add(v: number, n: number): void {
    const b = this.bounds;
    let i = 0;
    // Lists are ≤ 21 bounds and most samples fall low: a linear scan beats a binary search here.
    while (i < b.length && v > b[i]!) i++;
    this.counts[i]! += n;
    this.sum += v * n;
    this.count += n;
  }
}

export class HistogramFamily<L extends string> extends Family<L, HistogramSeries<L>> {
  readonly type = 'histogram';
  readonly upperBounds: readonly number[];
  private readonly bounds: Float64Array;

  constructor(
    registry: Registry,
    name: string,
    help: string,
    labelNames: readonly L[],
    buckets: readonly number[],
  ) {
    if ((labelNames as readonly string[]).includes('le'))
      throw invalid('labelNames', 'must not contain le', 'le');
    for (let i = 0; i < buckets.length; i++)
      if (!Number.isFinite(buckets[i]) || (i > 0 && !(buckets[i]! > buckets[i - 1]!)))
        throw invalid('buckets', 'must be finite and strictly increasing', buckets.join(','));
    super(registry, name, help, labelNames);
    this.upperBounds = Object.freeze([...buckets]);
    this.bounds = Float64Array.from(buckets);
    if (labelNames.length === 0) this.labels({} as LabelValues<L>);
  }
  observe(values: LabelValues<L>, v: number): void {
    this.labels(values).observe(v);
  }
  protected create(labels: Readonly<Record<L, string>>): HistogramSeries<L> {
    return new HistogramSeries(labels, this.bounds);
  }
  protected samples(s: HistogramSeries<L>, out: Sample[]): void {
    const bucket = `${this.name}_bucket`;
    let acc = 0;
    for (let i = 0; i < this.upperBounds.length; i++) {
      acc += s.counts[i]!;
      out.push({
        labels: { le: this.upperBounds[i]! },
        sharedLabels: s.labels,
        value: acc,
        metricName: bucket,
      });
    }
    out.push({ labels: { le: '+Inf' }, sharedLabels: s.labels, value: s.count, metricName: bucket });
    out.push({ labels: {}, sharedLabels: s.labels, value: s.sum, metricName: `${this.name}_sum` });
    out.push({ labels: {}, sharedLabels: s.labels, value: s.count, metricName: `${this.name}_count` });
  }
}
