/** The per-worker bound of the exact index (issue 17): driven past it, the index holds. */
import { describe, expect, it } from 'vitest';
import { MAX_BLOCKS_PER_WORKER, RadixIndexer } from './indexer.js';
import { stored as storedEv } from './testing/gen.js';

/** A root chain of blocks with local hashes `locals` (external hash = local + 1e9) on (worker, dp 0). */
const stored = (worker: number, _dp: number, _parent: null, locals: number[]) =>
  storedEv(
    BigInt(worker),
    locals.map((l) => ({ ext: BigInt(l) + 1_000_000_000n, local: BigInt(l) })),
  );

describe('RadixIndexer maxBlocksPerWorker', () => {
  it('a worker whose removals never arrive: the rank is dropped and rebuilt at the bound, others untouched', () => {
    const ix = new RadixIndexer({ maxBlocksPerWorker: 100 });
    // Worker 2 holds 10 blocks throughout.
    ix.applyEvent(
      stored(
        2,
        0,
        null,
        Array.from({ length: 10 }, (_, i) => 50_000 + i),
      ),
    );
    // Worker 1 stores 10 root chains of 10 blocks each: exactly at the bound.
    for (let c = 0; c < 10; c++)
      ix.applyEvent(
        stored(
          1,
          0,
          null,
          Array.from({ length: 10 }, (_, i) => c * 1000 + i),
        ),
      );
    expect(ix.treeSizes().get('1:0')).toBe(100);
    expect(ix.overflows).toBe(0);
    // The 11th chain would make 110 > 100: the rank's 100 blocks go, then the chain is stored.
    ix.applyEvent(
      stored(
        1,
        0,
        null,
        Array.from({ length: 10 }, (_, i) => 10_000 + i),
      ),
    );
    expect(ix.treeSizes().get('1:0')).toBe(10);
    expect([ix.overflows, ix.overflowedBlocks]).toEqual([1, 100]);
    expect(ix.treeSizes().get('2:0')).toBe(10);
    // 10,000 more chains later the rank still holds at most 100 blocks.
    for (let c = 11; c < 10_011; c++) {
      ix.applyEvent(
        stored(
          1,
          0,
          null,
          Array.from({ length: 10 }, (_, i) => c * 1000 + i),
        ),
      );
      expect(ix.treeSizes().get('1:0')!).toBeLessThanOrEqual(100);
    }
    // 10 + 10,000 chains of 10 after the first overflow: one overflow per 10 chains (100 blocks).
    expect(ix.overflows).toBe(1 + 1000);
    expect(ix.totalPairs()).toBeLessThanOrEqual(110);
    // A single event larger than the bound is rejected whole.
    const before = ix.appliedCounts().get('invalid_block/stored') ?? 0;
    ix.applyEvent(
      stored(
        3,
        0,
        null,
        Array.from({ length: 101 }, (_, i) => 90_000 + i),
      ),
    );
    expect(ix.appliedCounts().get('invalid_block/stored')).toBe(before + 1);
    expect(ix.treeSizes().has('3:0')).toBe(false);
  });

  it('defaults to 2^22 blocks and rejects a bad bound naming the field', () => {
    expect(new RadixIndexer().maxBlocksPerWorker).toBe(MAX_BLOCKS_PER_WORKER);
    expect(MAX_BLOCKS_PER_WORKER).toBe(4_194_304);
    expect(() => new RadixIndexer({ maxBlocksPerWorker: 0 })).toThrow(/maxBlocksPerWorker/);
  });
});
