/**
 * KV event counters of §16: the index's `dynamo_component_kv_cache_events_applied{status,
 * event_type}` and the worker publisher's
 * `dynamo_component_kv_publisher_engines_dropped_events_total{worker_id}` (§3.4).
 */
import type { Registry } from 'prom-client';
import type { AppliedHook, ApplyStatus, EventKind } from '@kvrouter/radix-indexer';
import { APPLY_STATUSES, EVENT_TYPES, KV_EVENTS_APPLIED, PUBLISHER_DROPPED } from './names.js';
import { counter } from './registry.js';
import type { CounterFamily, CounterSeries } from './series.js';
import { checkCount, invalid, workerIdLabel } from './validate.js';

const STATUSES: readonly ApplyStatus[] = APPLY_STATUSES;
const KINDS: readonly EventKind[] = EVENT_TYPES;

/** The applied-events counter; its hook is on the index's write path, once per event. */
export class KvIndexMetrics {
  readonly eventsApplied: CounterFamily<'status' | 'event_type'>;
  /** Bound series, slot = status index × 3 + kind index. */
  private readonly slots: CounterSeries<'status' | 'event_type'>[] = [];
  /** Last `appliedCounts()` snapshot per key, for `syncFrom`. */
  private readonly lastSnapshot = new Map<string, number>();
  /** The index's `onApplied` option. */
  readonly hook: AppliedHook;

  constructor(registry: Registry) {
    this.eventsApplied = counter(
      registry,
      KV_EVENTS_APPLIED,
      'KV cache events applied to the router index, by outcome and event type',
      ['status', 'event_type'],
    );
    // Every (status, event_type) pair exists from the start, so rate() is defined before the first event.
    for (const status of STATUSES)
      for (const event_type of KINDS) this.slots.push(this.eventsApplied.labels({ status, event_type }));
    const slots = this.slots;
    this.hook = (status, kind) => {
      const s = STATUSES.indexOf(status);
      const k = KINDS.indexOf(kind);
      if (s < 0) throw invalid('status', `must be one of ${STATUSES.join(', ')}`, status);
      if (k < 0) throw invalid('event_type', `must be one of ${KINDS.join(', ')}`, kind);
      slots[s * KINDS.length + k]!.value++;
    };
  }

  /**
   * Alternative to the hook for indexes that keep their own counters (`KvIndexer.appliedCounts()`,
   * e.g. the thread pool): adds what grew since the previous snapshot. A count that went down means
   * the index was rebuilt, so its whole value is new. Use either this or the hook, not both.
   */
  syncFrom(counts: ReadonlyMap<string, number>): void {
    const adds: Array<[number, number, string]> = [];
    for (const [key, v] of counts) {
      const [status, kind] = key.split('/');
      const s = STATUSES.indexOf(status as ApplyStatus);
      const k = KINDS.indexOf(kind as EventKind);
      if (s < 0 || k < 0) throw invalid('appliedCounts key', 'must be "<status>/<event_type>"', key);
      checkCount(`appliedCounts[${key}]`, v);
      const prev = this.lastSnapshot.get(key) ?? 0;
      adds.push([s * KINDS.length + k, v >= prev ? v - prev : v, key]);
    }
    for (const [slot, add, key] of adds) {
      this.slots[slot]!.inc(add);
      this.lastSnapshot.set(key, counts.get(key)!);
    }
  }
}

export class PublisherMetrics {
  readonly engineDroppedEvents: CounterFamily<'worker_id'>;

  constructor(registry: Registry) {
    this.engineDroppedEvents = counter(
      registry,
      PUBLISHER_DROPPED,
      'Raw KV events dropped by engines before reaching the publisher, detected through event id gaps',
      ['worker_id'],
    );
  }

  /** Starts the worker's series at zero (so the series exists before the first gap). */
  register(workerId: bigint): void {
    this.engineDroppedEvents.inc({ worker_id: workerIdLabel('worker_id', workerId) }, 0);
  }

  recordDropped(workerId: bigint, dropped: number): void {
    const id = workerIdLabel('worker_id', workerId);
    this.engineDroppedEvents.inc({ worker_id: id }, checkCount('dropped', dropped));
  }
}
