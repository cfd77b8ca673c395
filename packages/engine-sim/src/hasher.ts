import { chainHashInto, hashTokenBlock, loraSeed } from '@kvrouter/protocols';

/**
 * The two hash steps the block manager needs (docs/protocol.md §2.1, §2.2), on (lo, hi) u32 pairs so no
 * BigInt is made per block. Injectable so tests can check the engine against an independent oracle.
 */
export interface BlockHasher {
  /** Local hash of `tokens[start, start + count)` with a 64-bit seed, written to `out[idx]`, `out[idx + 1]`. */
  hashBlock: typeof hashTokenBlock;
  /** Sequence hash step `xxh3_64(LE64(prev) ‖ LE64(local), seed 1337)` into `out[idx]`, `out[idx + 1]`. */
  chain: typeof chainHashInto;
  /** Seed for a LoRA adapter name; empty or absent = base seed 1337. */
  seedOf(loraName: string | undefined): bigint;
}

export const DEFAULT_HASHER: BlockHasher = {
  hashBlock: hashTokenBlock,
  chain: chainHashInto,
  seedOf: (name) => (name ? loraSeed(name) : 1337n),
};
