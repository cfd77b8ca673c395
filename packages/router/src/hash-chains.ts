/**
 * The block hashes of earlier turns, kept so that a prompt extending one is hashed from where it
 * left off (issue 14: "reuse the previous turn's hash chain"). The tokenizer names prefixes: a
 * `TokensPrefix` says which token sequence the prompt extends (`reused`, a prefix-cache entry of the
 * frontend's prompt encoder) and under which name this prompt's own prefix is kept (`leaf`). A name
 * stands for one token sequence for the life of the process, so the kept hashes of a name are the
 * hashes of the first blocks of every prompt that carries it: no compare, no tokens pinned.
 *
 * One chain per conversation: a turn takes over the chain of the prefix it extends and grows it in
 * place (capacity +25 %), so a 150k-token agent conversation holds one 150 kB chain, not one per
 * turn. Bounded in bytes (`MAX_HASH_CHAIN_BYTES` per router), least recently used out.
 */
import { extendBlockHashes } from '@kvrouter/protocols';
import type { TokensPrefix } from './types.js';

/** Bytes of kept hash chains per router (local + sequence pairs: 16 bytes per block). */
export const MAX_HASH_CHAIN_BYTES = 32 * 1024 * 1024;

interface Chain {
  local: Uint32Array;
  seq: Uint32Array;
  /** Blocks held (their pairs are the first `2 * blocks` words of each array). */
  blocks: number;
}

export class HashChains {
  /** By prefix name, least recently used first. */
  private readonly chains = new Map<number, Chain>();
  private bytes = 0;
  /** Chains dropped to stay within the bound. */
  evicted = 0;
  /** Blocks whose hashes came from a kept chain instead of being computed. */
  reusedBlocks = 0;

  constructor(readonly limitBytes: number = MAX_HASH_CHAIN_BYTES) {}

  /** Bytes held (both arrays of every chain, at their capacity). */
  get held(): number {
    return this.bytes;
  }

  get size(): number {
    return this.chains.size;
  }

  /**
   * The plain-block local and sequence hashes of `tokens` (whose prefixes `p` names) into `local` /
   * `seq` (each at least 2 * nBlocks long): the blocks of `p.reused`'s kept chain are copied, the
   * rest hashed (`extendBlockHashes`), then this prompt's chain is kept under `p.leaf`. Returns
   * nBlocks.
   */
  hash(
    p: TokensPrefix,
    tokens: Uint32Array,
    blockSize: number,
    local: Uint32Array,
    seq: Uint32Array,
  ): number {
    const from = this.take(p, blockSize, Math.floor(tokens.length / blockSize), local, seq);
    const n = extendBlockHashes(tokens, blockSize, from, local, seq);
    this.keep(p, blockSize, local.subarray(0, 2 * n), seq.subarray(0, 2 * n));
    return n;
  }

  /**
   * Copies the kept hashes of `p.reused` (at most its `reusedTokens` / `blockSize` blocks, at most
   * `maxBlocks`) into the heads of `local` and `seq`; returns how many blocks it copied.
   */
  take(p: TokensPrefix, blockSize: number, maxBlocks: number, local: Uint32Array, seq: Uint32Array): number {
    const c = this.chains.get(p.reused);
    if (c === undefined) return 0;
    const k = Math.min(c.blocks, Math.floor(p.reusedTokens / blockSize), maxBlocks);
    if (k <= 0) return 0;
    local.set(c.local.subarray(0, 2 * k));
    seq.set(c.seq.subarray(0, 2 * k));
    this.reusedBlocks += k;
    return k;
  }

  /**
   * Keeps this prompt's hashes of its first `p.leafTokens` tokens under `p.leaf`, taking over the
   * chain of `p.reused` (the earlier turn this one extends; nobody else will name it with more
   * blocks than this turn holds). `local` / `seq` hold at least that many blocks.
   */
  keep(p: TokensPrefix, blockSize: number, local: Uint32Array, seq: Uint32Array): void {
    const blocks = Math.min(Math.floor(p.leafTokens / blockSize), local.length >>> 1, seq.length >>> 1);
    if (blocks <= 0 || this.limitBytes <= 0) return;
    const m = this.chains;
    let c = m.get(p.leaf);
    if (c !== undefined) {
      m.delete(p.leaf);
      if (c.blocks >= blocks) {
        m.set(p.leaf, c); // the same prefix again: most recently used
        return;
      }
    } else if (p.reused !== p.leaf && (c = m.get(p.reused)) !== undefined) m.delete(p.reused);
    const words = 2 * blocks;
    if (c === undefined || c.local.length < words) {
      if (c !== undefined) this.bytes -= 8 * c.local.length;
      const cap = 2 * Math.ceil(blocks * 1.25);
      // A chain over the whole bound is not kept.
      if (8 * cap > this.limitBytes) return;
      c = { local: new Uint32Array(cap), seq: new Uint32Array(cap), blocks: 0 };
      this.bytes += 8 * cap;
    }
    c.local.set(local.subarray(0, words));
    c.seq.set(seq.subarray(0, words));
    c.blocks = blocks;
    m.set(p.leaf, c);
    for (const [k, old] of m) {
      if (this.bytes <= this.limitBytes) break;
      m.delete(k);
      this.bytes -= 8 * old.local.length;
      this.evicted++;
    }
  }
}
