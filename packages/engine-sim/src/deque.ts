/** Ring-buffer deque: the waiting queue needs O(1) push at both ends (preempted requests go first). */
export class Deque<T> {
  private buf: (T | undefined)[] = new Array<T | undefined>(16);
  private head = 0;
  length = 0;

  pushBack(v: T): void {
    if (this.length === this.buf.length) this.grow();
    this.buf[(this.head + this.length) & (this.buf.length - 1)] = v;
    this.length++;
  }

  pushFront(v: T): void {
    if (this.length === this.buf.length) this.grow();
    this.head = (this.head - 1) & (this.buf.length - 1);
    this.buf[this.head] = v;
    this.length++;
  }

  peek(): T | undefined {
    return this.length === 0 ? undefined : this.buf[this.head];
  }

  shift(): T | undefined {
    if (this.length === 0) return undefined;
    const v = this.buf[this.head];
    this.buf[this.head] = undefined;
    this.head = (this.head + 1) & (this.buf.length - 1);
    this.length--;
    return v;
  }

  at(i: number): T {
    return this.buf[(this.head + i) & (this.buf.length - 1)]!;
  }

  /** Removes the first occurrence; O(n), for cancellation only. */
  remove(v: T): boolean {
    const mask = this.buf.length - 1;
    for (let i = 0; i < this.length; i++) {
      if (this.buf[(this.head + i) & mask] !== v) continue;
      for (let j = i; j < this.length - 1; j++) {
        this.buf[(this.head + j) & mask] = this.buf[(this.head + j + 1) & mask];
      }
      this.buf[(this.head + this.length - 1) & mask] = undefined;
      this.length--;
      return true;
    }
    return false;
  }

  private grow(): void {
    const old = this.buf;
    const mask = old.length - 1;
    const next = new Array<T | undefined>(old.length * 2);
    for (let i = 0; i < this.length; i++) next[i] = old[(this.head + i) & mask];
    this.buf = next;
    this.head = 0;
  }
}
