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

import { ChainTree, EMPTY_BITS, newNode, type ChainNode } from './chain-tree.js';

/** `ChainTree` nodes here carry their rank slots in `bits` and the number of them in `ref`. */
export class HolderTree extends ChainTree {
  private words = 1;
  private nextSlot = 0;
  private readonly freeSlots: number[] = [];

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

  private has(n: ChainNode, slot: number): boolean {
    const w = slot >>> 5;
    return w < n.bits.length && (n.bits[w] & (1 << (slot & 31))) !== 0;
  }

  private set(n: ChainNode, slot: number): void {
    const w = slot >>> 5;
    if (w >= n.bits.length) {
      const grown = new Uint32Array(this.words);
      grown.set(n.bits);
      n.bits = grown;
    }
    const bit = 1 << (slot & 31);
    if ((n.bits[w] & bit) === 0) {
      n.bits[w] |= bit;
      n.ref++;
    }
  }

  private clear(n: ChainNode, slot: number): void {
    const w = slot >>> 5;
    const bit = 1 << (slot & 31);
    if (w < n.bits.length && (n.bits[w] & bit) !== 0) {
      n.bits[w] &= ~bit;
      n.ref--;
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
        this.link(node, newNode(pairs, pos, (to - pos) >> 1, 1, bits));
        this.nodes++;
        break;
      }
      path.push(c);
      const k = this.run(c, pairs, pos, to);
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
        if (c.ref === 0) {
          this.unlink(node, c);
          this.nodes -= countNodes(c);
          break;
        }
      }
      path.push(c);
      pos = end;
      node = c;
    }
    this.mergePath();
  }

  private clearSlot(n: ChainNode, slot: number): void {
    if (n.kids === null) return;
    const all: ChainNode[] = [];
    for (const head of n.kids.values())
      for (let c: ChainNode | null = head; c !== null; c = c.alt) all.push(c);
    for (const c of all) {
      this.clear(c, slot);
      if (c.ref === 0) {
        this.unlink(n, c);
        this.nodes -= countNodes(c);
      } else this.clearSlot(c, slot);
    }
  }

  /** Whether `slot` holds the block at pair index `at` of the chain `pairs` (tests). */
  holds(pairs: Uint32Array, at: number, slot: number): boolean {
    let node = this.root;
    let pos = 0;
    while (pos <= at) {
      const c = this.child(node, pairs[pos], pairs[pos + 1]);
      if (c === null) return false;
      const k = this.run(c, pairs, pos, pairs.length);
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
    let prev: ChainNode | null = null;
    let prevDepth = 0;
    let pos = 0;
    while (pos < n) {
      const c = this.child(node, seq[pos], seq[pos + 1]);
      if (c === null) break;
      // Ranks of the previous node that do not continue into c stop at its end.
      if (prev !== null) assign(prev.bits, c.bits, prevDepth, depth);
      const k = this.run(c, seq, pos, n);
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

function countNodes(n: ChainNode): number {
  let c = 1;
  if (n.kids !== null)
    for (const head of n.kids.values())
      for (let k: ChainNode | null = head; k !== null; k = k.alt) c += countNodes(k);
  return c;
}
