import {
  EXT_DOUBLE_BELOW,
  EXT_GROW_LOAD,
  EXT_HI,
  EXT_LO,
  EXT_MAX_LOAD,
  EXT_SEQ_HI,
  EXT_SEQ_LO,
  EXT_WORDS,
  MIN_CAPACITY,
} from './layout.js';
import { capacityFor, homeOf } from './block-table.js';

const TWO_NEG32 = 2 ** -32;

/**
 * One slot's map from an engine's external block hash to the router's block identity (sequence
 * hash): `Ext[w]` of PROTOCOL §7.2. Robin Hood linear probing (an entry never sits further from its
 * home than the one it passed, so lookups of absent keys stop early and the map can run 90% full)
 * with backward-shift deletion (no tombstones). Any capacity (fastrange homes): doubled while
 * small, then grown by ~1.32x.
 * (0, 0) marks an empty entry; the external hash 0 itself is kept in one extra entry past the end.
 * An optional f64 column (`aux`, one per entry) carries approximate-mode expiry times.
 */
export class ExtTable {
  words: Int32Array;
  aux: Float64Array | undefined;
  capacity: number;
  private scale: number;
  size = 0;
  private hasZero = false;

  constructor(
    capacity: number,
    private readonly withAux: boolean,
  ) {
    this.capacity = Math.max(MIN_CAPACITY, Math.ceil(capacity));
    this.scale = this.capacity * TWO_NEG32;
    this.words = new Int32Array((this.capacity + 1) * EXT_WORDS);
    this.aux = withAux ? new Float64Array(this.capacity + 1) : undefined;
  }

  /** Offset of the entry that holds the external hash 0. */
  private get zeroOff(): number {
    return this.capacity * EXT_WORDS;
  }

  home(lo: number, hi: number): number {
    return homeOf(lo, hi, this.scale);
  }

  /** Entry offset for ext or -1. */
  find(lo: number, hi: number): number {
    lo |= 0;
    hi |= 0;
    if ((lo | hi) === 0) return this.hasZero ? this.zeroOff : -1;
    const w = this.words;
    const cap = this.capacity;
    const scale = this.scale;
    let i = homeOf(lo, hi, scale);
    for (let d = 0; ; d++) {
      const off = i * EXT_WORDS;
      const eLo = w[off + EXT_LO]!;
      const eHi = w[off + EXT_HI]!;
      if (eLo === lo && eHi === hi) return off;
      if ((eLo | eHi) === 0) return -1;
      // Robin Hood: a resident closer to its home than we are to ours means we are absent.
      let dist = i - homeOf(eLo, eHi, scale);
      if (dist < 0) dist += cap;
      if (dist < d) return -1;
      if (++i === cap) i = 0;
    }
  }

  /** Sets ext -> seq; returns the entry offset. */
  set(lo: number, hi: number, seqLo: number, seqHi: number): number {
    lo |= 0;
    hi |= 0;
    seqLo |= 0;
    seqHi |= 0;
    const w = this.words;
    if ((lo | hi) === 0) {
      const z = this.zeroOff;
      if (!this.hasZero) {
        this.hasZero = true;
        this.size++;
        if (this.aux) this.aux[this.capacity] = 0;
      }
      w[z + EXT_SEQ_LO] = seqLo;
      w[z + EXT_SEQ_HI] = seqHi;
      return z;
    }
    if (this.size + 1 > this.capacity * EXT_MAX_LOAD) {
      const found = this.find(lo, hi);
      if (found < 0) {
        this.rehash(
          this.capacity < EXT_DOUBLE_BELOW ? 2 * this.capacity : capacityFor(this.size + 1, EXT_GROW_LOAD),
        );
        return this.insertFrom(this.home(lo, hi), 0, lo, hi, seqLo, seqHi, 0);
      }
      w[found + EXT_SEQ_LO] = seqLo;
      w[found + EXT_SEQ_HI] = seqHi;
      return found;
    }
    // One probe: an update where the key is found, else an insert where the search stops.
    const cap = this.capacity;
    const scale = this.scale;
    let i = homeOf(lo, hi, scale);
    for (let d = 0; ; d++) {
      const off = i * EXT_WORDS;
      const eLo = w[off + EXT_LO]!;
      const eHi = w[off + EXT_HI]!;
      if (eLo === lo && eHi === hi) {
        w[off + EXT_SEQ_LO] = seqLo;
        w[off + EXT_SEQ_HI] = seqHi;
        return off;
      }
      if ((eLo | eHi) === 0) return this.insertFrom(i, d, lo, hi, seqLo, seqHi, 0);
      let dist = i - homeOf(eLo, eHi, scale);
      if (dist < 0) dist += cap;
      if (dist < d) return this.insertFrom(i, d, lo, hi, seqLo, seqHi, 0);
      if (++i === cap) i = 0;
    }
  }

  /**
   * Inserts a key known to be absent, starting at entry `i` where its probe distance is `d`
   * (Robin Hood: displaces entries closer to their homes). Returns the key's entry offset.
   */
  private insertFrom(
    i: number,
    d: number,
    lo: number,
    hi: number,
    seqLo: number,
    seqHi: number,
    aux: number,
  ): number {
    const w = this.words;
    const cap = this.capacity;
    const scale = this.scale;
    const auxCol = this.aux;
    let result = -1;
    for (; ; d++) {
      const off = i * EXT_WORDS;
      const eLo = w[off + EXT_LO]!;
      const eHi = w[off + EXT_HI]!;
      if ((eLo | eHi) === 0) {
        w[off + EXT_LO] = lo;
        w[off + EXT_HI] = hi;
        w[off + EXT_SEQ_LO] = seqLo;
        w[off + EXT_SEQ_HI] = seqHi;
        if (auxCol) auxCol[i] = aux;
        this.size++;
        return result < 0 ? off : result;
      }
      let dist = i - homeOf(eLo, eHi, scale);
      if (dist < 0) dist += cap;
      if (dist < d) {
        // Take this entry; carry the resident on.
        const sLo = w[off + EXT_SEQ_LO]!;
        const sHi = w[off + EXT_SEQ_HI]!;
        w[off + EXT_LO] = lo;
        w[off + EXT_HI] = hi;
        w[off + EXT_SEQ_LO] = seqLo;
        w[off + EXT_SEQ_HI] = seqHi;
        if (auxCol) {
          const a = auxCol[i]!;
          auxCol[i] = aux;
          aux = a;
        }
        if (result < 0) result = off;
        lo = eLo;
        hi = eHi;
        seqLo = sLo;
        seqHi = sHi;
        d = dist;
      }
      if (++i === cap) i = 0;
    }
  }

  /** Deletes the entry at `off` (from find/set), shifting followers back so probes stay unbroken. */
  deleteAt(off: number): void {
    const w = this.words;
    this.size--;
    if (off === this.zeroOff) {
      this.hasZero = false;
      return;
    }
    const cap = this.capacity;
    const scale = this.scale;
    const auxCol = this.aux;
    let hole = off / EXT_WORDS;
    let j = hole;
    for (;;) {
      if (++j === cap) j = 0;
      const jo = j * EXT_WORDS;
      const eLo = w[jo + EXT_LO]!;
      const eHi = w[jo + EXT_HI]!;
      if ((eLo | eHi) === 0 || homeOf(eLo, eHi, scale) === j) break;
      w.copyWithin(hole * EXT_WORDS, jo, jo + EXT_WORDS);
      if (auxCol) auxCol[hole] = auxCol[j]!;
      hole = j;
    }
    w.fill(0, hole * EXT_WORDS, hole * EXT_WORDS + EXT_WORDS);
  }

  rehash(newCapacity: number): void {
    const old = this.words;
    const oldAux = this.aux;
    const oldCap = this.capacity;
    const hadZero = this.hasZero;
    this.capacity = Math.max(MIN_CAPACITY, Math.ceil(newCapacity));
    this.scale = this.capacity * TWO_NEG32;
    this.words = new Int32Array((this.capacity + 1) * EXT_WORDS);
    this.aux = this.withAux ? new Float64Array(this.capacity + 1) : undefined;
    this.size = 0;
    for (let j = 0; j < oldCap; j++) {
      const src = j * EXT_WORDS;
      const lo = old[src + EXT_LO]!;
      const hi = old[src + EXT_HI]!;
      if ((lo | hi) === 0) continue;
      this.insertFrom(
        this.home(lo, hi),
        0,
        lo,
        hi,
        old[src + EXT_SEQ_LO]!,
        old[src + EXT_SEQ_HI]!,
        oldAux ? oldAux[j]! : 0,
      );
    }
    if (hadZero) {
      const z = oldCap * EXT_WORDS;
      const nz = this.capacity * EXT_WORDS;
      for (let k = 0; k < EXT_WORDS; k++) this.words[nz + k] = old[z + k]!;
      if (oldAux) this.aux![this.capacity] = oldAux[oldCap]!;
      this.size++;
    }
  }

  /** Reads the home entries of `n` external hashes (`data[at + 4i]`, `[at + 4i + 1]`) so their misses overlap. */
  touch(data: Uint32Array | Int32Array, at: number, n: number): number {
    const w = this.words;
    const scale = this.scale;
    let acc = 0;
    for (let i = 0, k = at; i < n; i++, k += 4) acc ^= w[homeOf(data[k]!, data[k + 1]!, scale) * EXT_WORDS]!;
    return acc;
  }

  /** Calls fn(off) for every entry (read-only: do not mutate the map inside fn). */
  forEach(fn: (off: number) => void): void {
    const w = this.words;
    for (let j = 0; j < this.capacity; j++)
      if ((w[j * EXT_WORDS + EXT_LO]! | w[j * EXT_WORDS + EXT_HI]!) !== 0) fn(j * EXT_WORDS);
    if (this.hasZero) fn(this.zeroOff);
  }

  bytes(): number {
    return this.words.byteLength + (this.aux?.byteLength ?? 0);
  }
}

/**
 * `Ext[w]` for every slot: one ExtTable per slot, private to the thread that applies the slot's
 * events (a slot's entries are dropped with its table, without scanning the others).
 */
export class ExtMap {
  private readonly tables: (ExtTable | undefined)[] = [];

  constructor(private readonly withAux = false) {}

  /** The slot's table, created empty if missing. */
  of(slot: number): ExtTable {
    return (this.tables[slot] ??= new ExtTable(MIN_CAPACITY, this.withAux));
  }

  get(slot: number): ExtTable | undefined {
    return this.tables[slot];
  }

  /** Entries over all slots. */
  get size(): number {
    let n = 0;
    for (const t of this.tables) if (t) n += t.size;
    return n;
  }

  removeSlots(slots: Iterable<number>): void {
    for (const s of slots) this.tables[s] = undefined;
  }

  bytes(): number {
    let b = 0;
    for (const t of this.tables) if (t) b += t.bytes();
    return b;
  }
}
