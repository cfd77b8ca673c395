/**
 * The router's view of time. Everything time-dependent in this package goes through a `Clock`, so a
 * deterministic simulator can drive the exact production code on a virtual clock (ARCHITECTURE.md:
 * router is a "core" package: clock, timers and randomness are injected).
 */

/** Opaque timer handle (Node's Timeout object, a browser's number); only handed back to its clock. */
export type TimerHandle = object | number;

export interface Clock {
  /** Milliseconds (wall clock in production: ms since the Unix epoch). */
  now(): number;
  /** Runs `fn` once after `ms`; production clocks should `unref()` so timers never keep a process up. */
  setTimeout(fn: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
}

interface VirtualTimer {
  at: number;
  seq: number;
  fn: () => void;
  cancelled: boolean;
}

/**
 * A pure virtual clock with timers: `advance(ms)` moves time forward and runs every timer that falls
 * due, in (due time, creation order), each seeing `now()` equal to its due time. Timers created while
 * advancing run in the same call if they fall due before the target. For tests and the simulator.
 */
export class VirtualClock implements Clock {
  private t: number;
  private seq = 0;
  private timers: VirtualTimer[] = [];

  constructor(startMs = 0) {
    this.t = startMs;
  }

  now = (): number => this.t;

  setTimeout = (fn: () => void, ms: number): TimerHandle => {
    const timer: VirtualTimer = { at: this.t + Math.max(0, ms), seq: this.seq++, fn, cancelled: false };
    this.timers.push(timer);
    return timer;
  };

  clearTimeout = (handle: TimerHandle): void => {
    if (typeof handle === 'object' && 'cancelled' in handle) (handle as VirtualTimer).cancelled = true;
  };

  /** Timers not yet run or cancelled. */
  get pending(): number {
    let n = 0;
    for (const x of this.timers) if (!x.cancelled) n++;
    return n;
  }

  /** Due time of the next live timer, or undefined. */
  nextDue(): number | undefined {
    const x = this.next();
    return x?.at;
  }

  /** Moves time forward by `ms`, running due timers in order; returns the new time. */
  advance(ms: number): number {
    if (!(ms >= 0) || !Number.isFinite(ms))
      throw new RangeError(`advance: ms must be a finite number >= 0, got ${ms}`);
    return this.advanceTo(this.t + ms);
  }

  advanceTo(target: number): number {
    for (;;) {
      const x = this.next();
      if (!x || x.at > target) break;
      this.t = Math.max(this.t, x.at);
      x.cancelled = true;
      x.fn();
    }
    this.t = Math.max(this.t, target);
    this.timers = this.timers.filter((x) => !x.cancelled);
    return this.t;
  }

  private next(): VirtualTimer | undefined {
    let best: VirtualTimer | undefined;
    for (const x of this.timers) {
      if (x.cancelled) continue;
      if (!best || x.at < best.at || (x.at === best.at && x.seq < best.seq)) best = x;
    }
    return best;
  }
}
