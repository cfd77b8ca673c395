/**
 * One timer for every engine lane of a process. Each lane has at most one pass in flight and wants
 * a callback when it ends; with 64+ engines, one Node timer each would mean thousands of timer
 * objects created and cancelled per second. Instead a binary min-heap orders the due times and a
 * single timer is armed for the earliest.
 */
import { KvrError, type Clock } from '@kvrouter/protocols';
import { realClock } from '@kvrouter/protocols/node';

/**
 * The real clock of simulated engines: `performance.now()` (sub-ms, immune to wall-clock steps: pass
 * times are a few ms) with ref'd timers (a pass in flight is work the process must finish).
 */
export const engineClock: Clock = realClock({ monotonic: true, ref: true });

export interface ScheduledPass {
  /** Drops the callback if it has not run yet. */
  cancel(): void;
}

interface Entry extends ScheduledPass {
  due: number;
  seq: number;
  fn: (() => void) | null;
}

export interface PassSchedulerOptions {
  clock?: Clock;
  /**
   * Entries due within this many ms of the current time run in the current wake-up. Node truncates
   * fractional timeouts and fires on whole milliseconds, so without slack a pass ends on the next
   * tick, up to ~1 ms late; with 1 ms the error is spread around zero (benchmarks `mocker`: median
   * token lateness 1.0 ms without slack, ~0 with 1 ms). Default 1 on the real clock, 0 on an
   * injected clock (a virtual clock fires exactly on time).
   */
  slackMs?: number;
  /** Most callbacks run in one wake-up before yielding to I/O (catch-up after a stall). Default 4096. */
  maxPerWake?: number;
}

export class PassScheduler {
  readonly clock: Clock;
  private readonly slackMs: number;
  private readonly maxPerWake: number;
  private heap: Entry[] = [];
  private seq = 0;
  private timer: unknown = null;
  private armedFor = Infinity;
  private running = false;

  constructor(opts: PassSchedulerOptions = {}) {
    this.clock = opts.clock ?? engineClock;
    const slack = opts.slackMs ?? (opts.clock === undefined || opts.clock === engineClock ? 1 : 0);
    if (typeof slack !== 'number' || !(slack >= 0) || slack > 10)
      throw new KvrError(
        'invalid_argument',
        `slackMs: must be a number in [0, 10], got ${String(slack)}`,
        400,
        {
          field: 'slackMs',
        },
      );
    this.slackMs = slack;
    const m = opts.maxPerWake ?? 4096;
    if (!Number.isInteger(m) || m < 1)
      throw new KvrError('invalid_argument', `maxPerWake: must be an integer >= 1, got ${String(m)}`, 400, {
        field: 'maxPerWake',
      });
    this.maxPerWake = m;
  }

  /** Callbacks waiting (cancelled ones are dropped lazily and may still count). */
  get size(): number {
    return this.heap.length;
  }

  /** Runs `fn` once the clock reaches `due` (ms on the clock's scale). */
  at(due: number, fn: () => void): ScheduledPass {
    if (typeof due !== 'number' || Number.isNaN(due))
      throw new KvrError('invalid_argument', `due: must be a number, got ${String(due)}`, 400, {
        field: 'due',
      });
    const e: Entry = {
      due,
      seq: this.seq++,
      fn,
      cancel() {
        e.fn = null;
      },
    };
    this.push(e);
    if (!this.running && due < this.armedFor) this.arm();
    return e;
  }

  private arm(): void {
    this.disarm();
    const top = this.heap[0];
    if (top === undefined) return;
    this.armedFor = top.due;
    this.timer = this.clock.setTimeout(() => this.wake(), Math.max(0, top.due - this.clock.now()));
  }

  private disarm(): void {
    if (this.timer !== null) this.clock.clearTimeout(this.timer);
    this.timer = null;
    this.armedFor = Infinity;
  }

  private wake(): void {
    this.timer = null;
    this.armedFor = Infinity;
    this.running = true;
    let n = 0;
    try {
      while (this.heap.length > 0 && n < this.maxPerWake) {
        const top = this.heap[0];
        if (top.fn !== null && top.due > this.clock.now() + this.slackMs) break;
        this.pop();
        const fn = top.fn;
        if (fn === null) continue;
        top.fn = null;
        n++;
        fn();
      }
    } finally {
      this.running = false;
      this.arm();
    }
  }

  private push(e: Entry): void {
    const h = this.heap;
    h.push(e);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!before(e, h[p])) break;
      h[i] = h[p];
      i = p;
    }
    h[i] = e;
  }

  private pop(): void {
    const h = this.heap;
    const last = h.pop()!;
    if (h.length === 0) return;
    let i = 0;
    const n = h.length;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const c = r < n && before(h[r], h[l]) ? r : l;
      if (!before(h[c], last)) break;
      h[i] = h[c];
      i = c;
    }
    h[i] = last;
  }
}

const before = (a: Entry, b: Entry): boolean => a.due < b.due || (a.due === b.due && a.seq < b.seq);

let shared: PassScheduler | null = null;

/** The process-wide scheduler on the real clock: every fleet in a process shares one timer. */
export function defaultPassScheduler(): PassScheduler {
  return (shared ??= new PassScheduler());
}
