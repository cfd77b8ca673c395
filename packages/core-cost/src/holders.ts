/**
 * Inverted active-block index across ranks: sequence hash → the set of rank slots holding that
 * block (PROTOCOL.md §9.1 `active_prefix_depth`, computed for every rank at once).
 *
 * Why: the per-rank form (a binary search in each rank's block table) probes every candidate's
 * table, and with hundreds of ranks those tables are cold: ~12 cache misses per rank that shares
 * the prompt's first block and one per rank that does not. Here one probe of the first block
 * answers "no prefix" for every rank outside its holder set, and the depths of the others come
 * from a bisection over the prompt: a sequence hash names its whole prefix, so the holder set
 * S(d) of block d only shrinks as d grows, and an interval whose two ends have equal sets has no
 * rank leaving inside it. That costs O(k · log depth) probes for k distinct depths, all in one
 * table that stays warm because every decision reads it.
 *
 * Layout: open addressing with linear probing and backward-shift deletion over entries of
 * `3 + W` u32 words `[lo, hi, count, bits[0..W))`: `count` = holders (0 marks an empty slot), bit
 * `s` of `bits` = rank slot `s` holds the block. `W` = ceil(slots / 32) grows with the rank slots.
 * Only 0 ↔ 1 refcount transitions of a rank reach this index, so booking a prefix the rank already
 * holds costs nothing here.
 */
import { mixKey } from './block-table.js';

const MIN_CAPACITY = 256;

export class HolderIndex {
  private words = 1;
  private stride = 4;
  private e: Uint32Array;
  private mask: number;
  /** Distinct blocks held by at least one rank. */
  size = 0;
  // Slot allocation: a freed slot's bits must be gone before it is reused (`releaseSlot`).
  private nextSlot = 0;
  private readonly freeSlots: number[] = [];
  // Query scratch: interval stack of (lo depth, hi depth, lo entry, hi entry).
  private stack = new Int32Array(256);

  constructor(capacity = MIN_CAPACITY) {
    let cap = MIN_CAPACITY;
    while (cap < capacity * 2) cap *= 2;
    this.e = new Uint32Array(cap * this.stride);
    this.mask = cap - 1;
  }

  /** A slot number for a new rank (the lowest free one). */
  acquireSlot(): number {
    if (this.freeSlots.length > 0) {
      this.freeSlots.sort((a, b) => b - a);
      return this.freeSlots.pop()!;
    }
    const s = this.nextSlot++;
    if (s >= 32 * this.words) this.rebuild(this.mask + 1, this.words * 2);
    return s;
  }

  /** Returns a slot whose blocks have all been removed. */
  releaseSlot(slot: number): void {
    this.freeSlots.push(slot);
  }

  /** Highest slot number handed out + 1 (size of a per-slot output array). */
  get slotLimit(): number {
    return this.nextSlot;
  }

  /** Entry offset of (lo, hi), or −1. */
  private find(lo: number, hi: number): number {
    const { e, mask, stride } = this;
    let s = mixKey(lo, hi) & mask;
    for (;;) {
      const o = s * stride;
      if (e[o + 2] === 0) return -1;
      if (e[o] === lo && e[o + 1] === hi) return o;
      s = (s + 1) & mask;
    }
  }

  /** Whether `slot` holds (lo, hi) (tests). */
  holds(lo: number, hi: number, slot: number): boolean {
    const o = this.find(lo, hi);
    return o >= 0 && (this.e[o + 3 + (slot >>> 5)] & (1 << (slot & 31))) !== 0;
  }

  /** Marks (lo, hi) held by `slot` (idempotent). */
  add(lo: number, hi: number, slot: number): void {
    if ((this.size + 1) * 2 > this.mask + 1) this.rebuild((this.mask + 1) * 2, this.words);
    const { e, mask, stride } = this;
    const w = 3 + (slot >>> 5);
    const bit = 1 << (slot & 31);
    let s = mixKey(lo, hi) & mask;
    for (;;) {
      const o = s * stride;
      if (e[o + 2] === 0) {
        e[o] = lo;
        e[o + 1] = hi;
        e[o + 2] = 1;
        e[o + w] = bit;
        this.size++;
        return;
      }
      if (e[o] === lo && e[o + 1] === hi) {
        if ((e[o + w] & bit) === 0) {
          e[o + w] |= bit;
          e[o + 2]++;
        }
        return;
      }
      s = (s + 1) & mask;
    }
  }

  /** Clears `slot` from (lo, hi); a block or slot not present is a no-op. */
  remove(lo: number, hi: number, slot: number): void {
    const o = this.find(lo, hi);
    if (o < 0) return;
    const e = this.e;
    const w = o + 3 + (slot >>> 5);
    const bit = 1 << (slot & 31);
    if ((e[w] & bit) === 0) return;
    e[w] &= ~bit;
    if (--e[o + 2] === 0) this.removeAt(o / this.stride);
  }

  private removeAt(i: number): void {
    const { e, mask, stride } = this;
    this.size--;
    let j = i;
    for (;;) {
      j = (j + 1) & mask;
      const oj = j * stride;
      if (e[oj + 2] === 0) break;
      const home = mixKey(e[oj], e[oj + 1]) & mask;
      // Entry j may move to the hole i only if its home is not cyclically within (i, j].
      const inRange = i <= j ? home > i && home <= j : home > i || home <= j;
      if (inRange) continue;
      e.copyWithin(i * stride, oj, oj + stride);
      i = j;
    }
    e.fill(0, i * stride, i * stride + stride);
  }

  private rebuild(cap: number, words: number): void {
    const old = this.e;
    const oldStride = this.stride;
    const oldCap = this.mask + 1;
    const stride = 3 + words;
    const e = new Uint32Array(cap * stride);
    const mask = cap - 1;
    for (let s = 0; s < oldCap; s++) {
      const o = s * oldStride;
      if (old[o + 2] === 0) continue;
      let t = mixKey(old[o], old[o + 1]) & mask;
      while (e[t * stride + 2] !== 0) t = (t + 1) & mask;
      e.set(old.subarray(o, o + oldStride), t * stride);
    }
    this.e = e;
    this.mask = mask;
    this.words = words;
    this.stride = stride;
  }

  /**
   * `depth[slot]` = largest k such that `slot` holds sequence hash k−1 of `seq` ((lo, hi) pairs),
   * for every slot < `slotLimit` (0 for slots holding no prefix). Exact when every rank's blocks
   * are whole prefixes (the router books whole prompts); otherwise a rank missing a middle block
   * may be reported at either side of the gap, as with any bisection.
   */
  prefixDepths(seq: Uint32Array, depth: Int32Array): void {
    depth.fill(0, 0, this.nextSlot);
    const n = seq.length >> 1;
    if (n === 0 || this.size === 0) return;
    const first = this.find(seq[0], seq[1]);
    if (first < 0) return;
    const last = n === 1 ? first : this.find(seq[2 * n - 2], seq[2 * n - 1]);
    if (last >= 0) this.assign(last, -1, n, depth);
    if (n === 1) return;
    let st = this.stack;
    let sp = 0;
    st[sp++] = 0;
    st[sp++] = n - 1;
    st[sp++] = first;
    st[sp++] = last;
    while (sp > 0) {
      const oHi = st[--sp];
      const oLo = st[--sp];
      const hiD = st[--sp];
      const loD = st[--sp];
      if (this.sameSet(oLo, oHi)) continue;
      if (hiD === loD + 1) {
        this.assign(oLo, oHi, loD + 1, depth);
        continue;
      }
      const mid = (loD + hiD) >>> 1;
      const oMid = this.find(seq[2 * mid], seq[2 * mid + 1]);
      if (sp + 8 > st.length) {
        const grown = new Int32Array(st.length * 2);
        grown.set(st);
        this.stack = st = grown;
      }
      st[sp++] = loD;
      st[sp++] = mid;
      st[sp++] = oLo;
      st[sp++] = oMid;
      st[sp++] = mid;
      st[sp++] = hiD;
      st[sp++] = oMid;
      st[sp++] = oHi;
    }
  }

  /** Entries `a` and `b` (−1 = empty set) hold the same slots. */
  private sameSet(a: number, b: number): boolean {
    if (a === b) return true;
    if (a < 0 || b < 0) return false;
    const e = this.e;
    if (e[a + 2] !== e[b + 2]) return false;
    for (let k = 3, end = 3 + this.words; k < end; k++) if (e[a + k] !== e[b + k]) return false;
    return true;
  }

  /** depth[s] = d for every slot s in entry `a` and not in entry `b` (−1 = empty set). */
  private assign(a: number, b: number, d: number, depth: Int32Array): void {
    if (a < 0) return;
    const e = this.e;
    for (let k = 0; k < this.words; k++) {
      let m = e[a + 3 + k];
      if (b >= 0) m &= ~e[b + 3 + k];
      while (m !== 0) {
        const low = m & -m;
        depth[32 * k + 31 - Math.clz32(low)] = d;
        m ^= low;
      }
    }
  }
}
