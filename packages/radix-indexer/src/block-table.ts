import {
  FIXED_WORDS,
  HOLDERS,
  KEY_HI,
  KEY_LO,
  LOCAL_HI,
  LOCAL_LO,
  MAX_LOAD,
  META,
  META_EMPTY,
  META_LIVE_CHILD,
  META_LIVE_ROOT,
  META_TOMBSTONE,
  PARENT_HI,
  PARENT_LO,
  holderWords,
} from './layout.js';

/**
 * Open-addressing table of block identities (see layout.ts). Single writer; readers may run
 * concurrently on a shared buffer (./pool) because a probe only ever follows META words.
 * Entry references are word offsets into `words` (entry index × stride).
 */
export class BlockTable {
  words: Int32Array;
  capacity: number;
  mask: number;
  readonly stride: number;
  readonly hw: number;
  live = 0;
  tombstones = 0;

  constructor(
    capacity: number,
    readonly maxSlots: number,
    buffer?: ArrayBufferLike,
  ) {
    this.hw = holderWords(maxSlots);
    this.stride = FIXED_WORDS + this.hw;
    this.capacity = pow2(Math.max(16, capacity));
    this.mask = this.capacity - 1;
    this.words = buffer ? new Int32Array(buffer) : new Int32Array(this.capacity * this.stride);
  }

  /** Word offset of the live entry with this key, or -1. */
  find(lo: number, hi: number): number {
    const w = this.words;
    const stride = this.stride;
    const mask = this.mask;
    lo |= 0;
    hi |= 0;
    let i = lo & mask;
    for (;;) {
      const off = i * stride;
      const m = w[off + META];
      if (m === META_EMPTY) return -1;
      if (m >= META_LIVE_ROOT && w[off + KEY_LO] === lo && w[off + KEY_HI] === hi) return off;
      i = (i + 1) & mask;
    }
  }

  /**
   * Returns the entry for `key`, inserting it (holders empty) if missing. The caller sets holder
   * bits. May grow the table (all offsets change), so never hold offsets across calls.
   */
  upsert(lo: number, hi: number, localLo: number, localHi: number, hasParent: boolean, pLo: number, pHi: number): number {
    lo |= 0;
    hi |= 0;
    if ((this.live + this.tombstones + 1) > this.capacity * MAX_LOAD) this.grow();
    const w = this.words;
    const stride = this.stride;
    const mask = this.mask;
    let i = lo & mask;
    let firstTomb = -1;
    for (;;) {
      const off = i * stride;
      const m = w[off + META];
      if (m === META_EMPTY) break;
      if (m === META_TOMBSTONE) {
        if (firstTomb < 0) firstTomb = off;
      } else if (w[off + KEY_LO] === lo && w[off + KEY_HI] === hi) {
        return off;
      }
      i = (i + 1) & mask;
    }
    let off = i * stride;
    if (firstTomb >= 0) {
      off = firstTomb;
      this.tombstones--;
    }
    w[off + KEY_LO] = lo;
    w[off + KEY_HI] = hi;
    w[off + LOCAL_LO] = localLo | 0;
    w[off + LOCAL_HI] = localHi | 0;
    w[off + PARENT_LO] = hasParent ? pLo | 0 : 0;
    w[off + PARENT_HI] = hasParent ? pHi | 0 : 0;
    for (let k = 0; k < this.hw; k++) w[off + HOLDERS + k] = 0;
    w[off + META] = hasParent ? META_LIVE_CHILD : META_LIVE_ROOT;
    this.live++;
    return off;
  }

  /** Marks the entry deleted (tombstone). */
  remove(off: number): void {
    this.words[off + META] = META_TOMBSTONE;
    this.live--;
    this.tombstones++;
  }

  holdersEmpty(off: number): boolean {
    const w = this.words;
    for (let k = 0; k < this.hw; k++) if (w[off + HOLDERS + k] !== 0) return false;
    return true;
  }

  /** Rehash into a table sized for the live entries (drops tombstones). */
  grow(): void {
    // Double while live entries would fill more than half: growth stays amortised and a table
    // full of tombstones is rebuilt at the same size.
    let cap = this.capacity;
    while (this.live + 1 > cap * 0.5) cap *= 2;
    this.rehash(cap);
  }

  rehash(newCapacity: number): void {
    const old = this.words;
    const oldCap = this.capacity;
    const stride = this.stride;
    this.capacity = pow2(newCapacity);
    this.mask = this.capacity - 1;
    this.words = new Int32Array(this.capacity * stride);
    this.tombstones = 0;
    const w = this.words;
    const mask = this.mask;
    for (let j = 0; j < oldCap; j++) {
      const src = j * stride;
      if (old[src + META] < META_LIVE_ROOT) continue;
      let i = old[src + KEY_LO] & mask;
      while (w[i * stride + META] !== META_EMPTY) i = (i + 1) & mask;
      const dst = i * stride;
      for (let k = 0; k < stride; k++) w[dst + k] = old[src + k]!;
    }
  }

  /** Calls fn(off) for every live entry. */
  forEachLive(fn: (off: number) => void): void {
    const w = this.words;
    const stride = this.stride;
    for (let j = 0; j < this.capacity; j++) {
      const off = j * stride;
      if (w[off + META] >= META_LIVE_ROOT) fn(off);
    }
  }

  bytes(): number {
    return this.words.byteLength;
  }
}

export function pow2(n: number): number {
  let c = 1;
  while (c < n) c *= 2;
  return c;
}
