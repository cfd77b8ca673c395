/**
 * Bounded memory (issue 17): `dynamo_frontend_table_{entries, limit, evicted_total}{table}`. Each
 * cache or table registers a reader of its size, limit and dropped entries; `sync()` (on every
 * scrape) copies them into the gauges. The `table` values are fixed names given by the app, never
 * client input (docs/memory.md lists them).
 */
import type { Registry } from 'prom-client';
import { MEMORY } from './names.js';
import { counter, gauge } from './registry.js';
import { type CounterFamily, type GaugeFamily, reserveNames } from './series.js';
import { checkCount, checkString, invalid } from './validate.js';

export interface TableReading {
  /** Entries held now (in the table's own unit: entries, tokens, blocks, series). */
  entries: number;
  /** The bound `entries` never exceeds (after the operation that would cross it). */
  limit: number;
  /** Entries dropped so far to stay within the limit (monotonic); absent: not counted. */
  evicted?: number;
}

/** Tables registered at most; a backstop against a caller that registers per request. */
export const MAX_TABLES = 64;

export class MemoryMetrics {
  readonly entries: GaugeFamily<'table'>;
  readonly limit: GaugeFamily<'table'>;
  readonly evictedTotal: CounterFamily<'table'>;
  private readonly readers = new Map<string, () => TableReading | null>();

  constructor(registry: Registry) {
    reserveNames(registry, Object.values(MEMORY));
    this.entries = gauge(registry, MEMORY.entries, 'Entries held by a bounded cache or table', ['table']);
    this.limit = gauge(registry, MEMORY.limit, 'Size limit of a bounded cache or table', ['table']);
    this.evictedTotal = counter(
      registry,
      MEMORY.evictedTotal,
      'Entries a bounded cache or table dropped to stay within its limit',
      ['table'],
    );
  }

  /** Registers (or replaces) the reader of `table`; a reader returning null is skipped at sync. */
  register(table: string, read: () => TableReading | null): void {
    checkString('table', table);
    if (!this.readers.has(table) && this.readers.size >= MAX_TABLES)
      throw invalid('table', `at most ${MAX_TABLES} tables`, table);
    this.readers.set(table, read);
  }

  unregister(table: string): void {
    this.readers.delete(table);
    for (const f of [this.entries, this.limit]) f.remove({ table });
    this.evictedTotal.remove({ table });
  }

  /** Copies every reader's values into the gauges (call before each scrape). */
  sync(): void {
    for (const [table, read] of this.readers) {
      const r = read();
      if (r === null) continue;
      const l = { table };
      this.entries.set(l, checkCount(`${table}.entries`, r.entries));
      this.limit.set(l, checkCount(`${table}.limit`, r.limit));
      if (r.evicted !== undefined) {
        const c = this.evictedTotal.labels(l);
        const n = checkCount(`${table}.evicted`, r.evicted);
        if (n > c.value) c.inc(n - c.value);
      }
    }
  }
}
