import { RadixIndexer } from './indexer.js';
import { runIndexerConformance } from './testing/index.js';

runIndexerConformance(
  'RadixIndexer (single-threaded)',
  () => new RadixIndexer({ initialCapacity: 16, maxSlots: 32 }),
);

import { describe, expect, it } from 'vitest';
import { stored, removed } from './testing/gen.js';

describe('RadixIndexer specifics', () => {
  it('grows past its initial worker-slot capacity without losing blocks', () => {
    const ix = new RadixIndexer({ initialCapacity: 16, maxSlots: 32 });
    for (let w = 0; w < 100; w++)
      ix.applyEvent(
        stored(BigInt(w), [
          { ext: 1n, local: 1n },
          { ext: 2n, local: BigInt(w % 3) + 10n },
        ]),
      );
    const s = ix.findMatches([1n, 10n]).scores;
    expect(s.size).toBe(100);
    // workers w with w % 3 == 0 hold local 10 at depth 1: 0, 3, ..., 99 -> 34 of them
    expect([...s.values()].filter((v) => v === 2).length).toBe(34);
    for (let w = 0; w < 100; w += 2) ix.removeWorker(BigInt(w));
    expect(ix.findMatches([1n]).scores.size).toBe(50);
    // Freed slots are reused by new workers and start empty.
    ix.applyEvent(stored(500n, [{ ext: 7n, local: 77n }]));
    expect(ix.findMatches([1n]).scores.has('500:0')).toBe(false);
    expect(ix.findMatches([77n]).scores.get('500:0')).toBe(1);
  });

  it('a Removed with a repeated hash and two hashes of one identity: each hash once, the identity once', () => {
    const ix = new RadixIndexer({ initialCapacity: 16 });
    // ext 1 and ext 2 both map to the root identity 5 (chain(root, 5) = 5); Held = {5}.
    ix.applyEvent(stored(1n, [{ ext: 1n, local: 5n }]));
    ix.applyEvent(stored(1n, [{ ext: 2n, local: 5n }]));
    expect(ix.treeSizes().get('1:0')).toBe(1);
    // §7.2: 1 -> remove 5 from Held; 1 again -> missing (block_not_found); 2 -> 5, already gone.
    expect(ix.applyEventStatus(removed(1n, [1n, 1n, 2n]))).toBe('block_not_found');
    expect(ix.treeSizes().get('1:0')).toBe(0);
    expect(ix.findMatches([5n]).scores.size).toBe(0);
    // Both mappings are gone: a child of either is rejected.
    expect(ix.applyEventStatus(stored(1n, [{ ext: 3n, local: 6n }], 2n))).toBe('parent_block_not_found');
    expect(ix.applyEventStatus(removed(1n, [2n]))).toBe('block_not_found');
  });

  it('deletes a block entry when its last holder goes, and tombstones are recycled', () => {
    const ix = new RadixIndexer({ initialCapacity: 16 });
    for (let round = 0; round < 50; round++) {
      const exts = Array.from({ length: 20 }, (_, i) => BigInt(round * 100 + i));
      ix.applyEvent(
        stored(
          1n,
          exts.map((e) => ({ ext: e, local: e + 7n })),
        ),
      );
      ix.applyEvent(removed(1n, exts));
    }
    expect(ix.table.live).toBe(0);
    expect(ix.table.capacity).toBeLessThanOrEqual(64);
    expect(ix.totalPairs()).toBe(0);
  });

  it('early exit stops once a single worker remains', () => {
    const ix = new RadixIndexer();
    ix.applyEvent(
      stored(
        1n,
        [1n, 2n, 3n, 4n].map((l) => ({ ext: l, local: l })),
      ),
    );
    ix.applyEvent(stored(2n, [{ ext: 1n, local: 1n }]));
    expect(ix.findMatches([1n, 2n, 3n, 4n]).scores.get('1:0')).toBe(4);
    // After depth 0 only worker 1 remains (it holds block 1): reported at depth 2 with early exit.
    const early = ix.findMatches([1n, 2n, 3n, 4n], { earlyExitSingle: true }).scores;
    expect(early.get('1:0')).toBe(2);
    expect(early.get('2:0')).toBe(1);
  });
});
