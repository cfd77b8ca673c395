/**
 * The prefix tree both `PrefixTree` (one rank's requests) and `HolderTree` (every rank) are: a
 * radix tree over sequence-hash chains ((lo, hi) u32 pairs), each node a run of blocks held by the
 * same holders. A node's blocks are `src[from .. from + 2·len)`, a slice of some booked chain;
 * positions are absolute (`from` is the pair index of the node's first block in a chain that
 * starts at block 0), so a chain passing through a node holds that node's blocks at the same
 * positions.
 *
 * Both trees use this one node type, the holder fields of both included, rather than a node type
 * each: the walks here (`child`, `run`) then see one object shape, so their property loads stay
 * monomorphic on the router's per-request path.
 */
export interface ChainNode {
  /** Hashes of this node: `src[from .. from + 2·len)` as (lo, hi) pairs (a booked chain). */
  src: Uint32Array;
  from: number;
  len: number;
  /** Children by the low word of their first hash; `alt` chains children sharing that word. */
  kids: Map<number, ChainNode> | null;
  alt: ChainNode | null;
  /** Holders of the node: requests passing through it (`PrefixTree`), rank slots in `bits` (`HolderTree`). */
  ref: number;
  /** `PrefixTree`: fractional value of every block of the node, NaN = none. */
  frac: number;
  /** `PrefixTree`: deficitUnits(frac) per block (0 without a fraction). */
  units: number;
  /** `HolderTree`: rank slots holding the node, bit s of word s >> 5 (words past the end are 0); empty in a `PrefixTree`. */
  bits: Uint32Array;
}

export const EMPTY_BITS = new Uint32Array(0);

export const newNode = (
  src: Uint32Array,
  from: number,
  len: number,
  ref: number,
  bits: Uint32Array,
): ChainNode => ({ src, from, len, kids: null, alt: null, ref, frac: NaN, units: 0, bits });

/** Whether `a` and `b` hold the same slots (words past an array's end are 0). */
function sameBits(a: Uint32Array, b: Uint32Array): boolean {
  for (let w = 0, end = Math.max(a.length, b.length); w < end; w++)
    if ((w < a.length ? a[w] : 0) !== (w < b.length ? b[w] : 0)) return false;
  return true;
}

export class ChainTree {
  protected readonly root: ChainNode = newNode(new Uint32Array(0), 0, 0, 0, EMPTY_BITS);
  /** Scratch for the nodes an update walked, merged bottom-up after it. */
  protected readonly path: ChainNode[] = [];
  /** Nodes in the tree (tests). */
  nodes = 0;

  /** `n`'s child whose first block is (lo, hi), or null. */
  protected child(n: ChainNode, lo: number, hi: number): ChainNode | null {
    if (n.kids === null) return null;
    let c: ChainNode | null = n.kids.get(lo) ?? null;
    while (c !== null && c.src[c.from + 1] !== hi) c = c.alt;
    return c;
  }

  protected link(parent: ChainNode, c: ChainNode): void {
    const lo = c.src[c.from];
    if (parent.kids === null) parent.kids = new Map();
    c.alt = parent.kids.get(lo) ?? null;
    parent.kids.set(lo, c);
  }

  /** Detaches `c` (and everything below it) from `parent`; `nodes` is the caller's to update. */
  protected unlink(parent: ChainNode, c: ChainNode): void {
    const kids = parent.kids!;
    const lo = c.src[c.from];
    const head = kids.get(lo)!;
    if (head === c) {
      if (c.alt === null) kids.delete(lo);
      else kids.set(lo, c.alt);
    } else {
      let p = head;
      while (p.alt !== c) p = p.alt!;
      p.alt = c.alt;
    }
    c.alt = null;
  }

  /**
   * How many leading blocks of `c` the chain `pairs` holds from pair index `pos` (c's first block
   * matched already, by `child`), looking no further than pair index `end`: 1 ≤ k ≤ c.len.
   */
  protected run(c: ChainNode, pairs: Uint32Array, pos: number, end: number): number {
    const m = Math.min(c.len, (end - pos) >> 1);
    const s = c.src;
    let k = 1;
    for (
      let a = c.from + 2, b = pos + 2;
      k < m && s[a] === pairs[b] && s[a + 1] === pairs[b + 1];
      a += 2, b += 2
    )
      k++;
    return k;
  }

  /** `n` keeps its first k blocks (0 < k < n.len); the rest becomes its only child, same holders. */
  protected split(n: ChainNode, k: number): void {
    const tail = newNode(
      n.src,
      n.from + 2 * k,
      n.len - k,
      n.ref,
      n.bits.length === 0 ? n.bits : n.bits.slice(),
    );
    tail.frac = n.frac;
    tail.units = n.units;
    tail.kids = n.kids;
    n.len = k;
    n.kids = null;
    this.link(n, tail);
    this.nodes++;
  }

  /** Absorbs `n`'s only child while both have the same holders. */
  private merge(n: ChainNode): void {
    for (;;) {
      const kids = n.kids;
      if (kids === null || kids.size !== 1) return;
      const k = kids.values().next().value!;
      if (k.alt !== null || k.ref !== n.ref || !sameBits(n.bits, k.bits)) return;
      if (k.frac !== n.frac && (k.frac === k.frac || n.frac === n.frac)) return;
      // k's array holds n's blocks too (positions are absolute and k's chain passes through n).
      n.src = k.src;
      n.len += k.len;
      n.kids = k.kids;
      this.nodes--;
    }
  }

  /** Merges the nodes of `path` bottom-up, so the tree does not stay cut where an update started or ended. */
  protected mergePath(): void {
    const path = this.path;
    for (let i = path.length - 1; i >= 0; i--) this.merge(path[i]);
    path.length = 0;
  }
}
