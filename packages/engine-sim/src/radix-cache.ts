import { u64FromParts } from '@kvrouter/protocols';
import type { KvEventLog } from './event-log.js';

/**
 * One edge of the radix tree: tokens `buf[off, off + len)` at path positions `[depth, depth + len)`.
 * The tokens are a view into the inserting request's token buffer (its content never changes), so
 * extending a request's own leaf is `len++` with no copy.
 */
export class RadixNode {
  readonly children = new Map<number, RadixNode>();
  /** Live requests whose path runs through this node (SGLang `lock_ref`); locked nodes are never evicted. */
  lock = 0;
  lastAccess = 0;
  /** Sequence hashes (lo, hi pairs) of the KV blocks whose last token lies in this node, in path order. */
  blocks: number[] = [];

  constructor(
    public parent: RadixNode | null,
    public buf: Uint32Array,
    public off: number,
    public len: number,
    public depth: number,
  ) {}
}

/** What `RadixCache.extend` needs from a request: its tokens, its locked path and its block hashes. */
export interface RadixOwner {
  readonly tokens: Uint32Array;
  /** Deepest node of the request's locked path. */
  node: RadixNode;
  /** Per block j at `4j`: local lo, local hi, sequence lo, sequence hi. */
  readonly hashes: Uint32Array;
  /** Makes sure blocks 0..j are hashed. */
  hashUpTo(j: number): void;
}

const EMPTY = new Uint32Array(0);

/**
 * SGLang-flavoured KV cache of one dp rank (docs/protocol.md §17, `--engine-type sglang`): a radix tree
 * over tokens (page size 1), so a prefix hit can end anywhere, not only at a block boundary. Capacity
 * is in tokens (`numGpuBlocks · blockSize`). KV events stay per `blockSize` block so routers index
 * the same block hashes as for vLLM: block j is Stored when the tree first holds a path through its
 * last token, and Removed when the node holding that token is evicted. Eviction takes whole
 * unlocked leaves in least-recently-used order (SGLang's `evict`), so children go before parents and
 * the cached block set stays closed under parent.
 */
export class RadixCache {
  private readonly roots = new Map<string, RadixNode>();
  private clock = 0;
  /** Tokens held by the tree, locked or not. */
  treeTokens = 0;
  /** Tokens of nodes with lock > 0 (in use by live requests). */
  lockedTokens = 0;
  evictions = 0;

  constructor(
    readonly capacity: number,
    private readonly bs: number,
    private readonly log: KvEventLog,
    private readonly blockTokenIds = false,
  ) {}

  /** Tokens a new allocation can have without eviction. */
  get free(): number {
    return this.capacity - this.treeTokens;
  }

  /** Cached tokens no live request uses. */
  get evictable(): number {
    return this.treeTokens - this.lockedTokens;
  }

  root(seedKey: string): RadixNode {
    let r = this.roots.get(seedKey);
    if (r === undefined) {
      r = new RadixNode(null, EMPTY, 0, 0, 0);
      r.lock = 1; // never a leaf to evict
      this.roots.set(seedKey, r);
    }
    return r;
  }

  /**
   * Longest cached prefix of `tokens[0, limit)`: the deepest node and the matched length. A node
   * matched part-way is split so the match ends at a node boundary (SGLang does the same). Touches
   * the path for LRU; locks nothing.
   */
  match(root: RadixNode, tokens: Uint32Array, limit: number): { node: RadixNode; len: number } {
    let node = root;
    let pos = 0;
    const t = ++this.clock;
    while (pos < limit) {
      const child = node.children.get(tokens[pos]);
      if (child === undefined) break;
      const k = common(child, tokens, pos, limit);
      node = k < child.len ? this.split(child, k) : child;
      node.lastAccess = t;
      pos += k;
      if (k < child.len) break;
    }
    return { node, len: pos };
  }

  /** Locks the path root → node for one more request. */
  lockPath(node: RadixNode): void {
    for (let n: RadixNode | null = node; n !== null; n = n.parent) {
      if (n.lock++ === 0) this.lockedTokens += n.len;
    }
  }

  unlockPath(node: RadixNode): void {
    for (let n: RadixNode | null = node; n !== null; n = n.parent) {
      if (--n.lock === 0) this.lockedTokens -= n.len;
    }
  }

  /**
   * Puts `o.tokens[from, to)` after `o.node` (whose path ends at `from`), moving `o.node` (and its
   * lock) down to the new end. Tokens another request already inserted are shared, not stored again;
   * new ones take `to − from` at most, which the caller has made free. Stored events fire for every
   * block whose last token is newly inserted.
   */
  extend(o: RadixOwner, from: number, to: number): void {
    const tokens = o.tokens;
    let pos = from;
    const t = ++this.clock;
    while (pos < to) {
      const node = o.node;
      const child = node.children.get(tokens[pos]);
      if (child !== undefined) {
        const k = common(child, tokens, pos, to);
        const next = k < child.len ? this.split(child, k) : child;
        if (next.lock++ === 0) this.lockedTokens += next.len;
        next.lastAccess = t;
        o.node = next;
        pos += k;
        continue;
      }
      const n = to - pos;
      let target: RadixNode;
      if (
        node.parent !== null &&
        node.children.size === 0 &&
        node.lock === 1 &&
        node.buf === tokens &&
        node.off + node.len === pos
      ) {
        // The request's own leaf that nobody else uses: grow it in place.
        node.len += n;
        this.lockedTokens += n;
        target = node;
      } else {
        target = new RadixNode(node, tokens, pos, n, pos);
        node.children.set(tokens[pos], target);
        target.lock = 1;
        this.lockedTokens += n;
        o.node = target;
      }
      target.lastAccess = t;
      this.treeTokens += n;
      for (let j = Math.floor(pos / this.bs); (j + 1) * this.bs <= to; j++) {
        o.hashUpTo(j);
        const h = o.hashes;
        const b = 4 * j;
        const ids = this.blockTokenIds ? tokens.slice(j * this.bs, (j + 1) * this.bs) : undefined;
        if (j > 0) this.log.stored(true, h[b - 2], h[b - 1], h[b + 2], h[b + 3], h[b], h[b + 1], j, ids);
        else this.log.stored(false, 0, 0, h[b + 2], h[b + 3], h[b], h[b + 1], 0, ids);
        target.blocks.push(h[b + 2], h[b + 3]);
      }
      pos = to;
    }
  }

  /**
   * Frees at least `need` tokens by evicting unlocked leaves, least recently used first (a parent
   * left childless and unlocked becomes a candidate). Returns the tokens freed (less when not enough
   * is evictable).
   */
  evict(need: number): number {
    if (need <= 0) return 0;
    const heap: RadixNode[] = [];
    for (const r of this.roots.values()) collectLeaves(r, heap);
    heapify(heap);
    let freed = 0;
    while (freed < need && heap.length > 0) {
      const x = heapPop(heap);
      const parent = x.parent!;
      parent.children.delete(x.buf[x.off]);
      x.parent = null;
      this.treeTokens -= x.len;
      freed += x.len;
      this.evictions++;
      // Deepest block first, as a tail-first release would.
      for (let i = x.blocks.length - 2; i >= 0; i -= 2) this.log.removed(x.blocks[i], x.blocks[i + 1]);
      if (parent.parent !== null && parent.lock === 0 && parent.children.size === 0) heapPush(heap, parent);
    }
    return freed;
  }

  /** Sequence hashes of every cached block (tests, dumps). */
  cachedHashes(): Set<bigint> {
    const out = new Set<bigint>();
    const walk = (n: RadixNode): void => {
      for (let i = 0; i < n.blocks.length; i += 2) out.add(u64FromParts(n.blocks[i], n.blocks[i + 1]));
      for (const c of n.children.values()) walk(c);
    };
    for (const r of this.roots.values()) walk(r);
    return out;
  }

  /**
   * Structural invariants against the expected lock count per node (`locks`: node → live requests
   * whose path passes through it); [] = sound.
   */
  audit(locks: Map<RadixNode, number>): string[] {
    const bad: string[] = [];
    let tree = 0;
    let locked = 0;
    const walk = (n: RadixNode, isRoot: boolean): void => {
      if (!isRoot) {
        tree += n.len;
        if (n.lock > 0) locked += n.len;
        if (n.len <= 0) bad.push(`node at ${n.depth}: empty`);
        const want = locks.get(n) ?? 0;
        if (n.lock !== want)
          bad.push(`node at ${n.depth} (+${n.len}): lock ${n.lock}, ${want} requests hold it`);
        const nb = Math.floor((n.depth + n.len) / this.bs) - Math.floor(n.depth / this.bs);
        if (n.blocks.length !== 2 * nb)
          bad.push(`node at ${n.depth} (+${n.len}): ${n.blocks.length / 2} block hashes, ${nb} block ends`);
      }
      for (const [k, c] of n.children) {
        if (c.parent !== n) bad.push(`node at ${c.depth}: wrong parent`);
        if (c.buf[c.off] !== k) bad.push(`node at ${c.depth}: keyed by ${k}, starts with ${c.buf[c.off]}`);
        if (c.depth !== n.depth + n.len) bad.push(`node at ${c.depth}: parent ends at ${n.depth + n.len}`);
        walk(c, false);
      }
    };
    for (const r of this.roots.values()) walk(r, true);
    if (tree !== this.treeTokens) bad.push(`treeTokens ${this.treeTokens}, nodes hold ${tree}`);
    if (locked !== this.lockedTokens)
      bad.push(`lockedTokens ${this.lockedTokens}, locked nodes hold ${locked}`);
    if (tree > this.capacity) bad.push(`tree holds ${tree} tokens, capacity ${this.capacity}`);
    return bad;
  }

  /** Cuts `child` after `k` tokens: a new upper node takes the first k, `child` keeps the rest. */
  private split(child: RadixNode, k: number): RadixNode {
    const parent = child.parent!;
    const up = new RadixNode(parent, child.buf, child.off, k, child.depth);
    up.lock = child.lock;
    up.lastAccess = child.lastAccess;
    const nb = Math.floor((child.depth + k) / this.bs) - Math.floor(child.depth / this.bs);
    up.blocks = child.blocks.slice(0, 2 * nb);
    child.blocks = child.blocks.slice(2 * nb);
    parent.children.set(child.buf[child.off], up);
    child.off += k;
    child.len -= k;
    child.depth += k;
    child.parent = up;
    up.children.set(child.buf[child.off], child);
    return up;
  }
}

function common(n: RadixNode, tokens: Uint32Array, pos: number, limit: number): number {
  const max = Math.min(n.len, limit - pos);
  const buf = n.buf;
  const off = n.off;
  let k = 0;
  while (k < max && buf[off + k] === tokens[pos + k]) k++;
  return k;
}

function collectLeaves(n: RadixNode, out: RadixNode[]): void {
  for (const c of n.children.values()) {
    if (c.children.size === 0) {
      if (c.lock === 0) out.push(c);
    } else collectLeaves(c, out);
  }
}

// Min-heap on lastAccess (ties: deeper first, so a chain goes tail first).
function less(a: RadixNode, b: RadixNode): boolean {
  return a.lastAccess < b.lastAccess || (a.lastAccess === b.lastAccess && a.depth > b.depth);
}

function siftDown(h: RadixNode[], i: number): void {
  const n = h.length;
  for (;;) {
    const l = 2 * i + 1;
    if (l >= n) return;
    const m = l + 1 < n && less(h[l + 1], h[l]) ? l + 1 : l;
    if (!less(h[m], h[i])) return;
    [h[m], h[i]] = [h[i], h[m]];
    i = m;
  }
}

function heapify(h: RadixNode[]): void {
  for (let i = (h.length >> 1) - 1; i >= 0; i--) siftDown(h, i);
}

function heapPop(h: RadixNode[]): RadixNode {
  const top = h[0];
  const last = h.pop()!;
  if (h.length > 0) {
    h[0] = last;
    siftDown(h, 0);
  }
  return top;
}

function heapPush(h: RadixNode[], x: RadixNode): void {
  h.push(x);
  let i = h.length - 1;
  while (i > 0) {
    const p = (i - 1) >> 1;
    if (!less(h[i], h[p])) return;
    [h[i], h[p]] = [h[p], h[i]];
    i = p;
  }
}
