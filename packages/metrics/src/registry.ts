/**
 * One prom-client registry per app (ARCHITECTURE.md: metrics are injected, never global). Nothing
 * here touches prom-client's global registry, so two apps in one process (tests, the simulator)
 * never collide on a metric name.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

export type { Registry } from 'prom-client';
export type { Counter, Gauge, Histogram } from 'prom-client';

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

// Small constructors so every family is registered on the given registry only.

export function counter<L extends string>(
  registry: Registry,
  name: string,
  help: string,
  labelNames: readonly L[],
  collect?: (this: Counter<L>) => void,
): Counter<L> {
  return new Counter<L>({ name, help, labelNames, registers: [registry], ...(collect ? { collect } : {}) });
}

export function gauge<L extends string>(registry: Registry, name: string, help: string, labelNames: readonly L[]): Gauge<L> {
  return new Gauge<L>({ name, help, labelNames, registers: [registry] });
}

export function histogram<L extends string>(
  registry: Registry,
  name: string,
  help: string,
  labelNames: readonly L[],
  buckets: readonly number[],
): Histogram<L> {
  return new Histogram<L>({ name, help, labelNames, buckets: [...buckets], registers: [registry] });
}
