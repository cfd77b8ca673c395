/**
 * The worker-side local indexer of one (worker, dp_rank) (§3.5): its own exact index plus the ring
 * of the last emitted events, and the answer to the router's recovery query.
 */
import type {
  DpRank,
  EventId,
  LocalIndexerQueryRequest,
  LocalIndexerQueryResponse,
  RouterEvent,
  WorkerId,
} from '@kvrouter/protocols';
import { RadixIndexer } from '@kvrouter/radix-indexer';
import { EventRing } from './ring.js';

export class LocalIndexer {
  readonly index = new RadixIndexer({ initialCapacity: 1 << 12 });
  readonly ring: EventRing;

  constructor(
    readonly workerId: WorkerId,
    readonly dpRank: DpRank,
    ringSize?: number,
  ) {
    this.ring = new EventRing(ringSize);
  }

  get newestEventId(): EventId {
    return this.ring.newest as EventId;
  }

  /** Called by the publisher with each event it emits, in id order. */
  record(ev: RouterEvent): void {
    this.ring.push(ev);
    this.index.applyEvent(ev);
  }

  /** Every held block as single-block Stored events, parents first (§3.7). */
  dump(): RouterEvent[] {
    const out: RouterEvent[] = [];
    this.index.slots.forEach((slot, w) => this.index.dumpSlot(slot, w, out));
    return out;
  }

  /**
   * §3.5 table. Answered synchronously, so a tree dump and its `last_event_id` describe the same
   * instant. `start` = newest + 1 gets an empty `Events` (implementation choice in §3.5); an `end`
   * past the newest id is read as "newest".
   */
  query(req: LocalIndexerQueryRequest): LocalIndexerQueryResponse {
    if (req.worker_id !== this.workerId)
      return {
        Error: `worker_id ${req.worker_id} is not served here (this endpoint is worker ${this.workerId} dp_rank ${this.dpRank})`,
      };
    const newest = this.ring.newest;
    const start = req.start_event_id as bigint | null;
    const end = req.end_event_id as bigint | null;
    if (start === null) return this.treeDump();
    if (end !== null && start > end)
      return { InvalidRange: { start_id: start as EventId, end_id: end as EventId } };
    if (start > newest + 1n)
      return {
        TooNew: {
          requested_start: start as EventId,
          requested_end: end as EventId | null,
          newest_available: newest as EventId,
        },
      };
    if (start < this.ring.oldest) return this.treeDump();
    const upto = end === null || end > newest ? newest : end;
    return { Events: { events: this.ring.range(start, upto), last_event_id: newest as EventId } };
  }

  private treeDump(): LocalIndexerQueryResponse {
    return { TreeDump: { events: this.dump(), last_event_id: this.ring.newest as EventId } };
  }
}
