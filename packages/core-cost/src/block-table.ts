/**
 * Refcounted set of u64 block hashes with an optional fractional weight per block (docs/protocol.md
 * §9.1 `unique_blocks` + `fractional`). Keys are (lo, hi) u32 pairs in an open-addressing table
 * with linear probing and backward-shift deletion: no BigInt, no strings, no tombstones, and the
 * table never allocates except when it doubles.
 *
 * The load model uses it for random block ids (prompts without KV reuse, output blocks); prompt
 * blocks named by sequence hashes live in a `PrefixTree`.
 *
 * Layout: one Uint32Array of 4-word entries `[lo, hi, ref, units]` (`ref === 0` marks an empty
 * slot), so a probe touches one cache line: a router holds a table per rank, hundreds of them,
 * mostly cold, and with parallel arrays a cold probe cost three misses (ref, lo, hi) instead of
 * one. `frac` (NaN = no fractional value) is a separate array, moved on deletion only while
 * fractions exist.
 *
 * The deficit Σ (1 − fractional) is kept as an integer count of 2^−24 units per block: an
 * integer sum never drifts however long the rank runs, and it does not depend on the order of
 * updates, so `round(|unique| − deficit)` is reproducible exactly (a float running sum landed on
 * 11.499999999999996 where the true value was 11.5). 2^−24 per block is far below what a rounded
 * block count can show, and sums stay exact up to 2^29 blocks.
 */
import { invalidArgument } from '@kvrouter/protocols';

const MIN_CAPACITY = 64;
export const FRAC_UNITS = 2 ** 24;

/** Deficit of one block in 2^−24 units: round((1 − f) · 2^24). */
export const deficitUnits = (f: number): number => Math.round((1 - f) * FRAC_UNITS);

function mixKey(lo: number, hi: number): number {
  let h = Math.imul(lo ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(hi ^ 0xc2b2ae35, 0x27d4eb2f);
  h ^= h >>> 15;
  h = Math.imul(h, 0x2c1b3c6d);
  h ^= h >>> 12;
  return h >>> 0;
}

export class BlockTable {
  /** Entries `[lo, hi, ref, units]`, 4 words per slot. */
  private e: Uint32Array;
  private frac: Float64Array;
  private mask: number;
  /** Number of distinct blocks present (`|unique_blocks|`). */
  size = 0;
  /** Blocks present that carry a fractional value. */
  fracCount = 0;
  /** Σ deficitUnits(fractional[h]) over present blocks with a fractional value. */
  deficitUnits = 0;

  /** Σ (1 − fractional[h]), quantised to 2^−24 per block. */
  get deficit(): number {
    return this.deficitUnits / FRAC_UNITS;
  }

  constructor(capacity = MIN_CAPACITY) {
    let cap = MIN_CAPACITY;
    while (cap < capacity * 2) cap *= 2;
    this.e = new Uint32Array(4 * cap);
    this.frac = new Float64Array(cap).fill(NaN);
    this.mask = cap - 1;
  }

  /** Number of slots (tests). */
  get capacity(): number {
    return this.mask + 1;
  }

  /** Slot of (lo, hi), or −1. */
  find(lo: number, hi: number): number {
    const { mask, e } = this;
    let s = mixKey(lo, hi) & mask;
    for (;;) {
      const o = s << 2;
      if (e[o + 2] === 0) return -1;
      if (e[o] === lo && e[o + 1] === hi) return s;
      s = (s + 1) & mask;
    }
  }

  has(lo: number, hi: number): boolean {
    return this.find(lo, hi) >= 0;
  }

  refcount(lo: number, hi: number): number {
    const s = this.find(lo, hi);
    return s < 0 ? 0 : this.e[(s << 2) + 2];
  }

  /** Adds one reference; returns the new refcount. */
  inc(lo: number, hi: number): number {
    if ((this.size + 1) * 2 > this.mask + 1) this.grow();
    const { mask, e } = this;
    let s = mixKey(lo, hi) & mask;
    for (;;) {
      const o = s << 2;
      if (e[o + 2] === 0) {
        e[o] = lo;
        e[o + 1] = hi;
        e[o + 2] = 1;
        this.size++;
        return 1;
      }
      if (e[o] === lo && e[o + 1] === hi) return ++e[o + 2];
      s = (s + 1) & mask;
    }
  }

  /** Drops one reference; the block disappears (with its fraction) at 0. Returns the new refcount, −1 if absent. */
  dec(lo: number, hi: number): number {
    const s = this.find(lo, hi);
    if (s < 0) return -1;
    const r = --this.e[(s << 2) + 2];
    if (r === 0) this.removeSlot(s);
    return r;
  }

  refAt(slot: number): number {
    return this.e[(slot << 2) + 2];
  }

  /** Sets fractional[h] for the block in `slot` (which must be occupied). */
  setFracAt(slot: number, f: number): void {
    if (!(f >= 0 && f <= 1)) throw invalidArgument('fraction', 'must be in [0, 1]', f);
    const o = (slot << 2) + 3;
    const old = this.frac[slot];
    if (old === old) this.deficitUnits -= this.e[o];
    else this.fracCount++;
    const u = deficitUnits(f);
    this.frac[slot] = f;
    this.e[o] = u;
    this.deficitUnits += u;
  }

  fracOf(lo: number, hi: number): number | undefined {
    const s = this.find(lo, hi);
    if (s < 0) return undefined;
    const f = this.frac[s];
    return f === f ? f : undefined;
  }

  private removeSlot(i: number): void {
    const { mask, e, frac } = this;
    const f = frac[i];
    if (f === f) {
      this.fracCount--;
      this.deficitUnits -= e[(i << 2) + 3];
    }
    this.size--;
    // Without fractions every frac entry is NaN: skip moving them.
    const moveFrac = this.fracCount > 0;
    let j = i;
    for (;;) {
      j = (j + 1) & mask;
      const oj = j << 2;
      if (e[oj + 2] === 0) break;
      const home = mixKey(e[oj], e[oj + 1]) & mask;
      // Entry j may move to the hole i only if its home is not cyclically within (i, j].
      const inRange = i <= j ? home > i && home <= j : home > i || home <= j;
      if (inRange) continue;
      const oi = i << 2;
      e[oi] = e[oj];
      e[oi + 1] = e[oj + 1];
      e[oi + 2] = e[oj + 2];
      e[oi + 3] = e[oj + 3];
      if (moveFrac) frac[i] = frac[j];
      i = j;
    }
    const oi = i << 2;
    e[oi + 2] = 0;
    e[oi + 3] = 0;
    frac[i] = NaN;
  }

  private grow(): void {
    const { e, frac } = this;
    const oldCap = this.mask + 1;
    const cap = oldCap * 2;
    const ne = new Uint32Array(4 * cap);
    const nf = new Float64Array(cap).fill(NaN);
    const mask = cap - 1;
    for (let s = 0; s < oldCap; s++) {
      const o = s << 2;
      if (e[o + 2] === 0) continue;
      let t = mixKey(e[o], e[o + 1]) & mask;
      while (ne[(t << 2) + 2] !== 0) t = (t + 1) & mask;
      const n = t << 2;
      ne[n] = e[o];
      ne[n + 1] = e[o + 1];
      ne[n + 2] = e[o + 2];
      ne[n + 3] = e[o + 3];
      nf[t] = frac[s];
    }
    this.e = ne;
    this.frac = nf;
    this.mask = mask;
  }
}
