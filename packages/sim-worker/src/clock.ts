/**
 * Time as the worker runtime sees it. Structurally the same as the router's `Clock` and the
 * kv-events `Timers`, so one clock object (real or virtual) can drive all of them in a process.
 */
export interface Clock {
  /** Milliseconds on a monotonic scale (only differences matter). */
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/**
 * `performance.now()` rather than `Date.now()`: sub-millisecond and immune to wall-clock steps, which
 * matters because pass times are a few ms. Timers stay ref'd: a pass in flight is work the process
 * must finish (a timer exists only while some lane has work).
 */
export const realClock: Clock = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};

interface ManualTimer {
  at: number;
  seq: number;
  fn: () => void;
  live: boolean;
}

/**
 * A virtual clock for tests and simulations: time moves only through `advanceTo`, which runs due
 * timers in (time, creation) order with `now()` set to each timer's due time.
 */
export class ManualClock implements Clock {
  private t: number;
  private seq = 0;
  private timers: ManualTimer[] = [];

  constructor(startMs = 0) {
    this.t = startMs;
  }

  now = (): number => this.t;

  setTimeout = (fn: () => void, ms: number): unknown => {
    const timer: ManualTimer = { at: this.t + Math.max(0, ms), seq: this.seq++, fn, live: true };
    this.timers.push(timer);
    return timer;
  };

  clearTimeout = (h: unknown): void => {
    if (h && typeof h === 'object' && 'live' in h) (h as ManualTimer).live = false;
  };

  /** Due time of the earliest live timer. */
  nextDue(): number | undefined {
    return this.next()?.at;
  }

  advanceTo(target: number): void {
    for (;;) {
      const x = this.next();
      if (!x || x.at > target) break;
      this.t = Math.max(this.t, x.at);
      x.live = false;
      x.fn();
    }
    this.t = Math.max(this.t, target);
    this.timers = this.timers.filter((x) => x.live);
  }

  advance(ms: number): void {
    this.advanceTo(this.t + ms);
  }

  private next(): ManualTimer | undefined {
    let best: ManualTimer | undefined;
    for (const x of this.timers) {
      if (!x.live) continue;
      if (!best || x.at < best.at || (x.at === best.at && x.seq < best.seq)) best = x;
    }
    return best;
  }
}
