/**
 * One prom-client registry per app (docs/CONVENTIONS.md: metrics are injected, never global). Nothing
 * here touches prom-client's global registry, so two apps in one process (tests, the simulator)
 * never collide on a metric name.
 */
import { Registry } from 'prom-client';
import { CounterFamily, GaugeFamily, HistogramFamily } from './series.js';

export type { Registry } from 'prom-client';

/** A fresh registry in the Prometheus text format 0.0.4 (what upstream's `/metrics` serves). */
export function createRegistry(): Registry {
  return new Registry();
}

export interface Exposition {
  contentType: string;
  body: string;
}

/** The `/metrics` response of a registry. */
export async function exposition(registry: Registry): Promise<Exposition> {
  return { contentType: registry.contentType, body: await registry.metrics() };
}

// Constructors so every family is registered on the given registry only.

export function counter<L extends string>(
  registry: Registry,
  name: string,
  help: string,
  labelNames: readonly L[],
): CounterFamily<L> {
  return new CounterFamily<L>(registry, name, help, labelNames);
}

export function gauge<L extends string>(
  registry: Registry,
  name: string,
  help: string,
  labelNames: readonly L[],
): GaugeFamily<L> {
  return new GaugeFamily<L>(registry, name, help, labelNames);
}

export function histogram<L extends string>(
  registry: Registry,
  name: string,
  help: string,
  labelNames: readonly L[],
  buckets: readonly number[],
): HistogramFamily<L> {
  return new HistogramFamily<L>(registry, name, help, labelNames, buckets);
}
