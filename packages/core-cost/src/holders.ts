/**
 * Which ranks hold which prompt blocks, across all ranks: one prefix tree of every booked chain
 * whose nodes carry the set of rank slots holding them (docs/protocol.md §9.1 `active_prefix_depth`,
 * computed for every rank in one walk).
 *
 * Why: the per-rank form (a search in each candidate's own blocks) touches every candidate's
 * structures, hundreds of them, mostly cold. Here a query walks the tree once along its prompt
 * (sequential hash compares) and every rank on the path gets its depth from the deepest node whose
 * set contains it: a sequence hash names its whole prefix, so a rank holding a node holds every
 * node above it, and the sets only shrink going down.
 *
 * Updates come from the per-rank `PrefixTree`s, as ranges of one chain: `mark` when blocks
 * [from, to) became held by a rank (the blocks before `from` it already holds), `unmark` when they
 * stopped being held. Nodes split where a range starts or ends inside them, so every block of a
 * node is held by the same ranks; a node whose set empties is removed with everything below it
 * (nothing below can be held by a rank that does not hold the node). After each update a node on
 * the path absorbs its only child again when both have the same set, so
 * the tree does not stay cut at every point where some booking once started or ended.
 */

interface GNode {
  /** Hashes `src[from .. from + 2·len)`, (lo, hi) pairs of some booked prompt. */
  src: Uint32Array;
  from: number;
  len: number;
  /** Rank slots holding the node: bit s of word s >> 5 (words past the end are 0). */
  bits: Uint32Array;
  count: number;
  /** Children by the low word of their first hash; `alt` chains children sharing that word. */
  kids: Map<number, GNode> | null;
  alt: GNode | null;
}

const EMPTY_BITS = new Uint32Array(0);

const newNode = (src: Uint32Array, from: number, len: number, bits: Uint32Array, count: number): GNode => ({
  src,
  from,
  len,
  bits,
  count,
  kids: null,
  alt: null,
});

export class HolderTree {
  private readonly root: GNode = newNode(new Uint32Array(0), 0, 0, EMPTY_BITS, 0);
  private readonly path: GNode[] = [];
  private words = 1;
  private nextSlot = 0;
  private readonly freeSlots: number[] = [];
  /** Nodes in the tree (tests). */
  nodes = 0;

  /** A slot number for a new rank (the lowest free one). */
  acquireSlot(): number {
    if (this.freeSlots.length > 0) {
      this.freeSlots.sort((a, b) => b - a);
      return this.freeSlots.pop()!;
    }
    const s = this.nextSlot++;
    if (s >= 32 * this.words) this.words *= 2;
    return s;
  }

  /** Clears `slot` from every node and frees the slot for reuse (the rank is gone). */
  releaseSlot(slot: number): void {
    this.clearSlot(this.root, slot);
    this.freeSlots.push(slot);
  }

  /** Highest slot number handed out + 1 (size of a per-slot output array). */
  get slotLimit(): number {
    return this.nextSlot;
  }

  private child(n: GNode, lo: number, hi: number): GNode | null {
    if (n.kids === null) return null;
    let c: GNode | null = n.kids.get(lo) ?? null;
    while (c !== null && c.src[c.from + 1] !== hi) c = c.alt;
    return c;
  }

  private link(parent: GNode, c: GNode): void {
    const lo = c.src[c.from];
    if (parent.kids === null) parent.kids = new Map();
    c.alt = parent.kids.get(lo) ?? null;
    parent.kids.set(lo, c);
  }

  private unlink(parent: GNode, c: GNode): void {
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
    this.nodes -= countNodes(c);
  }

  /** `n` keeps its first k blocks (0 < k < n.len); the rest becomes its only child, same set. */
  private split(n: GNode, k: number): void {
    const tail = newNode(n.src, n.from + 2 * k, n.len - k, n.bits.slice(), n.count);
    tail.kids = n.kids;
    n.len = k;
    n.kids = null;
    this.link(n, tail);
    this.nodes++;
  }

  /** Absorbs `n`'s only child while both have the same set. */
  private merge(n: GNode): void {
    for (;;) {
      const kids = n.kids;
      if (kids === null || kids.size !== 1) return;
      const k = kids.values().next().value!;
      if (k.alt !== null || k.count !== n.count) return;
      const a = n.bits;
      const b = k.bits;
      for (let w = 0, end = Math.max(a.length, b.length); w < end; w++)
        if ((w < a.length ? a[w] : 0) !== (w < b.length ? b[w] : 0)) return;
      // Positions are absolute (a node's `from` is its first block's pair index in a chain that
      // starts at block 0), and k's array holds n's blocks too, since its chain passes through n.
      n.src = k.src;
      n.len += k.len;
      n.kids = k.kids;
      this.nodes--;
    }
  }

  private mergePath(): void {
    const path = this.path;
    for (let i = path.length - 1; i >= 0; i--) this.merge(path[i]);
    path.length = 0;
  }

  private has(n: GNode, slot: number): boolean {
    const w = slot >>> 5;
    return w < n.bits.length && (n.bits[w] & (1 << (slot & 31))) !== 0;
  }

  private set(n: GNode, slot: number): void {
    const w = slot >>> 5;
    if (w >= n.bits.length) {
      const grown = new Uint32Array(this.words);
      grown.set(n.bits);
      n.bits = grown;
    }
    const bit = 1 << (slot & 31);
    if ((n.bits[w] & bit) === 0) {
      n.bits[w] |= bit;
      n.count++;
    }
  }

  private clear(n: GNode, slot: number): void {
    const w = slot >>> 5;
    const bit = 1 << (slot & 31);
    if (w < n.bits.length && (n.bits[w] & bit) !== 0) {
      n.bits[w] &= ~bit;
      n.count--;
    }
  }

  /**
   * Rank `slot` now holds blocks [from, to) (pair indices) of the chain `pairs`; it already
   * holds [0, from). The tree may keep a reference to `pairs` (it must not change while booked).
   */
  mark(pairs: Uint32Array, from: number, to: number, slot: number): void {
    const path = this.path;
    path.length = 0;
    let node = this.root;
    let pos = 0;
    while (pos < to) {
      const c = this.child(node, pairs[pos], pairs[pos + 1]);
      if (c === null) {
        const bits = new Uint32Array(this.words);
        bits[slot >>> 5] = 1 << (slot & 31);
        // A chain the tree does not have yet is new to every rank, so pos >= from here.
        this.link(node, newNode(pairs, pos, (to - pos) >> 1, bits, 1));
        this.nodes++;
        break;
      }
      path.push(c);
      const m = Math.min(c.len, (to - pos) >> 1);
      const s = c.src;
      let k = 1;
      for (
        let a = c.from + 2, b = pos + 2;
        k < m && s[a] === pairs[b] && s[a + 1] === pairs[b + 1];
        a += 2, b += 2
      )
        k++;
      if (k < c.len) this.split(c, k);
      const end = pos + 2 * k;
      if (end > from) {
        // The marked range starts inside c: the part before it is not (newly) this rank's.
        if (pos < from) {
          this.split(c, (from - pos) >> 1);
          pos = from;
          node = c;
          continue;
        }
        this.set(c, slot);
      }
      pos = end;
      node = c;
    }
    this.mergePath();
  }

  /** Rank `slot` no longer holds blocks [from, to) of `pairs` (it still holds [0, from)). */
  unmark(pairs: Uint32Array, from: number, to: number, slot: number): void {
    const path = this.path;
    path.length = 0;
    let node = this.root;
    let pos = 0;
    while (pos < to) {
      const c = this.child(node, pairs[pos], pairs[pos + 1]);
      if (c === null) break;
      let end = pos + 2 * c.len;
      if (end > from) {
        if (pos < from) {
          // Only the part from `from` on is released.
          this.split(c, (from - pos) >> 1);
          path.push(c);
          pos = from;
          node = c;
          continue;
        }
        // Cannot happen with consistent per-rank trees (a rank holding blocks past `to` on this
        // path would still hold [from, to)); kept so an inconsistent caller never clears blocks
        // it did not name.
        if (end > to) {
          this.split(c, (to - pos) >> 1);
          end = to;
        }
        this.clear(c, slot);
        if (c.count === 0) {
          this.unlink(node, c);
          break;
        }
      }
      path.push(c);
      pos = end;
      node = c;
    }
    this.mergePath();
  }

  private clearSlot(n: GNode, slot: number): void {
    if (n.kids === null) return;
    const all: GNode[] = [];
    for (const head of n.kids.values()) for (let c: GNode | null = head; c !== null; c = c.alt) all.push(c);
    for (const c of all) {
      this.clear(c, slot);
      if (c.count === 0) this.unlink(n, c);
      else this.clearSlot(c, slot);
    }
  }

  /** Whether `slot` holds the block at pair index `at` of the chain `pairs` (tests). */
  holds(pairs: Uint32Array, at: number, slot: number): boolean {
    let node = this.root;
    let pos = 0;
    while (pos <= at) {
      const c = this.child(node, pairs[pos], pairs[pos + 1]);
      if (c === null) return false;
      const m = Math.min(c.len, (pairs.length - pos) >> 1);
      const s = c.src;
      let k = 1;
      for (
        let a = c.from + 2, b = pos + 2;
        k < m && s[a] === pairs[b] && s[a + 1] === pairs[b + 1];
        a += 2, b += 2
      )
        k++;
      if (at < pos + 2 * k) return this.has(c, slot);
      if (k < c.len) return false;
      pos += 2 * k;
      node = c;
    }
    return false;
  }

  /**
   * `depth[slot]` = largest k such that `slot` holds block k−1 of the chain `seq` ((lo, hi)
   * pairs), for every slot < `slotLimit` (0 for slots holding no prefix).
   */
  prefixDepths(seq: Uint32Array, depth: Int32Array): void {
    depth.fill(0, 0, this.nextSlot);
    const n = seq.length;
    let node = this.root;
    let prev: GNode | null = null;
    let prevDepth = 0;
    let pos = 0;
    while (pos < n) {
      const c = this.child(node, seq[pos], seq[pos + 1]);
      if (c === null) break;
      // Ranks of the previous node that do not continue into c stop at its end.
      if (prev !== null) assign(prev.bits, c.bits, prevDepth, depth);
      const m = Math.min(c.len, (n - pos) >> 1);
      const s = c.src;
      let k = 1;
      for (
        let a = c.from + 2, b = pos + 2;
        k < m && s[a] === seq[b] && s[a + 1] === seq[b + 1];
        a += 2, b += 2
      )
        k++;
      prev = c;
      prevDepth = (pos >> 1) + k;
      if (k < c.len) break;
      pos += 2 * k;
      node = c;
    }
    if (prev !== null) assign(prev.bits, EMPTY_BITS, prevDepth, depth);
  }
}

/** depth[s] = d for every slot s in `a` and not in `b` (words past an array's end are 0). */
function assign(a: Uint32Array, b: Uint32Array, d: number, depth: Int32Array): void {
  for (let w = 0; w < a.length; w++) {
    let x = a[w];
    if (w < b.length) x &= ~b[w];
    while (x !== 0) {
      const low = x & -x;
      depth[32 * w + 31 - Math.clz32(low)] = d;
      x ^= low;
    }
  }
}

function countNodes(n: GNode): number {
  let c = 1;
  if (n.kids !== null)
    for (const head of n.kids.values())
      for (let k: GNode | null = head; k !== null; k = k.alt) c += countNodes(k);
  return c;
}
