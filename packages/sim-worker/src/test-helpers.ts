/**
 * Shared by this package's tests (not exported from the package): driving a virtual clock together
 * with the promise-based streams that hang off it.
 */
import { VirtualClock, type Clock, type KvrError } from '@kvrouter/protocols';

/** Lets every pending promise reaction and I/O callback run. */
export const settle = (): Promise<void> => new Promise((r) => setImmediate(r));

/**
 * Runs the virtual clock timer by timer, settling promises in between, until `done()` holds or no
 * timer is left. A consumer that records `clock.now()` when an item arrives thus sees the exact
 * virtual time the item was pushed at.
 */
export async function runClock(
  clock: VirtualClock,
  done: () => boolean = () => false,
  limit = 100_000,
): Promise<void> {
  for (let i = 0; i < limit; i++) {
    await settle();
    if (done()) return;
    const due = clock.nextDue();
    if (due === undefined) return;
    clock.advanceTo(due);
  }
  throw new Error('runClock: too many steps');
}

/**
 * Consumes `stream` in the background, stamping each item with `clock.now()` when it arrives;
 * `isDone()` once it has ended or failed, `error()` what it failed with (null while it has not).
 */
export function collect<T>(clock: Pick<Clock, 'now'>, stream: AsyncIterable<T>) {
  const got: { t: number; item: T }[] = [];
  let done = false;
  let error: KvrError | null = null;
  void (async () => {
    try {
      for await (const item of stream) got.push({ t: clock.now(), item });
    } catch (e) {
      error = e as KvrError;
    }
    done = true;
  })();
  return { got, isDone: () => done, error: () => error };
}

/** A clock whose timers all fire `lateMs` after they are due (an overloaded event loop). */
export class LateClock implements Clock {
  constructor(
    readonly inner: VirtualClock,
    readonly lateMs: number,
  ) {}
  now = (): number => this.inner.now();
  setTimeout = (fn: () => void, ms: number): unknown => this.inner.setTimeout(fn, ms + this.lateMs);
  clearTimeout = (h: unknown): void => this.inner.clearTimeout(h);
}
