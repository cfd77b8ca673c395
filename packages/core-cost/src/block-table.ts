/**
 * Refcounted set of u64 block hashes with an optional fractional weight per block (PROTOCOL.md
 * §9.1 `unique_blocks` + `fractional`). Keys are (lo, hi) u32 pairs in an open-addressing table
 * with linear probing and backward-shift deletion: no BigInt, no strings, no tombstones, and the
 * table never allocates except when it doubles.
 *
 * Layout: parallel typed arrays indexed by slot; `ref[slot] === 0` marks an empty slot;
 * `frac[slot]` is NaN when the block has no fractional value.
 *
 * The deficit Σ (1 − fractional) is kept as an integer count of 2^−24 units per block: an
 * integer sum never drifts however long the rank runs, and it does not depend on the order of
 * updates, so `round(|unique| − deficit)` is reproducible exactly (a float running sum landed on
 * 11.499999999999996 where the true value was 11.5). 2^−24 per block is far below what a rounded
 * block count can show, and sums stay exact up to 2^29 blocks.
 */
const MIN_CAPACITY = 64;
export const FRAC_UNITS = 2 ** 24;

/** Deficit of one block in 2^−24 units: round((1 − f) · 2^24). */
export const deficitUnits = (f: number): number => Math.round((1 - f) * FRAC_UNITS);

function mix(lo: number, hi: number): number {
  let h = Math.imul(lo ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(hi ^ 0xc2b2ae35, 0x27d4eb2f);
  h ^= h >>> 15;
  h = Math.imul(h, 0x2c1b3c6d);
  h ^= h >>> 12;
  return h >>> 0;
}

export class BlockTable {
  private lo: Uint32Array;
  private hi: Uint32Array;
  private ref: Uint32Array;
  private frac: Float64Array;
  private units: Uint32Array;
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
    this.lo = new Uint32Array(cap);
    this.hi = new Uint32Array(cap);
    this.ref = new Uint32Array(cap);
    this.frac = new Float64Array(cap).fill(NaN);
    this.units = new Uint32Array(cap);
    this.mask = cap - 1;
  }

  /** Slot of (lo, hi), or −1. */
  find(lo: number, hi: number): number {
    const { mask, ref } = this;
    let s = mix(lo, hi) & mask;
    while (ref[s] !== 0) {
      if (this.lo[s] === lo && this.hi[s] === hi) return s;
      s = (s + 1) & mask;
    }
    return -1;
  }

  has(lo: number, hi: number): boolean {
    return this.find(lo, hi) >= 0;
  }

  refcount(lo: number, hi: number): number {
    const s = this.find(lo, hi);
    return s < 0 ? 0 : this.ref[s];
  }

  /** Adds one reference; returns the new refcount. */
  inc(lo: number, hi: number): number {
    if ((this.size + 1) * 2 > this.ref.length) this.grow();
    const { mask, ref } = this;
    let s = mix(lo, hi) & mask;
    while (ref[s] !== 0) {
      if (this.lo[s] === lo && this.hi[s] === hi) return ++ref[s];
      s = (s + 1) & mask;
    }
    this.lo[s] = lo;
    this.hi[s] = hi;
    ref[s] = 1;
    this.size++;
    return 1;
  }

  /** Drops one reference; the block disappears (with its fraction) at 0. Returns the new refcount, −1 if absent. */
  dec(lo: number, hi: number): number {
    const s = this.find(lo, hi);
    if (s < 0) return -1;
    const r = --this.ref[s];
    if (r === 0) this.removeSlot(s);
    return r;
  }

  refAt(slot: number): number {
    return this.ref[slot];
  }

  /** Sets fractional[h] for the block in `slot` (which must be occupied). */
  setFracAt(slot: number, f: number): void {
    if (!(f >= 0 && f <= 1)) throw new RangeError(`fraction must be in [0, 1], got ${f}`);
    const old = this.frac[slot];
    if (old === old) this.deficitUnits -= this.units[slot];
    else this.fracCount++;
    const u = deficitUnits(f);
    this.frac[slot] = f;
    this.units[slot] = u;
    this.deficitUnits += u;
  }

  fracOf(lo: number, hi: number): number | undefined {
    const s = this.find(lo, hi);
    if (s < 0) return undefined;
    const f = this.frac[s];
    return f === f ? f : undefined;
  }

  private removeSlot(i: number): void {
    const f = this.frac[i];
    if (f === f) {
      this.fracCount--;
      this.deficitUnits -= this.units[i];
    }
    this.size--;
    const { mask, ref, lo, hi, frac, units } = this;
    let j = i;
    for (;;) {
      j = (j + 1) & mask;
      if (ref[j] === 0) break;
      const home = mix(lo[j], hi[j]) & mask;
      // Entry j may move to the hole i only if its home is not cyclically within (i, j].
      const inRange = i <= j ? home > i && home <= j : home > i || home <= j;
      if (inRange) continue;
      lo[i] = lo[j]!;
      hi[i] = hi[j]!;
      ref[i] = ref[j]!;
      frac[i] = frac[j]!;
      units[i] = units[j]!;
      i = j;
    }
    ref[i] = 0;
    frac[i] = NaN;
    units[i] = 0;
  }

  private grow(): void {
    const { lo, hi, ref, frac, units } = this;
    const cap = ref.length * 2;
    this.lo = new Uint32Array(cap);
    this.hi = new Uint32Array(cap);
    this.ref = new Uint32Array(cap);
    this.frac = new Float64Array(cap).fill(NaN);
    this.units = new Uint32Array(cap);
    this.mask = cap - 1;
    for (let s = 0; s < ref.length; s++) {
      if (ref[s] === 0) continue;
      let t = mix(lo[s], hi[s]) & this.mask;
      while (this.ref[t] !== 0) t = (t + 1) & this.mask;
      this.lo[t] = lo[s]!;
      this.hi[t] = hi[s]!;
      this.ref[t] = ref[s]!;
      this.frac[t] = frac[s]!;
      this.units[t] = units[s]!;
    }
  }
}
