import { describe, expect, it } from 'vitest';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { KvrError } from '@kvrouter/protocols';
import { CounterFamily, GaugeFamily, HistogramFamily } from './series.js';
import { histogramOf, scrape, valueOf } from './test-helpers.js';

describe('families in a prom-client registry', () => {
  it('expose the same text as prom-client’s own metric classes for the same updates', async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const b = [0, 0.5, 1, 2.5];
    const h1 = new HistogramFamily(ours, 'lat_seconds', 'latency', ['model', 'op'], b);
    const h2 = new Histogram({
      name: 'lat_seconds',
      help: 'latency',
      labelNames: ['model', 'op'],
      buckets: b,
      registers: [theirs],
    });
    const c1 = new CounterFamily(ours, 'req_total', 'requests', ['status']);
    const c2 = new Counter({
      name: 'req_total',
      help: 'requests',
      labelNames: ['status'],
      registers: [theirs],
    });
    const g1 = new GaugeFamily(ours, 'depth', 'queue "depth"\nnow', []);
    const g2 = new Gauge({ name: 'depth', help: 'queue "depth"\nnow', registers: [theirs] });
    for (const [v, model] of [
      [0, 'a'],
      [0.2, 'a'],
      [0.5, 'a'],
      [3, 'a'],
      [1, 'b"q\\'],
    ] as const) {
      h1.observe({ model, op: 'x' }, v);
      h2.observe({ model, op: 'x' }, v);
    }
    c1.inc({ status: 'ok' }, 2);
    c2.inc({ status: 'ok' }, 2);
    c1.inc({ status: 'err' });
    c2.inc({ status: 'err' });
    g1.set({}, 7);
    g2.set(7);
    g1.dec({}, 2);
    g2.dec(2);
    expect(await ours.metrics()).toBe(await theirs.metrics());
  });

  it('histogram buckets are upper-inclusive, cumulative, and observeMany equals n observes', async () => {
    const reg = new Registry();
    const h = new HistogramFamily(reg, 'h', 'h', [], [1, 2, 3]);
    const s = h.labels({});
    s.observe(1); // (.., 1]
    s.observe(1.5); // (1, 2]
    s.observeMany(2.5, 3); // (2, 3] three times
    s.observe(9); // +Inf
    const x = histogramOf(await scrape(reg), 'h')!;
    expect(x.le).toEqual([1, 2, 3]);
    expect(x.cumulative).toEqual([1, 2, 5, 6]);
    expect([x.sum, x.count]).toEqual([1 + 1.5 + 7.5 + 9, 6]);
  });

  it('unlabelled families export a zero sample from the start', async () => {
    const reg = new Registry();
    new CounterFamily(reg, 'c_total', 'c', []);
    new GaugeFamily(reg, 'g', 'g', []);
    const f = await scrape(reg);
    expect([valueOf(f, 'c_total'), valueOf(f, 'g')]).toEqual([0, 0]);
  });

  it('remove and reset drop series', async () => {
    const reg = new Registry();
    const g = new GaugeFamily(reg, 'g', 'g', ['w']);
    g.set({ w: '1' }, 1);
    g.set({ w: '2' }, 2);
    g.remove({ w: '1' });
    expect((await scrape(reg)).get('g')!.samples.map((s) => s.labels.w)).toEqual(['2']);
    g.reset();
    expect((await scrape(reg)).get('g')!.samples).toEqual([]);
  });

  it('checks names, labels, buckets and values', () => {
    const reg = new Registry();
    const err = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        expect(e).toBeInstanceOf(KvrError);
        return (e as KvrError).detail?.field;
      }
      return 'no error';
    };
    expect(err(() => new CounterFamily(reg, 'bad-name', 'x', []))).toBe('name');
    expect(err(() => new CounterFamily(reg, 'ok_total', '', []))).toBe('help');
    expect(err(() => new CounterFamily(reg, 'ok_total', 'x', ['a', 'a']))).toBe('labelNames');
    expect(err(() => new CounterFamily(reg, 'ok_total', 'x', ['__reserved']))).toBe('labelNames');
    expect(err(() => new HistogramFamily(reg, 'h', 'x', ['le'], [1]))).toBe('labelNames');
    expect(err(() => new HistogramFamily(reg, 'h', 'x', [], [1, 1]))).toBe('buckets');
    const c = new CounterFamily(reg, 'c_total', 'x', ['a']);
    expect(err(() => c.inc({ a: '1' }, -1))).toBe('counter increment');
    expect(err(() => c.inc({} as { a: string }))).toBe('c_total labels');
    expect(err(() => c.inc({ a: '1', b: '2' } as { a: string }))).toBe('c_total labels');
    expect(err(() => c.inc({ a: null } as unknown as { a: string }))).toBe('c_total label a');
    const h = new HistogramFamily(reg, 'h', 'x', [], [1]);
    expect(err(() => h.observe({}, NaN))).toBe('histogram value');
    expect(err(() => new GaugeFamily(reg, 'g', 'x', []).set({}, NaN))).toBe('gauge value');
    // one name per registry
    expect(err(() => new GaugeFamily(reg, 'c_total', 'x', []))).toBe('c_total');
  });
});
