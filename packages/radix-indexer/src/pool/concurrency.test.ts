import { describe, expect, it } from 'vitest';
import { KvrError } from '@kvrouter/protocols';
import { PoolIndexer } from './pool.js';
import { RadixIndexer } from '../indexer.js';
import { ReferenceIndex, Workload, refSequence, removed, stored, type Op } from '../testing/index.js';

const tick = () => new Promise<void>((r) => setImmediate(r));

describe('PoolIndexer under concurrent writes', () => {
  it('reads while 4 writers apply: never an unstored (block, worker) pair; ends equal to the single-threaded index', async () => {
    const pool = PoolIndexer.create({ threads: 4, initialCapacity: 64, maxSlots: 32 });
    const single = new RadixIndexer();
    const ref = new ReferenceIndex();
    // Every (rank, block identity) any event ever stored: the only pairs a query may report.
    const everStored = new Set<string>();
    const wl = new Workload(11, { workers: 8, ranks: 2, prompts: 40, maxLen: 24 });
    let queries = 0;
    let reported = 0;
    try {
      for (let round = 0; round < 40; round++) {
        for (let i = 0; i < 150; i++) {
          const op: Op = wl.next();
          if (op.kind !== 'event') continue; // removals of whole workers are covered by the conformance suite
          pool.applyEvent(op.ev);
          single.applyEvent(op.ev);
          ref.apply(op.ev);
          for (const [k, held] of ref.held) for (const id of held) everStored.add(`${k}/${id}`);
        }
        await tick(); // lets the pool dispatch; the writers now run while we query below
        // A fixed number of queries per round (no timing in tests); the writers run meanwhile.
        for (let n = 0; n < 100; n++) {
          const q = wl.query();
          const seq = refSequence(q);
          for (const [k, depth] of pool.findMatches(q).scores) {
            for (let d = 0; d < depth; d++) {
              if (!everStored.has(`${k}/${seq[d]}`))
                throw new Error(`reported ${k} for never-stored block at depth ${d}`);
            }
            reported++;
          }
          queries++;
        }
      }
      await pool.flush();
      expect(queries).toBe(4000);
      expect(reported, 'queries reported some worker').toBeGreaterThan(0);
      expect(pool.growths, 'the snapshot path ran during the test').toBeGreaterThan(0);
      for (let q = 0; q < 300; q++) {
        const query = wl.query();
        expect(pool.findMatches(query).scores, `final query ${q}`).toEqual(single.findMatches(query).scores);
      }
      expect(pool.treeSizes(), 'tree sizes').toEqual(single.treeSizes());
      expect(pool.appliedCounts(), 'applied counts').toEqual(single.appliedCounts());
    } finally {
      await pool.close();
    }
  });

  it('grows its worker slots past the initial width', async () => {
    const pool = PoolIndexer.create({ threads: 2, initialCapacity: 64, maxSlots: 32 });
    try {
      for (let w = 0; w < 100; w++)
        pool.applyEvent(
          stored(BigInt(w), [
            { ext: 1n, local: 1n },
            { ext: 2n, local: BigInt(w % 3) + 10n },
          ]),
        );
      await pool.flush();
      const s = pool.findMatches([1n, 10n]).scores;
      expect(s.size).toBe(100);
      // w % 3 == 0 for w in 0..99: 34 workers hold the second block
      expect([...s.values()].filter((v) => v === 2).length).toBe(34);
      expect(pool.reader.table.maxSlots).toBeGreaterThanOrEqual(100);
    } finally {
      await pool.close();
    }
  });

  it('survives a writer crash: the lost workers are reported for resync, the rest keep serving', async () => {
    const resynced: bigint[][] = [];
    const errors: KvrError[] = [];
    const pool = PoolIndexer.create({
      threads: 2,
      onResync: (w) => resynced.push(w),
      onError: (e) => errors.push(e),
    });
    try {
      // Workers 1 and 2 land on lanes 0 and 1 (round-robin on first sight).
      pool.applyEvent(
        stored(1n, [
          { ext: 10n, local: 5n },
          { ext: 11n, local: 6n },
        ]),
      );
      pool.applyEvent(stored(2n, [{ ext: 20n, local: 5n }]));
      await pool.flush();
      expect(pool.findMatches([5n, 6n]).scores).toEqual(
        new Map([
          ['1:0', 2],
          ['2:0', 1],
        ]),
      );
      await pool.crashWriter(0);
      await pool.flush();
      expect(resynced).toEqual([[1n]]);
      expect(errors.some((e) => e instanceof KvrError && e.code === 'writer_crashed')).toBe(true);
      // Worker 1's blocks are gone until resync; worker 2 (other thread) is untouched.
      expect(pool.findMatches([5n, 6n]).scores).toEqual(new Map([['2:0', 1]]));
      // The event layer replays a tree dump for worker 1 into the replacement thread.
      pool.removeWorker(1n);
      pool.applyEvent(stored(1n, [{ ext: 10n, local: 5n }]));
      pool.applyEvent(stored(1n, [{ ext: 11n, local: 6n }], 10n));
      await pool.flush();
      expect(pool.findMatches([5n, 6n]).scores).toEqual(
        new Map([
          ['1:0', 2],
          ['2:0', 1],
        ]),
      );
    } finally {
      await pool.close();
    }
  });
});

describe('PoolIndexer ordering', () => {
  it('applies a worker’s events in order even when many batches queue up at once', async () => {
    // Long chains submitted without yielding: several sealed batches per writer thread, each
    // later event depending on earlier ones (parents, removals of stored blocks).
    const pool = PoolIndexer.create({ threads: 2, initialCapacity: 1 << 18, maxSlots: 32 });
    const single = new RadixIndexer();
    try {
      let ext = 1n;
      const live: bigint[][] = [[], [], [], []];
      for (let round = 0; round < 60; round++) {
        for (let w = 0; w < 4; w++) {
          const worker = BigInt(w + 1);
          let parent: bigint | null = null;
          const chain: bigint[] = [];
          for (let s = 0; s < 16; s++) {
            const blocks = Array.from({ length: 32 }, () => ({ ext: ext, local: ext++ * 7919n }));
            const ev = stored(worker, blocks, parent);
            pool.applyEvent(ev);
            single.applyEvent(ev);
            parent = blocks[31]!.ext;
            chain.push(...blocks.map((b) => b.ext));
          }
          live[w]!.push(...chain);
          if (live[w]!.length > 4096) {
            const old = live[w]!.splice(0, 512);
            const ev = removed(worker, old);
            pool.applyEvent(ev);
            single.applyEvent(ev);
          }
        }
      }
      await pool.flush();
      expect(pool.appliedCounts(), 'every event applied by the time flush resolves').toEqual(
        single.appliedCounts(),
      );
      expect(pool.appliedCounts().get('ok/stored')).toBe(60 * 4 * 16);
      expect(pool.treeSizes()).toEqual(single.treeSizes());
    } finally {
      await pool.close();
    }
  });
});
