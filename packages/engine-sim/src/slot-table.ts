/**
 * Exact map from a 64-bit sequence hash, held as (lo, hi) u32 words, to a block slot. Open addressing
 * with linear probing and backward-shift deletion over one Int32Array: no BigInt, no Map, no
 * allocation after construction. Keys live in the owner's `keyLo`/`keyHi` arrays, indexed by slot, so
 * a cell stores only `slot + 1` (0 = empty).
 */
export class SlotTable {
  private readonly cells: Int32Array;
  private readonly shift: number;
  private readonly mask: number;
  size = 0;

  constructor(
    maxEntries: number,
    private readonly keyLo: Uint32Array,
    private readonly keyHi: Uint32Array,
  ) {
    // Load factor <= 1/2 keeps probe runs short at full capacity.
    let bits = 4;
    while (1 << bits < 2 * maxEntries) bits++;
    this.cells = new Int32Array(1 << bits);
    this.shift = 32 - bits;
    this.mask = (1 << bits) - 1;
  }

  private home(lo: number, hi: number): number {
    // Fibonacci hashing on a fold of both words; the top bits are the best mixed.
    return Math.imul(lo ^ Math.imul(hi, 0x85ebca6b), 0x9e3779b1) >>> this.shift;
  }

  /** Slot holding (lo, hi), or -1. */
  get(lo: number, hi: number): number {
    const cells = this.cells;
    const mask = this.mask;
    for (let i = this.home(lo, hi); ; i = (i + 1) & mask) {
      const c = cells[i];
      if (c === 0) return -1;
      const s = c - 1;
      if (this.keyLo[s] === lo && this.keyHi[s] === hi) return s;
    }
  }

  /** Adds `slot` under its current key; the key must be absent. */
  insert(slot: number): void {
    const cells = this.cells;
    const mask = this.mask;
    let i = this.home(this.keyLo[slot], this.keyHi[slot]);
    while (cells[i] !== 0) i = (i + 1) & mask;
    cells[i] = slot + 1;
    this.size++;
  }

  /** Removes `slot` (looked up by its current key); no-op when absent. */
  delete(slot: number): void {
    const cells = this.cells;
    const mask = this.mask;
    const lo = this.keyLo[slot];
    const hi = this.keyHi[slot];
    let i = this.home(lo, hi);
    for (;;) {
      const c = cells[i];
      if (c === 0) return;
      if (c === slot + 1) break;
      i = (i + 1) & mask;
    }
    // Pull later members of the probe run back so lookups never stop at a hole before their key.
    let j = i;
    for (;;) {
      j = (j + 1) & mask;
      const c = cells[j];
      if (c === 0) break;
      const k = this.home(this.keyLo[c - 1], this.keyHi[c - 1]);
      const stays = i <= j ? i < k && k <= j : i < k || k <= j;
      if (stays) continue;
      cells[i] = c;
      i = j;
    }
    cells[i] = 0;
    this.size--;
  }
}
