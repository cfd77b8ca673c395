import {
  CTRL_ENTRIES,
  CTRL_WORDS,
  GROW_LOAD,
  HARD_LOAD,
  HOLDERS,
  KEY_HI,
  KEY_LO,
  MAX_LOAD,
  META,
  META_CLAIMED,
  META_EMPTY,
  META_HINT,
  META_LIVE_CHILD,
  META_LIVE_ROOT,
  META_STATE,
  META_TOMBSTONE,
  MIN_CAPACITY,
  entryWords,
  holderWords,
  localLo,
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

const TWO_NEG32 = 2 ** -32;

/**
 * Home entry of a key in a table whose `scale` is capacity / 2^32: a multiplicative mix of both
 * words, then fastrange (the high bits of mix × capacity), so any capacity works without a modulo.
 * Sequence hashes are already uniform; the mix protects tables fed small or sequential raw keys.
 */
export function homeOf(lo: number, hi: number, scale: number): number {
  return ((Math.imul(lo ^ Math.imul(hi, 0x85ebca6b), 0x9e3779b1) >>> 0) * scale) | 0;
}

/** Capacity that puts `entries` at `load`. */
export const capacityFor = (entries: number, load: number): number =>
  Math.max(MIN_CAPACITY, Math.ceil(entries / load));

/**
 * Open-addressing table of block identities (layout.ts), linear probing.
 *
 * Two modes, one implementation:
 * - private (single-threaded index): plain stores, entries whose last holder leaves become
 *   tombstones, the table grows itself.
 * - shared (the pool): the words live in a SharedArrayBuffer written by several writer threads and
 *   read by the main thread. An insert claims an EMPTY entry with compareExchange (EMPTY -> CLAIMED),
 *   fills it (holder bit included), then publishes META with Atomics.store; later holder changes
 *   use Atomics.or/and, so each writer only flips the bits of the slots it owns. Entries are never
 *   deleted or moved while shared: one whose holders are all gone stays (matching nothing) until
 *   the next rehash, which the pool runs with every writer drained, into a new buffer it then
 *   publishes to readers.
 * A reader only follows META words and compares keys, so a torn read can miss a block but never
 * invent one.
 */
export class BlockTable {
  words: Int32Array;
  capacity: number;
  /** capacity / 2^32 (fastrange factor). */
  scale: number;
  readonly stride: number;
  readonly hw: number;
  /** Word offset of LOCAL_LO within an entry. */
  readonly local: number;
  readonly shared: boolean;
  /** Shared counters in shared mode; a private array otherwise. */
  readonly ctrl: Int32Array;
  live = 0;
  tombstones = 0;
  /** Shared mode: inserts by this thread not yet added to CTRL_ENTRIES, and the count seen then. */
  private pendingInserts = 0;
  private baseEntries = 0;

  constructor(
    capacity: number,
    readonly maxSlots: number,
    shared?: { buffer: SharedArrayBuffer; ctrl: SharedArrayBuffer },
  ) {
    this.hw = holderWords(maxSlots);
    this.stride = entryWords(maxSlots);
    this.local = localLo(this.hw);
    this.capacity = Math.max(MIN_CAPACITY, Math.ceil(capacity));
    this.scale = this.capacity * TWO_NEG32;
    this.shared = shared !== undefined;
    this.words = shared ? new Int32Array(shared.buffer) : new Int32Array(this.capacity * this.stride);
    this.ctrl = shared ? new Int32Array(shared.ctrl) : new Int32Array(CTRL_WORDS);
    if (this.words.length !== this.capacity * this.stride) {
      throw new KvrError(
        'layout_mismatch',
        `table buffer holds ${this.words.length} words, expected ${this.capacity * this.stride}`,
      );
    }
    if (this.shared) this.baseEntries = Atomics.load(this.ctrl, CTRL_ENTRIES);
  }

  /** A new shared table (zeroed) of the given size. */
  static createShared(capacity: number, maxSlots: number): BlockTable {
    const cap = Math.max(MIN_CAPACITY, Math.ceil(capacity));
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

  /** Shared mode: adds this thread's inserts to the shared count (writers call it once per task). */
  publishInserts(): void {
    if (!this.shared || this.pendingInserts === 0) return;
    this.baseEntries = Atomics.add(this.ctrl, CTRL_ENTRIES, this.pendingInserts) + this.pendingInserts;
    this.pendingInserts = 0;
  }

  home(lo: number, hi: number): number {
    return homeOf(lo, hi, this.scale);
  }

  /**
   * Reads the word at each home entry of `n` keys ((lo, hi) pairs in `seq`): their cache misses
   * overlap here instead of each stalling behind the atomics of the insert before it.
   */
  touch(seq: Uint32Array, n: number): number {
    const w = this.words;
    const stride = this.stride;
    const scale = this.scale;
    let acc = 0;
    for (let i = 0; i < n; i++) acc ^= w[homeOf(seq[2 * i]!, seq[2 * i + 1]!, scale) * stride]!;
    return acc;
  }

  /** Word offset of the readable entry with this key, or -1. */
  find(lo: number, hi: number): number {
    const w = this.words;
    const stride = this.stride;
    const cap = this.capacity;
    lo |= 0;
    hi |= 0;
    let i = homeOf(lo, hi, this.scale);
    for (let n = 0; n < cap; n++) {
      const off = i * stride;
      const m = Atomics.load(w, off + META);
      if (m === META_EMPTY) return -1;
      if ((m & META_STATE) >= META_LIVE_ROOT && w[off + KEY_LO] === lo && w[off + KEY_HI] === hi) return off;
      if (++i === cap) i = 0;
    }
    return -1;
  }

  /**
   * Adds `slot` to the holders of block `key`, inserting the entry if missing. Returns true if the
   * slot did not hold it. In private mode this may grow the table (all offsets change), so never
   * hold offsets across calls. `pLo` is the parent identity's low word (for the dump hint).
   */
  hold(
    lo: number,
    hi: number,
    localLo: number,
    localHi: number,
    hasParent: boolean,
    pLo: number,
    slot: number,
  ): boolean {
    lo |= 0;
    hi |= 0;
    const meta = hasParent ? META_LIVE_CHILD | (pLo & META_HINT) : META_LIVE_ROOT;
    if (this.shared) return this.holdShared(lo, hi, localLo, localHi, meta, slot);
    if (this.live + this.tombstones + 1 > this.capacity * MAX_LOAD) this.grow();
    const w = this.words;
    const stride = this.stride;
    const cap = this.capacity;
    let i = homeOf(lo, hi, this.scale);
    let firstTomb = -1;
    for (;;) {
      const off = i * stride;
      const m = w[off + META]! & META_STATE;
      if (m === META_EMPTY) break;
      if (m === META_TOMBSTONE) {
        if (firstTomb < 0) firstTomb = off;
      } else if (w[off + KEY_LO] === lo && w[off + KEY_HI] === hi) {
        return this.setBit(off, slot);
      }
      if (++i === cap) i = 0;
    }
    let off = i * stride;
    if (firstTomb >= 0) {
      off = firstTomb;
      this.tombstones--;
    }
    this.fill(off, lo, hi, localLo, localHi, slot);
    w[off + META] = meta;
    this.live++;
    return true;
  }

  private holdShared(
    lo: number,
    hi: number,
    localLo: number,
    localHi: number,
    meta: number,
    slot: number,
  ): boolean {
    const w = this.words;
    const stride = this.stride;
    const cap = this.capacity;
    let i = homeOf(lo, hi, this.scale);
    for (let n = 0; n < cap;) {
      const off = i * stride;
      const m = Atomics.load(w, off + META);
      if (m === META_EMPTY) {
        if (this.baseEntries + this.pendingInserts + 1 > cap * HARD_LOAD) {
          throw new KvrError(
            'table_full',
            `shared block table over ${HARD_LOAD * 100}% full; the pool should have grown it`,
          );
        }
        if (Atomics.compareExchange(w, off + META, META_EMPTY, META_CLAIMED) === META_EMPTY) {
          // The entry is ours and unpublished: plain stores, made visible by the META store.
          this.fill(off, lo, hi, localLo, localHi, slot);
          Atomics.store(w, off + META, meta);
          this.pendingInserts++;
          return true;
        }
        continue; // lost the race for this entry: look at it again
      }
      if (m === META_CLAIMED) continue; // another writer is filling it in; it may be our key
      if (w[off + KEY_LO] === lo && w[off + KEY_HI] === hi) return this.setBit(off, slot);
      if (++i === cap) i = 0;
      n++;
    }
    throw new KvrError('table_full', 'shared block table has no empty entry');
  }

  private fill(off: number, lo: number, hi: number, localLo: number, localHi: number, slot: number): void {
    const w = this.words;
    w[off + KEY_LO] = lo;
    w[off + KEY_HI] = hi;
    for (let k = 0; k < this.hw; k++) w[off + HOLDERS + k] = 0;
    w[off + HOLDERS + (slot >> 5)] = 1 << (slot & 31);
    w[off + this.local] = localLo | 0;
    w[off + this.local + 1] = localHi | 0;
  }

  /** Sets the slot's holder bit; true if it was not set. */
  setBit(off: number, slot: number): boolean {
    const wi = off + HOLDERS + (slot >> 5);
    const bit = 1 << (slot & 31);
    const v = this.words[wi]!;
    // Only this thread sets or clears this slot's bit, so a plain read of it is current.
    if ((v & bit) !== 0) return false;
    if (this.shared) Atomics.or(this.words, wi, bit);
    else this.words[wi] = v | bit;
    return true;
  }

  /** Clears the slot's holder bit; true if it was set. Private mode drops an entry left empty. */
  clearBit(off: number, slot: number): boolean {
    const wi = off + HOLDERS + (slot >> 5);
    const bit = 1 << (slot & 31);
    const v = this.words[wi]!;
    if ((v & bit) === 0) return false;
    if (this.shared) {
      Atomics.and(this.words, wi, ~bit);
      return true;
    }
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
    // Sized so live entries fill GROW_LOAD: growth stays amortised (x1.23 per step) and a table
    // full of tombstones is rebuilt at about the same size.
    this.rehash(capacityFor(this.live + 1, GROW_LOAD));
  }

  rehash(newCapacity: number): void {
    const next = new BlockTable(newCapacity, this.maxSlots);
    this.copyInto(next, false);
    this.words = next.words;
    this.capacity = next.capacity;
    this.scale = next.scale;
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
    const cap = dst.capacity;
    const hw = Math.min(this.hw, dst.hw);
    let n = 0;
    for (let j = 0; j < this.capacity; j++) {
      const s = j * stride;
      const m = src[s + META]!;
      if ((m & META_STATE) < META_LIVE_ROOT) continue;
      if (dropEmpty && this.holdersEmpty(s)) continue;
      let i = homeOf(src[s + KEY_LO]!, src[s + KEY_HI]!, dst.scale);
      while (w[i * dStride + META] !== META_EMPTY) if (++i === cap) i = 0;
      const d = i * dStride;
      w[d + META] = m;
      w[d + KEY_LO] = src[s + KEY_LO]!;
      w[d + KEY_HI] = src[s + KEY_HI]!;
      for (let k = 0; k < hw; k++) w[d + HOLDERS + k] = src[s + HOLDERS + k]!;
      w[d + dst.local] = src[s + this.local]!;
      w[d + dst.local + 1] = src[s + this.local + 1]!;
      n++;
    }
    if (dst.shared) {
      Atomics.store(dst.ctrl, CTRL_ENTRIES, n);
      dst.baseEntries = n;
    } else dst.live = n;
  }

  /** Calls fn(off) for every readable entry. */
  forEachLive(fn: (off: number) => void): void {
    const w = this.words;
    const stride = this.stride;
    for (let j = 0; j < this.capacity; j++) {
      const off = j * stride;
      if ((w[off + META]! & META_STATE) >= META_LIVE_ROOT) fn(off);
    }
  }

  bytes(): number {
    return this.words.byteLength;
  }
}
