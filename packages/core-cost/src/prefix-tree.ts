/**
 * One rank's prompt blocks as a refcounted prefix tree (docs/protocol.md §9.1 `unique_blocks` and
 * `fractional`, for blocks named by sequence hashes).
 *
 * A sequence hash names its whole prefix, so the blocks a rank holds are a union of chains that
 * share prefixes: a radix tree. Each node is a run of blocks held by the same requests; its
 * `ref` is how many requests pass through it. Booking a prompt walks the tree comparing hashes
 * in order (sequential reads of arrays the tree already holds) and adds one node at the end,
 * splitting at most one node where the prompt diverges or ends; freeing walks the same path and
 * drops the nodes whose `ref` reaches 0. A per-block hash table did a random probe per block
 * instead (2048 probes for a 32k-token prompt, each a likely cache miss in a rank's cold table),
 * twice per request.
 *
 * Equivalence with the per-block set holds when every chain given is a true sequence-hash chain
 * (block k's hash determines blocks 0..k); two chains that share a hash at some position then
 * share every earlier one. A free merges a node with its only child again when both are held by
 * the same requests, so a long-lived prefix does not stay cut
 * at every point where some request once ended. A live request never ends inside a node (the
 * node there has a larger `ref` than what follows), so freeing needs no comparisons.
 *
 * Fractions (§9.3) are per node: every block of a node has been held by the same requests, so a
 * write to "every block only this request holds" is a write to the nodes of its path with
 * `ref === 1`, and splits copy the value. The deficit is kept in 2^−24 units per block exactly as
 * in `BlockTable`.
 */
import { deficitUnits } from './block-table.js';
import { ChainTree, EMPTY_BITS, newNode, type ChainNode } from './chain-tree.js';

export class PrefixTree extends ChainTree {
  /** Distinct blocks held. */
  size = 0;
  /** Blocks that carry a fractional value. */
  fracBlocks = 0;
  /** Σ deficitUnits(fractional) over blocks with a fractional value. */
  deficitUnits = 0;

  /**
   * One more reference to every block of the chain `pairs[0 .. len)` (a whole prompt from its
   * first block: positions in the tree are pair indices in such arrays). The tree keeps `pairs`
   * (it must not change while booked). Returns the pair index where the blocks new to the tree
   * start (`len` when none are new): they are `pairs[start .. len)`.
   */
  insert(pairs: Uint32Array, len: number): number {
    let node = this.root;
    let pos = 0;
    while (pos < len) {
      const c = this.child(node, pairs[pos], pairs[pos + 1]);
      if (c === null) {
        const leaf = newNode(pairs, pos, (len - pos) >> 1, 1, EMPTY_BITS);
        this.link(node, leaf);
        this.nodes++;
        this.size += leaf.len;
        return pos;
      }
      const k = this.run(c, pairs, pos, len);
      // The chain diverges or ends inside c: only c's first k blocks gain the reference.
      if (k < c.len) this.split(c, k);
      c.ref++;
      pos += 2 * k;
      node = c;
    }
    return len;
  }

  /**
   * Drops one reference from every block of a chain booked with `insert`. Returns the pair index
   * where the blocks that left the tree start (`len` when none did): `pairs[start .. len)`.
   */
  remove(pairs: Uint32Array, len: number): number {
    const path = this.path;
    path.length = 0;
    let node = this.root;
    let pos = 0;
    let gone = len;
    while (pos < len) {
      const c = this.child(node, pairs[pos], pairs[pos + 1]);
      if (c === null) break;
      if (--c.ref === 0) {
        // Nothing else passes through c, so below it is only the rest of this chain.
        this.unlink(node, c);
        for (
          let x: ChainNode | null = c;
          x !== null;
          x = x.kids === null || x.kids.size === 0 ? null : x.kids.values().next().value!
        ) {
          this.nodes--;
          this.size -= x.len;
          if (x.frac === x.frac) {
            this.fracBlocks -= x.len;
            this.deficitUnits -= x.units * x.len;
          }
        }
        gone = pos;
        break;
      }
      path.push(c);
      pos += 2 * c.len;
      node = c;
    }
    this.mergePath();
    return gone;
  }

  /** Sets fractional = f on every block of the booked chain that no other request holds. */
  setFracWhereSole(pairs: Uint32Array, len: number, f: number): void {
    const u = deficitUnits(f);
    let node = this.root;
    let pos = 0;
    while (pos < len) {
      const c = this.child(node, pairs[pos], pairs[pos + 1]);
      if (c === null) return;
      if (c.ref === 1) {
        if (c.frac === c.frac) this.deficitUnits -= c.units * c.len;
        else this.fracBlocks += c.len;
        c.frac = f;
        c.units = u;
        this.deficitUnits += u * c.len;
      }
      pos += 2 * c.len;
      node = c;
    }
  }

  /** Longest k such that blocks 0..k−1 of `pairs` are held. */
  prefixDepth(pairs: Uint32Array): number {
    const n = pairs.length >> 1;
    let node = this.root;
    let depth = 0;
    while (depth < n) {
      const c = this.child(node, pairs[2 * depth], pairs[2 * depth + 1]);
      if (c === null) break;
      const k = this.run(c, pairs, 2 * depth, 2 * n);
      depth += k;
      if (k < c.len) break;
      node = c;
    }
    return depth;
  }

  /** Visits every held block: (lo, hi, refcount, fraction or NaN). Tests and debugging. */
  forEachBlock(fn: (lo: number, hi: number, ref: number, frac: number) => void): void {
    const stack: ChainNode[] = [this.root];
    while (stack.length > 0) {
      const n = stack.pop()!;
      for (let i = 0; i < n.len; i++) fn(n.src[n.from + 2 * i], n.src[n.from + 2 * i + 1], n.ref, n.frac);
      if (n.kids)
        for (const head of n.kids.values())
          for (let c: ChainNode | null = head; c !== null; c = c.alt) stack.push(c);
    }
  }
}
