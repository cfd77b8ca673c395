/**
 * Time as every package sees it. Anything time-dependent takes a `Clock` (or only `Timers`), so the
 * deterministic simulator and tests drive the exact production code on a `VirtualClock`. The real
 * clock lives in the io subpath (`@kvrouter/protocols/node`: `realClock()`), because this entry point
 * is pure (no timers, no wall clock).
 */

/** Opaque timer handle (Node's Timeout, a virtual timer); only ever handed back to the clock that made it. */
export type TimerHandle = unknown;

/** One-shot timers. Production implementations should `unref()` unless a timer is work the process must finish. */
export interface Timers {
  /** Runs `fn` once after `ms` (negative or NaN: as soon as possible). */
  setTimeout(fn: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
}

export interface Clock extends Timers {
  /** Milliseconds. Which epoch depends on the clock (`realClock()`: Unix epoch; monotonic: process start); only differences matter to callers. */
  now(): number;
}

interface VirtualTimer {
  at: number;
  ms: number;
  seq: number;
  fn: () => void;
  live: boolean;
}

/**
 * A pure virtual clock with timers: time moves only through `advance` / `advanceTo`, which run every
 * timer that falls due in (due time, creation order), each seeing `now()` equal to its due time.
 * Timers created while advancing run in the same call if they fall due by the target. For tests and
 * the simulator.
 */
export class VirtualClock implements Clock {
  private t: number;
  private seq = 0;
  private timers: VirtualTimer[] = [];

  constructor(startMs = 0) {
    if (!Number.isFinite(startMs))
      throw new RangeError(`VirtualClock: startMs must be finite, got ${startMs}`);
    this.t = startMs;
  }

  now = (): number => this.t;

  setTimeout = (fn: () => void, ms: number): TimerHandle => {
    const delay = ms > 0 ? ms : 0; // NaN and negatives: due now, like Node
    const timer: VirtualTimer = { at: this.t + delay, ms, seq: this.seq++, fn, live: true };
    this.timers.push(timer);
    return timer;
  };

  clearTimeout = (handle: TimerHandle): void => {
    if (handle !== null && typeof handle === 'object' && 'live' in handle)
      (handle as VirtualTimer).live = false;
  };

  /** Timers not yet run or cancelled. */
  get pending(): number {
    let n = 0;
    for (const x of this.timers) if (x.live) n++;
    return n;
  }

  /** Requested delays of the live timers, in creation order (tests assert backoff schedules with it). */
  pendingDelays(): number[] {
    return this.timers.filter((x) => x.live).map((x) => x.ms);
  }

  /** Due time of the earliest live timer, or undefined. */
  nextDue(): number | undefined {
    return this.next()?.at;
  }

  /** Moves time forward by `ms` (finite, >= 0), running due timers in order; returns the new time. */
  advance(ms: number): number {
    if (!(ms >= 0) || !Number.isFinite(ms))
      throw new RangeError(`advance: ms must be a finite number >= 0, got ${ms}`);
    return this.advanceTo(this.t + ms);
  }

  /** Moves time to `target` (never backwards: an earlier target only runs what is already due); returns the new time. */
  advanceTo(target: number): number {
    if (!(target >= this.t)) target = this.t;
    for (;;) {
      const x = this.next();
      if (!x || x.at > target) break;
      this.t = Math.max(this.t, x.at);
      x.live = false;
      x.fn();
    }
    this.t = Math.max(this.t, target);
    this.timers = this.timers.filter((x) => x.live);
    return this.t;
  }

  private next(): VirtualTimer | undefined {
    let best: VirtualTimer | undefined;
    for (const x of this.timers) {
      if (!x.live) continue;
      if (!best || x.at < best.at || (x.at === best.at && x.seq < best.seq)) best = x;
    }
    return best;
  }
}
