/**
 * Entries found by a numeric key that does not identify them alone (a hash of part of what they
 * stand for): per key a chain, newest first, of at most `perKey` entries; keys least recently used
 * first out once the entries' sizes pass `limit`. The caller walks `first(key)` and decides what
 * matches, then `touch`es the key of a hit. Serves the body string cache (http/json-bytes.ts:
 * keyed by a string's first bytes) and the prefix cache's fingerprint memo (tokenizer/encoder.ts:
 * keyed by a sample of a string).
 */
export interface Chained<E> {
  next: E | null;
}

export class KeyedChains<E extends Chained<E>> {
  private readonly heads = new Map<number, E>();
  /** Sum of the entries' sizes (the bound's measure). */
  held = 0;
  /** Entries dropped: past `perKey`, or to stay within `limit`. */
  evicted = 0;

  constructor(
    readonly limit: number,
    private readonly perKey: number,
    private readonly sizeOf: (e: E) => number,
  ) {}

  /** Entries kept. */
  get count(): number {
    let n = 0;
    for (const head of this.heads.values()) for (let e: E | null = head; e !== null; e = e.next) n++;
    return n;
  }

  /** The newest entry under `key` (the rest follow by `next`), or null. */
  first(key: number): E | null {
    return this.heads.get(key) ?? null;
  }

  /** `key` had a hit: it is now the most recently used (the map's order is the eviction order). */
  touch(key: number): void {
    const head = this.heads.get(key);
    if (head === undefined) return;
    this.heads.delete(key);
    this.heads.set(key, head);
  }

  /** Keeps `e` first under `key`, drops that key's entries past `perKey`, then keys until within `limit`. */
  add(key: number, e: E): void {
    const first = this.heads.get(key) ?? null;
    e.next = first;
    let last = e;
    for (let k = 1; k < this.perKey && last.next !== null; k++) last = last.next;
    this.drop(last.next);
    last.next = null;
    if (first !== null) this.heads.delete(key);
    this.heads.set(key, e);
    this.held += this.sizeOf(e);
    for (const [k, head] of this.heads) {
      if (this.held <= this.limit) break;
      this.heads.delete(k);
      this.drop(head);
    }
  }

  /** Uncounts `e` and the entries after it. */
  private drop(e: E | null): void {
    for (; e !== null; e = e.next) {
      this.held -= this.sizeOf(e);
      this.evicted++;
    }
  }
}
