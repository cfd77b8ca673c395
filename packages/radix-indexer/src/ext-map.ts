import { EXT_HI, EXT_LO, EXT_SEQ_HI, EXT_SEQ_LO, EXT_SLOT1, EXT_WORDS, MAX_LOAD } from './layout.js';
import { pow2 } from './block-table.js';


/**
 * Per-slot map from an engine's external block hash to the router's block identity (sequence
 * hash): `Ext[w]` of PROTOCOL §7.2 for every slot in one open-addressing table. Linear probing with
 * backward-shift deletion (no tombstones). Private to the thread that applies the slot's events.
 * An optional f64 column (`aux`) carries per-entry data for approximate mode (expiry time).
 */
export class ExtMap {
  words: Int32Array;
  aux: Float64Array | undefined;
  capacity: number;
  mask: number;
  size = 0;
  /** Word offset of the last successful `find` (valid until the next mutation). */
  lastOff = -1;

  constructor(
    capacity = 1024,
    private readonly withAux = false,
  ) {
    this.capacity = pow2(Math.max(16, capacity));
    this.mask = this.capacity - 1;
    this.words = new Int32Array(this.capacity * EXT_WORDS);
    this.aux = withAux ? new Float64Array(this.capacity) : undefined;
  }

  /** Engines' external hashes can be sequential ids, so mix before masking (murmur3 finaliser). */
  private home(slot: number, lo: number): number {
    let h = lo ^ Math.imul(slot + 1, 0x9e3779b1);
    h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
    h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
    return (h ^ (h >>> 16)) & this.mask;
  }

  /** Entry offset for (slot, ext) or -1. */
  find(slot: number, lo: number, hi: number): number {
    const w = this.words;
    const s1 = slot + 1;
    lo |= 0;
    hi |= 0;
    let i = this.home(slot, lo);
    for (;;) {
      const off = i * EXT_WORDS;
      const s = w[off + EXT_SLOT1];
      if (s === 0) return -1;
      if (s === s1 && w[off + EXT_LO] === lo && w[off + EXT_HI] === hi) return off;
      i = (i + 1) & this.mask;
    }
  }

  /** Sets (slot, ext) -> seq; returns the entry offset. */
  set(slot: number, lo: number, hi: number, seqLo: number, seqHi: number): number {
    if (this.size + 1 > this.capacity * MAX_LOAD) this.rehash(this.capacity * 2);
    const w = this.words;
    const s1 = slot + 1;
    lo |= 0;
    hi |= 0;
    let i = this.home(slot, lo);
    for (;;) {
      const off = i * EXT_WORDS;
      const s = w[off + EXT_SLOT1];
      if (s === 0) {
        w[off + EXT_SLOT1] = s1;
        w[off + EXT_LO] = lo;
        w[off + EXT_HI] = hi;
        w[off + EXT_SEQ_LO] = seqLo | 0;
        w[off + EXT_SEQ_HI] = seqHi | 0;
        if (this.aux) this.aux[i] = 0;
        this.size++;
        return off;
      }
      if (s === s1 && w[off + EXT_LO] === lo && w[off + EXT_HI] === hi) {
        w[off + EXT_SEQ_LO] = seqLo | 0;
        w[off + EXT_SEQ_HI] = seqHi | 0;
        return off;
      }
      i = (i + 1) & this.mask;
    }
  }

  /** Deletes the entry at `off` (from find/set) with backward-shift so probes stay unbroken. */
  deleteAt(off: number): void {
    const w = this.words;
    const mask = this.mask;
    let hole = off / EXT_WORDS;
    let j = hole;
    for (;;) {
      j = (j + 1) & mask;
      const jo = j * EXT_WORDS;
      const s = w[jo + EXT_SLOT1];
      if (s === 0) break;
      const h = this.home(s - 1, w[jo + EXT_LO]);
      // Move j back into the hole if its home is not in the cyclic range (hole, j].
      const inRange = hole <= j ? h > hole && h <= j : h > hole || h <= j;
      if (!inRange) {
        w.copyWithin(hole * EXT_WORDS, jo, jo + EXT_WORDS);
        if (this.aux) this.aux[hole] = this.aux[j]!;
        hole = j;
      }
    }
    w.fill(0, hole * EXT_WORDS, hole * EXT_WORDS + EXT_WORDS);
    this.size--;
  }

  rehash(newCapacity: number): void {
    const old = this.words;
    const oldAux = this.aux;
    const oldCap = this.capacity;
    this.capacity = pow2(newCapacity);
    this.mask = this.capacity - 1;
    this.words = new Int32Array(this.capacity * EXT_WORDS);
    this.aux = this.withAux ? new Float64Array(this.capacity) : undefined;
    const w = this.words;
    for (let j = 0; j < oldCap; j++) {
      const src = j * EXT_WORDS;
      const s = old[src + EXT_SLOT1];
      if (s === 0) continue;
      let i = this.home(s - 1, old[src + EXT_LO]);
      while (w[i * EXT_WORDS + EXT_SLOT1] !== 0) i = (i + 1) & this.mask;
      const dst = i * EXT_WORDS;
      for (let k = 0; k < EXT_WORDS; k++) w[dst + k] = old[src + k]!;
      if (oldAux) this.aux![i] = oldAux[j]!;
    }
  }

  /** Calls fn(off) for every entry of `slot` (read-only: do not mutate the map inside fn). */
  forEachOf(slot: number, fn: (off: number) => void): void {
    const w = this.words;
    const s1 = slot + 1;
    for (let j = 0; j < this.capacity; j++) if (w[j * EXT_WORDS + EXT_SLOT1] === s1) fn(j * EXT_WORDS);
  }

  /** Removes every entry of the given slots in one O(capacity) rebuild; fn sees each before removal. */
  removeSlots(slots: ReadonlySet<number>, fn?: (off: number) => void): void {
    const w = this.words;
    let removed = 0;
    for (let j = 0; j < this.capacity; j++) {
      const off = j * EXT_WORDS;
      const s = w[off + EXT_SLOT1];
      if (s !== 0 && slots.has(s - 1)) {
        fn?.(off);
        w[off + EXT_SLOT1] = -1; // marked; dropped by the rebuild below
        removed++;
      }
    }
    if (removed === 0) return;
    for (let j = 0; j < this.capacity; j++) if (w[j * EXT_WORDS + EXT_SLOT1] === -1) w[j * EXT_WORDS + EXT_SLOT1] = 0;
    this.size -= removed;
    this.rehash(this.capacity);
  }

  bytes(): number {
    return this.words.byteLength + (this.aux?.byteLength ?? 0);
  }
}
