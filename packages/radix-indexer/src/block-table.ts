import {
  CTRL_ENTRIES,
  CTRL_WORDS,
  HARD_LOAD,
  HOLDERS,
  KEY_HI,
  KEY_LO,
  LOCAL_HI,
  LOCAL_LO,
  MAX_LOAD,
  META,
  META_CLAIMED,
  META_EMPTY,
  META_LIVE_CHILD,
  META_LIVE_ROOT,
  META_TOMBSTONE,
  PARENT_LO,
  entryWords,
  holderWords,
} from './layout.js';
import { KvrError } from '@kvrouter/protocols';

export interface SharedTableParts {
  /** Entry words (a SharedArrayBuffer). */
  buffer: SharedArrayBuffer;
  /** Shared counters (CTRL_* offsets). */
  ctrl: SharedArrayBuffer;
  capacity: number;
  maxSlots: number;
}

/**
 * Open-addressing table of block identities (layout.ts), linear probing.
 *
 * Two modes, one implementation:
 * - private (single-threaded index): plain stores, entries whose last holder leaves become
 *   tombstones, the table grows itself.
 * - shared (the pool): the words live in a SharedArrayBuffer written by several writer threads and
 *   read by the main thread. An insert claims an EMPTY entry with compareExchange (EMPTY -> CLAIMED),
 *   fills it, then publishes META with Atomics.store; holder bits change with Atomics.or/and, so
 *   each writer only flips the bits of the slots it owns. Entries are never deleted or moved while
 *   shared: one whose holders are all gone stays (matching nothing) until the next rehash, which
 *   the pool runs with every writer drained, into a new buffer it then publishes to readers.
 * A reader only follows META words and compares keys, so a torn read can miss a block but never
 * invent one.
 */
export class BlockTable {
  words: Int32Array;
  capacity: number;
  mask: number;
  readonly stride: number;
  readonly hw: number;
  readonly shared: boolean;
  /** Shared counters in shared mode; a private array otherwise. */
  readonly ctrl: Int32Array;
  live = 0;
  tombstones = 0;

  constructor(
    capacity: number,
    readonly maxSlots: number,
    shared?: { buffer: SharedArrayBuffer; ctrl: SharedArrayBuffer },
  ) {
    this.hw = holderWords(maxSlots);
    this.stride = entryWords(maxSlots);
    this.capacity = pow2(Math.max(16, capacity));
    this.mask = this.capacity - 1;
    this.shared = shared !== undefined;
    this.words = shared ? new Int32Array(shared.buffer) : new Int32Array(this.capacity * this.stride);
    this.ctrl = shared ? new Int32Array(shared.ctrl) : new Int32Array(CTRL_WORDS);
    if (this.words.length !== this.capacity * this.stride) {
      throw new KvrError('layout_mismatch', `table buffer holds ${this.words.length} words, expected ${this.capacity * this.stride}`);
    }
  }

  /** A new shared table (zeroed) of the given size. */
  static createShared(capacity: number, maxSlots: number): BlockTable {
    const cap = pow2(Math.max(16, capacity));
    const stride = entryWords(maxSlots);
    return new BlockTable(cap, maxSlots, {
      buffer: new SharedArrayBuffer(cap * stride * 4),
      ctrl: new SharedArrayBuffer(CTRL_WORDS * 4),
    });
  }

  static fromParts(p: SharedTableParts): BlockTable {
    return new BlockTable(p.capacity, p.maxSlots, { buffer: p.buffer, ctrl: p.ctrl });
  }

  parts(): SharedTableParts {
    if (!this.shared) throw new KvrError('not_shared', 'parts() needs a shared table');
    return {
      buffer: this.words.buffer as SharedArrayBuffer,
      ctrl: this.ctrl.buffer as SharedArrayBuffer,
      capacity: this.capacity,
      maxSlots: this.maxSlots,
    };
  }

  /** Occupied entries (live, empty-held and tombstones): what probing has to step over. */
  get occupied(): number {
    return this.shared ? Atomics.load(this.ctrl, CTRL_ENTRIES) : this.live + this.tombstones;
  }

  /** Word offset of the readable entry with this key, or -1. */
  find(lo: number, hi: number): number {
    const w = this.words;
    const stride = this.stride;
    const mask = this.mask;
    lo |= 0;
    hi |= 0;
    let i = lo & mask;
    for (let n = 0; n <= mask; n++) {
      const off = i * stride;
      const m = Atomics.load(w, off + META);
      if (m === META_EMPTY) return -1;
      if (m >= META_LIVE_ROOT && w[off + KEY_LO] === lo && w[off + KEY_HI] === hi) return off;
      i = (i + 1) & mask;
    }
    return -1;
  }

  /**
   * Returns the entry for `key`, inserting it (holders empty) if missing. In private mode this may
   * grow the table (all offsets change), so never hold offsets across calls.
   */
  upsert(lo: number, hi: number, localLo: number, localHi: number, hasParent: boolean, pLo: number, pHi: number): number {
    if (this.shared) return this.upsertShared(lo | 0, hi | 0, localLo | 0, localHi | 0, hasParent, pLo | 0, pHi | 0);
    lo |= 0;
    hi |= 0;
    if (this.live + this.tombstones + 1 > this.capacity * MAX_LOAD) this.grow();
    const w = this.words;
    const stride = this.stride;
    const mask = this.mask;
    let i = lo & mask;
    let firstTomb = -1;
    for (;;) {
      const off = i * stride;
      const m = w[off + META]!;
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
    this.fill(off, lo, hi, localLo, localHi, hasParent, pLo, pHi);
    w[off + META] = hasParent ? META_LIVE_CHILD : META_LIVE_ROOT;
    this.live++;
    return off;
  }

  private upsertShared(lo: number, hi: number, localLo: number, localHi: number, hasParent: boolean, pLo: number, pHi: number): number {
    const w = this.words;
    const stride = this.stride;
    const mask = this.mask;
    if (Atomics.load(this.ctrl, CTRL_ENTRIES) + 1 > this.capacity * HARD_LOAD) {
      throw new KvrError('table_full', `shared block table over ${HARD_LOAD * 100}% full; the pool should have grown it`);
    }
    let i = lo & mask;
    for (;;) {
      const off = i * stride;
      const m = Atomics.load(w, off + META);
      if (m === META_EMPTY) {
        if (Atomics.compareExchange(w, off + META, META_EMPTY, META_CLAIMED) === META_EMPTY) {
          this.fill(off, lo, hi, localLo, localHi, hasParent, pLo, pHi);
          Atomics.store(w, off + META, hasParent ? META_LIVE_CHILD : META_LIVE_ROOT);
          Atomics.add(this.ctrl, CTRL_ENTRIES, 1);
          return off;
        }
        continue; // lost the race for this entry: look at it again
      }
      if (m === META_CLAIMED) continue; // another writer is filling it in; it may be our key
      if (w[off + KEY_LO] === lo && w[off + KEY_HI] === hi) return off;
      i = (i + 1) & mask;
    }
  }

  private fill(off: number, lo: number, hi: number, localLo: number, localHi: number, hasParent: boolean, pLo: number, _pHi: number): void {
    const w = this.words;
    w[off + KEY_LO] = lo;
    w[off + KEY_HI] = hi;
    w[off + LOCAL_LO] = localLo | 0;
    w[off + LOCAL_HI] = localHi | 0;
    w[off + PARENT_LO] = hasParent ? pLo | 0 : 0;
    for (let k = 0; k < this.hw; k++) w[off + HOLDERS + k] = 0;
  }

  /** Sets the slot's holder bit; true if it was not set. */
  setBit(off: number, slot: number): boolean {
    const wi = off + HOLDERS + (slot >> 5);
    const bit = 1 << (slot & 31);
    if (this.shared) return (Atomics.or(this.words, wi, bit) & bit) === 0;
    const v = this.words[wi]!;
    if ((v & bit) !== 0) return false;
    this.words[wi] = v | bit;
    return true;
  }

  /** Clears the slot's holder bit; true if it was set. Private mode drops an entry left empty. */
  clearBit(off: number, slot: number): boolean {
    const wi = off + HOLDERS + (slot >> 5);
    const bit = 1 << (slot & 31);
    if (this.shared) return (Atomics.and(this.words, wi, ~bit) & bit) !== 0;
    const v = this.words[wi]!;
    if ((v & bit) === 0) return false;
    this.words[wi] = v & ~bit;
    if (this.holdersEmpty(off)) this.remove(off);
    return true;
  }

  /** Clears the given bits (one mask word per holder word) in every entry. */
  clearMask(mask: Int32Array): void {
    const w = this.words;
    this.forEachLive((off) => {
      let any = false;
      for (let k = 0; k < this.hw; k++) {
        const m = mask[k]!;
        if (m === 0 || (w[off + HOLDERS + k]! & m) === 0) continue;
        if (this.shared) Atomics.and(w, off + HOLDERS + k, ~m);
        else w[off + HOLDERS + k] = w[off + HOLDERS + k]! & ~m;
        any = true;
      }
      if (any && !this.shared && this.holdersEmpty(off)) this.remove(off);
    });
  }

  private remove(off: number): void {
    this.words[off + META] = META_TOMBSTONE;
    this.live--;
    this.tombstones++;
  }

  holdersEmpty(off: number): boolean {
    const w = this.words;
    for (let k = 0; k < this.hw; k++) if (w[off + HOLDERS + k] !== 0) return false;
    return true;
  }

  /** Private mode: rehash into a table sized for the live entries (drops tombstones). */
  grow(): void {
    // Double while live entries would fill more than half: growth stays amortised and a table
    // full of tombstones is rebuilt at the same size.
    let cap = this.capacity;
    while (this.live + 1 > cap * 0.5) cap *= 2;
    this.rehash(cap);
  }

  rehash(newCapacity: number): void {
    const next = new BlockTable(newCapacity, this.maxSlots);
    this.copyInto(next, false);
    this.words = next.words;
    this.capacity = next.capacity;
    this.mask = next.mask;
    this.live = next.live;
    this.tombstones = 0;
  }

  /**
   * Copies every readable entry into `dst` (which may have another capacity or slot width);
   * `dropEmpty` leaves out entries nobody holds (the compaction of shared tables).
   */
  copyInto(dst: BlockTable, dropEmpty: boolean): void {
    const src = this.words;
    const stride = this.stride;
    const w = dst.words;
    const dStride = dst.stride;
    const mask = dst.mask;
    const hw = Math.min(this.hw, dst.hw);
    let n = 0;
    for (let j = 0; j < this.capacity; j++) {
      const s = j * stride;
      const m = src[s + META]!;
      if (m < META_LIVE_ROOT) continue;
      if (dropEmpty && this.holdersEmpty(s)) continue;
      let i = src[s + KEY_LO]! & mask;
      while (w[i * dStride + META] !== META_EMPTY) i = (i + 1) & mask;
      const d = i * dStride;
      for (let k = 0; k < HOLDERS; k++) w[d + k] = src[s + k]!;
      for (let k = 0; k < hw; k++) w[d + HOLDERS + k] = src[s + HOLDERS + k]!;
      n++;
    }
    if (dst.shared) Atomics.store(dst.ctrl, CTRL_ENTRIES, n);
    else dst.live = n;
  }

  /** Calls fn(off) for every readable entry. */
  forEachLive(fn: (off: number) => void): void {
    const w = this.words;
    const stride = this.stride;
    for (let j = 0; j < this.capacity; j++) {
      const off = j * stride;
      if (w[off + META]! >= META_LIVE_ROOT) fn(off);
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
