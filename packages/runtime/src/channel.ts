/**
 * A single-consumer async queue: producers push synchronously, one consumer pulls with `for await`.
 * Used for discovery watches and request-plane streams. Items pushed before `fail` are still
 * delivered (a stream's tokens before its error matter to migration); `abort` drops them.
 */
export class Channel<T> implements AsyncIterableIterator<T> {
  private buf: T[] = [];
  private head = 0;
  private waiter: { resolve: (r: IteratorResult<T>) => void; reject: (e: unknown) => void } | null = null;
  /** 0 open, 1 ended, 2 failed. */
  private state = 0;
  private error: unknown = undefined;
  /** Called once when the consumer stops early (`return()` while still open). */
  onReturn: (() => void) | null = null;
  private room: { below: number; resolve: () => void } | null = null;

  get closed(): boolean {
    return this.state !== 0;
  }

  /** Items pushed and not yet pulled. */
  get size(): number {
    return this.buf.length - this.head;
  }

  /**
   * For a producer that should not run ahead of the consumer: undefined while fewer than `below`
   * items wait, else a promise that resolves once the consumer has pulled enough (or stopped).
   */
  whenBelow(below: number): Promise<void> | undefined {
    if (this.state !== 0 || this.size < below) return undefined;
    return new Promise<void>((resolve) => {
      this.room = { below, resolve };
    });
  }

  private freeRoom(): void {
    const r = this.room;
    if (r && (this.state !== 0 || this.size < r.below)) {
      this.room = null;
      r.resolve();
    }
  }

  push(v: T): boolean {
    if (this.state !== 0) return false;
    const w = this.waiter;
    if (w) {
      this.waiter = null;
      w.resolve({ value: v, done: false });
    } else this.buf.push(v);
    return true;
  }

  end(): void {
    if (this.state !== 0) return;
    this.state = 1;
    this.onReturn = null;
    this.wake();
  }

  /** Ends with an error after the buffered items. */
  fail(e: unknown): void {
    if (this.state !== 0) return;
    this.state = 2;
    this.error = e;
    this.onReturn = null;
    this.wake();
  }

  /** Ends with an error at once, dropping buffered items. */
  abort(e: unknown): void {
    if (this.state !== 0) return;
    this.buf = [];
    this.head = 0;
    this.fail(e);
  }

  private wake(): void {
    this.freeRoom();
    const w = this.waiter;
    if (!w) return;
    this.waiter = null;
    if (this.state === 2) w.reject(this.error);
    else w.resolve({ value: undefined, done: true });
  }

  next(): Promise<IteratorResult<T>> {
    if (this.head < this.buf.length) {
      const v = this.buf[this.head]!;
      // Drop consumed items in bulk so a long stream never shifts an array per item.
      if (++this.head === this.buf.length) {
        this.buf = [];
        this.head = 0;
      } else if (this.head > 1024 && this.head * 2 > this.buf.length) {
        this.buf = this.buf.slice(this.head);
        this.head = 0;
      }
      if (this.room) this.freeRoom();
      return Promise.resolve({ value: v, done: false });
    }
    if (this.state === 1) return Promise.resolve({ value: undefined, done: true });
    if (this.state === 2) {
      // The error is reported once; later pulls see a finished iterator.
      const e = this.error;
      this.state = 1;
      return Promise.reject(e instanceof Error ? e : new Error(String(e)));
    }
    if (this.waiter) return Promise.reject(new Error('Channel: concurrent next() calls'));
    return new Promise((resolve, reject) => {
      this.waiter = { resolve, reject };
    });
  }

  return(): Promise<IteratorResult<T>> {
    if (this.state === 0) {
      this.state = 1;
      this.buf = [];
      this.head = 0;
      this.freeRoom();
      const cb = this.onReturn;
      this.onReturn = null;
      this.wake();
      cb?.();
    }
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): this {
    return this;
  }
}
