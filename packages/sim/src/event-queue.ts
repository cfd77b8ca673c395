/**
 * The discrete-event core: a binary min-heap of callbacks on a virtual clock, ordered by
 * (time, class, insertion order). Class 0 carries deliveries (arrivals, dispatches, KV events,
 * tokens, timers); class 1 starts engine passes. So every delivery due at time t, including ones
 * scheduled while handling t, is seen before any pass that starts at t: a request dispatched at t
 * joins the pass that starts at t, exactly as it would if it had been enqueued a moment earlier.
 */

export const CLS_DELIVERY = 0;
export const CLS_PASS = 1;

interface Entry {
  t: number;
  cls: number;
  seq: number;
  fn: () => void;
  cancelled: boolean;
}

const before = (a: Entry, b: Entry): boolean =>
  a.t < b.t || (a.t === b.t && (a.cls < b.cls || (a.cls === b.cls && a.seq < b.seq)));

export type TimerHandle = object;

export class EventQueue {
  private heap: Entry[] = [];
  private seq = 0;
  private t = 0;
  private live = 0;

  now = (): number => this.t;

  get size(): number {
    return this.live;
  }

  /** Runs `fn` at absolute time `at` (never earlier than now). Returns a handle for `cancel`. */
  at(at: number, fn: () => void, cls = CLS_DELIVERY): TimerHandle {
    if (!Number.isFinite(at)) throw new RangeError(`event time must be finite, got ${at}`);
    const e: Entry = { t: Math.max(at, this.t), cls, seq: this.seq++, fn, cancelled: false };
    const h = this.heap;
    h.push(e);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!before(e, h[p]!)) break;
      h[i] = h[p]!;
      i = p;
    }
    h[i] = e;
    this.live++;
    return e;
  }

  cancel(handle: TimerHandle): void {
    const e = handle as Entry | undefined;
    if (e && typeof e === 'object' && 'cancelled' in e && !e.cancelled) {
      e.cancelled = true;
      this.live--;
    }
  }

  /** The router's `Clock` contract (now / setTimeout / clearTimeout) on this queue. */
  readonly clock = {
    now: (): number => this.t,
    setTimeout: (fn: () => void, ms: number): TimerHandle => this.at(this.t + Math.max(0, ms || 0), fn),
    clearTimeout: (handle: TimerHandle): void => this.cancel(handle),
  };

  /** Time of the next live event, or undefined. */
  peekTime(): number | undefined {
    this.dropCancelled();
    return this.heap.length ? this.heap[0]!.t : undefined;
  }

  /** Runs the next live event; false when none is left (or the next is after `until`). */
  step(until = Infinity): boolean {
    this.dropCancelled();
    const h = this.heap;
    if (h.length === 0 || h[0]!.t > until) return false;
    const e = this.pop();
    this.live--;
    this.t = e.t;
    e.cancelled = true;
    e.fn();
    return true;
  }

  private dropCancelled(): void {
    while (this.heap.length && this.heap[0]!.cancelled) this.pop();
  }

  private pop(): Entry {
    const h = this.heap;
    const top = h[0]!;
    const last = h.pop()!;
    const n = h.length;
    if (n > 0) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= n) break;
        const r = l + 1;
        const c = r < n && before(h[r]!, h[l]!) ? r : l;
        if (!before(h[c]!, last)) break;
        h[i] = h[c]!;
        i = c;
      }
      h[i] = last;
    }
    return top;
  }
}
