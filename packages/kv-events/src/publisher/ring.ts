import { invalidArgument } from '@kvrouter/protocols';
import type { RouterEvent } from '@kvrouter/protocols';

/** Default ring size of the worker local indexer (§3.5). */
export const DEFAULT_RING_SIZE = 1024;

/**
 * The last `capacity` emitted events of one (worker, dp_rank), addressed by event id. Ids must
 * arrive contiguous (the publisher numbers them), so slot = id mod capacity.
 */
export class EventRing {
  private readonly buf: (RouterEvent | undefined)[];
  private readonly cap: bigint;
  private first = 0n;
  private last = 0n;

  constructor(readonly capacity = DEFAULT_RING_SIZE) {
    if (!Number.isInteger(capacity) || capacity < 1 || capacity > 1 << 24)
      throw invalidArgument('ringSize', `must be an integer in [1, 2^24], got ${capacity}`);
    this.buf = new Array<RouterEvent | undefined>(capacity);
    this.cap = BigInt(capacity);
  }

  /** Newest id pushed; 0 before the first. */
  get newest(): bigint {
    return this.last;
  }

  /** Oldest id still held; `newest + 1` when empty. */
  get oldest(): bigint {
    if (this.last === 0n) return 1n;
    const o = this.last - this.cap + 1n;
    return o > this.first ? o : this.first;
  }

  push(ev: RouterEvent): void {
    const id = ev.event.event_id as bigint;
    if (this.last !== 0n && id !== this.last + 1n)
      throw invalidArgument('event_id', `ring expects ${this.last + 1n}, got ${id}`);
    if (this.last === 0n) this.first = id;
    this.buf[Number(id % this.cap)] = ev;
    this.last = id;
  }

  /** Events `start..end` inclusive; the caller checks the range lies inside [oldest, newest]. */
  range(start: bigint, end: bigint): RouterEvent[] {
    const out: RouterEvent[] = [];
    for (let id = start; id <= end; id++) out.push(this.buf[Number(id % this.cap)]!);
    return out;
  }
}
