/**
 * The BPE merge step on ids. Merge ranks live in one open-addressing table keyed by
 * (left id, right id): four parallel Int32Arrays (left, right, rank, merged id), linear probing.
 *
 * Semantics are Hugging Face `tokenizers`' `Word::merge_all` without dropout: repeatedly merge the
 * adjacent pair with the lowest rank, the leftmost one among equal ranks, until no pair has a rank.
 * Short words use a scan over a cached rank per adjacent pair (O(n²) lookups at worst, no
 * allocation); long words use a binary heap of (rank, position) over a doubly linked symbol list.
 */

const EMPTY = -1;

export class MergeTable {
  private readonly left: Int32Array;
  private readonly right: Int32Array;
  private readonly rank: Int32Array;
  private readonly merged: Int32Array;
  private readonly mask: number;
  /** 32 - log2(capacity): the hash's top bits are the slot. */
  private readonly shift: number;
  readonly size: number;

  /** `pairs` holds (left, right, merged) triples in rank order; a repeated pair keeps its later rank. */
  constructor(pairs: Int32Array) {
    const n = pairs.length / 3;
    let cap = 16;
    while (cap < n * 2) cap *= 2;
    this.mask = cap - 1;
    this.shift = 32 - Math.log2(cap);
    this.left = new Int32Array(cap).fill(EMPTY);
    this.right = new Int32Array(cap);
    this.rank = new Int32Array(cap);
    this.merged = new Int32Array(cap);
    let size = 0;
    for (let r = 0; r < n; r++) {
      const a = pairs[3 * r]!;
      const b = pairs[3 * r + 1]!;
      let h = hash(a, b) >>> this.shift;
      while (this.left[h] !== EMPTY && (this.left[h] !== a || this.right[h] !== b)) h = (h + 1) & this.mask;
      if (this.left[h] === EMPTY) size++;
      this.left[h] = a;
      this.right[h] = b;
      this.rank[h] = r;
      this.merged[h] = pairs[3 * r + 2]!;
    }
    this.size = size;
  }

  /** Slot of the pair, or -1. */
  slot(a: number, b: number): number {
    const mask = this.mask;
    const left = this.left;
    let h = hash(a, b) >>> this.shift;
    for (;;) {
      const l = left[h]!;
      if (l === a && this.right[h] === b) return h;
      if (l === EMPTY) return -1;
      h = (h + 1) & mask;
    }
  }

  /** Rank of the pair, or 0x7fffffff when the pair does not merge. */
  rankOf(a: number, b: number): number {
    const s = this.slot(a, b);
    return s < 0 ? NO_RANK : this.rank[s]!;
  }

  mergedOf(a: number, b: number): number {
    return this.merged[this.slot(a, b)]!;
  }
}

const NO_RANK = 0x7fffffff;

/** Multiplicative hash of the pair; the caller keeps the top bits. */
function hash(a: number, b: number): number {
  return Math.imul(Math.imul(a, 0x9e3779b1) ^ b, 0x85ebca77);
}

/** Words longer than this take the heap path. */
const SCAN_MAX = 48;

/**
 * Scratch space of one merger (one per tokenizer; not re-entrant, which JavaScript's single
 * thread guarantees for synchronous encode calls).
 */
export class Merger {
  private ranks = new Int32Array(256);
  // Heap path.
  private prev = new Int32Array(256);
  private next = new Int32Array(256);
  private heapRank = new Int32Array(256);
  private heapPos = new Int32Array(256);

  constructor(private readonly table: MergeTable) {}

  /** Merges `ids[0, n)` in place; returns the new length. */
  merge(ids: Int32Array, n: number): number {
    if (n < 2) return n;
    return n <= SCAN_MAX ? this.mergeScan(ids, n) : this.mergeHeap(ids, n);
  }

  private mergeScan(ids: Int32Array, n: number): number {
    const t = this.table;
    const ranks = this.ranks;
    for (let i = 0; i + 1 < n; i++) ranks[i] = t.rankOf(ids[i]!, ids[i + 1]!);
    for (;;) {
      let best = NO_RANK;
      let at = -1;
      for (let i = 0; i + 1 < n; i++) {
        const r = ranks[i]!;
        if (r < best) {
          best = r;
          at = i;
        }
      }
      if (at < 0) return n;
      ids[at] = t.mergedOf(ids[at]!, ids[at + 1]!);
      // Drop the right symbol.
      for (let i = at + 1; i + 1 < n; i++) {
        ids[i] = ids[i + 1]!;
        ranks[i] = ranks[i + 1]!;
      }
      n--;
      if (at > 0) ranks[at - 1] = t.rankOf(ids[at - 1]!, ids[at]!);
      if (at + 1 < n) ranks[at] = t.rankOf(ids[at]!, ids[at + 1]!);
    }
  }

  private grow(n: number): void {
    let cap = this.prev.length;
    while (cap < n + 1) cap *= 2;
    if (cap === this.prev.length) return;
    this.prev = new Int32Array(cap);
    this.next = new Int32Array(cap);
    this.heapRank = new Int32Array(cap);
    this.heapPos = new Int32Array(cap);
  }

  private mergeHeap(ids: Int32Array, n: number): number {
    this.grow(n);
    const t = this.table;
    const prev = this.prev;
    const next = this.next;
    const hr = this.heapRank;
    const hp = this.heapPos;
    let size = 0;
    const push = (rank: number, pos: number): void => {
      let i = size++;
      while (i > 0) {
        const p = (i - 1) >> 1;
        const pr = hr[p]!;
        if (pr < rank || (pr === rank && hp[p]! < pos)) break;
        hr[i] = pr;
        hp[i] = hp[p]!;
        i = p;
      }
      hr[i] = rank;
      hp[i] = pos;
    };
    for (let i = 0; i < n; i++) {
      prev[i] = i - 1;
      next[i] = i + 1 < n ? i + 1 : -1;
    }
    for (let i = 0; i + 1 < n; i++) {
      const r = t.rankOf(ids[i]!, ids[i + 1]!);
      if (r !== NO_RANK) push(r, i);
    }
    // A removed symbol has ids[i] = -1.
    while (size > 0) {
      const rank = hr[0]!;
      const pos = hp[0]!;
      // Pop.
      size--;
      if (size > 0) {
        const lr = hr[size]!;
        const lp = hp[size]!;
        let i = 0;
        for (;;) {
          let c = 2 * i + 1;
          if (c >= size) break;
          if (c + 1 < size && (hr[c + 1]! < hr[c]! || (hr[c + 1] === hr[c] && hp[c + 1]! < hp[c]!))) c++;
          if (lr < hr[c]! || (lr === hr[c] && lp < hp[c]!)) break;
          hr[i] = hr[c]!;
          hp[i] = hp[c]!;
          i = c;
        }
        hr[i] = lr;
        hp[i] = lp;
      }
      const a = ids[pos]!;
      if (a < 0) continue;
      const right = next[pos]!;
      if (right < 0) continue;
      // Stale entry: the pair at pos changed since it was pushed.
      if (t.rankOf(a, ids[right]!) !== rank) continue;
      ids[pos] = t.mergedOf(a, ids[right]!);
      ids[right] = -1;
      const nn = next[right]!;
      next[pos] = nn;
      if (nn >= 0) prev[nn] = pos;
      const p = prev[pos]!;
      if (p >= 0) {
        const r = t.rankOf(ids[p]!, ids[pos]!);
        if (r !== NO_RANK) push(r, p);
      }
      if (nn >= 0) {
        const r = t.rankOf(ids[pos]!, ids[nn]!);
        if (r !== NO_RANK) push(r, pos);
      }
    }
    let m = 0;
    for (let i = 0; i >= 0; i = next[i]!) ids[m++] = ids[i]!;
    return m;
  }
}
