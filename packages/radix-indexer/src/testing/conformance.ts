/**
 * The conformance suite every KvIndexer implementation must pass (single-threaded, pool with N
 * writer threads, ...). Call `runIndexerConformance(name, factory)` inside a vitest file.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { RouterEvent } from '@kvrouter/protocols';
import type { KvIndexer } from '../types.js';
import { ReferenceIndex } from './reference.js';
import { Workload, cleared, removed, stored, type Op } from './gen.js';

export type IndexerFactory = () => KvIndexer | Promise<KvIndexer>;

const W1 = 7587872800778374919n; // above 2^53
const W2 = 42n;
const key = (w: bigint, dp = 0) => `${w}:${dp}`;
const nonZero = (m: Map<string, number>) => new Map([...m].filter(([, v]) => v > 0));

export async function applyOp(ix: KvIndexer, op: Op): Promise<void> {
  if (op.kind === 'event') ix.applyEvent(op.ev);
  else if (op.kind === 'removeWorker') ix.removeWorker(op.worker);
  else ix.removeWorkerDpRank(op.worker, op.dp);
  return Promise.resolve();
}

export function runIndexerConformance(name: string, factory: IndexerFactory): void {
  describe(`KvIndexer conformance: ${name}`, () => {
    const open: KvIndexer[] = [];
    const make = async () => {
      const ix = await factory();
      open.push(ix);
      return ix;
    };
    afterEach(async () => {
      await Promise.all(open.splice(0).map((ix) => ix.close()));
    });

    it('a stored chain matches its leading blocks only', async () => {
      const ix = await make();
      ix.applyEvent(
        stored(W1, [
          { ext: 100n, local: 1n },
          { ext: 101n, local: 2n },
          { ext: 102n, local: 3n },
        ]),
      );
      await ix.flush();
      expect(ix.findMatches([1n, 2n, 3n]).scores.get(key(W1))).toBe(3);
      expect(ix.findMatches([1n, 2n, 3n, 4n]).scores.get(key(W1))).toBe(3);
      expect(ix.findMatches([1n, 2n, 9n]).scores.get(key(W1))).toBe(2);
      // Same local hashes in another order are other blocks (identity is the whole prefix).
      expect(ix.findMatches([2n, 1n]).scores.has(key(W1))).toBe(false);
      expect(ix.findMatches([9n]).scores.size).toBe(0);
      expect(ix.treeSizes().get(key(W1))).toBe(3);
    });

    it('a chain continues from its parent across events', async () => {
      const ix = await make();
      ix.applyEvent(stored(W1, [{ ext: 100n, local: 1n }]));
      ix.applyEvent(stored(W1, [{ ext: 101n, local: 2n }], 100n));
      ix.applyEvent(stored(W2, [{ ext: 900n, local: 1n }]));
      await ix.flush();
      const s = ix.findMatches([1n, 2n]).scores;
      expect(s.get(key(W1))).toBe(2);
      expect(s.get(key(W2))).toBe(1);
    });

    it('rejects a Stored with an unknown parent whole', async () => {
      const ix = await make();
      ix.applyEvent(stored(W1, [{ ext: 100n, local: 1n }]));
      ix.applyEvent(
        stored(
          W1,
          [
            { ext: 201n, local: 5n },
            { ext: 202n, local: 6n },
          ],
          999n,
        ),
      );
      ix.applyEvent(stored(W2, [{ ext: 301n, local: 5n }], 100n)); // W2 never stored 100
      await ix.flush();
      expect(ix.treeSizes().get(key(W1))).toBe(1);
      expect(ix.treeSizes().get(key(W2)) ?? 0).toBe(0);
      expect(ix.appliedCounts().get('parent_block_not_found/stored')).toBe(2);
      expect(ix.appliedCounts().get('ok/stored')).toBe(1);
    });

    it('removing a middle block cuts the match there; descendants stay held', async () => {
      const ix = await make();
      ix.applyEvent(
        stored(
          W1,
          [1n, 2n, 3n, 4n].map((l) => ({ ext: 100n + l, local: l })),
        ),
      );
      ix.applyEvent(removed(W1, [102n]));
      await ix.flush();
      expect(ix.findMatches([1n, 2n, 3n, 4n]).scores.get(key(W1))).toBe(1);
      expect(ix.treeSizes().get(key(W1))).toBe(3);
      // Re-storing the middle block restores contiguity.
      ix.applyEvent(stored(W1, [{ ext: 102n, local: 2n }], 101n));
      await ix.flush();
      expect(ix.findMatches([1n, 2n, 3n, 4n]).scores.get(key(W1))).toBe(4);
      ix.applyEvent(removed(W1, [555n]));
      await ix.flush();
      expect(ix.appliedCounts().get('block_not_found/removed')).toBe(1);
    });

    it('Cleared drops every rank of the worker and nothing of others', async () => {
      const ix = await make();
      ix.applyEvent(stored(W1, [{ ext: 1n, local: 1n }], null, 0));
      ix.applyEvent(stored(W1, [{ ext: 1n, local: 1n }], null, 3));
      ix.applyEvent(stored(W2, [{ ext: 1n, local: 1n }]));
      ix.applyEvent(cleared(W1));
      await ix.flush();
      const s = ix.findMatches([1n]).scores;
      expect([...s.keys()]).toEqual([key(W2)]);
      // A cleared worker can store again from the root.
      ix.applyEvent(stored(W1, [{ ext: 1n, local: 1n }], null, 3));
      await ix.flush();
      expect(ix.findMatches([1n]).scores.get(key(W1, 3))).toBe(1);
    });

    it('dp ranks of one worker are separate holders', async () => {
      const ix = await make();
      ix.applyEvent(
        stored(
          W1,
          [
            { ext: 1n, local: 1n },
            { ext: 2n, local: 2n },
          ],
          null,
          0,
        ),
      );
      ix.applyEvent(stored(W1, [{ ext: 1n, local: 1n }], null, 1));
      await ix.flush();
      const r = ix.findMatches([1n, 2n]);
      expect(r.scores.get(key(W1, 0))).toBe(2);
      expect(r.scores.get(key(W1, 1))).toBe(1);
      expect(r.workers.get(key(W1, 1))).toEqual({ worker_id: W1, dp_rank: 1 });
      // Removal on rank 1 with rank 0's external hash only touches rank 1.
      ix.applyEvent(removed(W1, [1n], 1));
      await ix.flush();
      expect(ix.findMatches([1n, 2n]).scores.get(key(W1, 0))).toBe(2);
      expect(ix.findMatches([1n, 2n]).scores.has(key(W1, 1))).toBe(false);
    });

    it('removeWorker and removeWorkerDpRank forget blocks and tree sizes', async () => {
      const ix = await make();
      for (const dp of [0, 1]) ix.applyEvent(stored(W1, [{ ext: 1n, local: 1n }], null, dp));
      ix.applyEvent(stored(W2, [{ ext: 1n, local: 1n }]));
      ix.removeWorkerDpRank(W1, 1);
      await ix.flush();
      expect([...ix.findMatches([1n]).scores.keys()].sort()).toEqual([key(W1, 0), key(W2)].sort());
      ix.removeWorker(W1);
      await ix.flush();
      expect([...ix.findMatches([1n]).scores.keys()]).toEqual([key(W2)]);
      expect(nonZero(ix.treeSizes())).toEqual(new Map([[key(W2), 1]]));
      ix.removeWorker(12345n); // unknown: no effect
      await ix.flush();
      expect(ix.findMatches([1n]).scores.get(key(W2))).toBe(1);
    });

    it('invalid events (wrong types, oversized, unknown kind) are counted and change nothing', async () => {
      const ix = await make();
      ix.applyEvent(
        stored(W1, [
          { ext: 1n, local: 1n },
          { ext: 2n, local: 2n },
        ]),
      );
      await ix.flush();
      const before = await ix.dump();
      const bad: unknown[] = [
        stored(
          W1,
          [
            { ext: 3n, local: 3n },
            { ext: 'x' as unknown as bigint, local: 4n },
          ],
          2n,
        ),
        stored(W1, [{ ext: 3n, local: -1n }], 2n),
        stored(W1, [{ ext: 3n, local: 1n << 64n }], 2n),
        stored(
          W1,
          Array.from({ length: 70_000 }, (_, i) => ({ ext: BigInt(i + 10), local: BigInt(i + 10) })),
        ),
        { ...removed(W1, [1n]), worker_id: -5n },
        removed(W1, [1n, 2 as unknown as bigint]),
        { worker_id: W1, storage_tier: 'device', event: { event_id: 1n, dp_rank: 0, data: { bogus: {} } } },
        { worker_id: W1, storage_tier: 'device', event: { event_id: 1n, dp_rank: -1, data: 'cleared' } },
      ];
      for (const ev of bad) ix.applyEvent(ev as RouterEvent);
      await ix.flush();
      expect(await ix.dump()).toEqual(before);
      expect(ix.findMatches([1n, 2n, 3n]).scores.get(key(W1))).toBe(2);
      let invalid = 0;
      for (const [k, v] of ix.appliedCounts()) if (k.startsWith('invalid_block/')) invalid += v;
      expect(invalid).toBe(bad.length);
    });

    it('an invalid block value leaves no trace: no registered rank, counted invalid in any tier', async () => {
      const ix = await make();
      const W3 = 99n;
      // The bad value is the last block: anything encoded before it must be discarded.
      ix.applyEvent(
        stored(W3, [
          { ext: 1n, local: 1n },
          { ext: 2n, local: -2n },
        ]),
      );
      ix.applyEvent({ ...removed(W3, [1n, 1n << 64n]) });
      ix.applyEvent({
        ...stored(W3, [{ ext: 5n, local: 'x' as unknown as bigint }]),
        storage_tier: 'host_pinned',
      } as RouterEvent);
      ix.applyEvent(stored(W1, [{ ext: 1n, local: 1n }]));
      await ix.flush();
      expect(ix.treeSizes().has(key(W3))).toBe(false);
      expect(ix.findMatches([1n]).scores).toEqual(new Map([[key(W1), 1]]));
      let invalid = 0;
      for (const [k, v] of ix.appliedCounts()) if (k.startsWith('invalid_block/')) invalid += v;
      expect(invalid).toBe(3);
    });

    it('dump then restore into an empty index reproduces the scores', async () => {
      const ix = await make();
      const wl = new Workload(7);
      for (let i = 0; i < 600; i++) await applyOp(ix, wl.next());
      await ix.flush();
      const events = await ix.dump();
      // Parents come before children.
      const seen = new Set<string>();
      for (const ev of events) {
        const d = ev.event.data as {
          stored: { parent_hash: bigint | null; blocks: { block_hash: bigint }[] };
        };
        const k = `${ev.worker_id}:${ev.event.dp_rank}`;
        if (d.stored.parent_hash !== null) expect(seen.has(`${k}/${d.stored.parent_hash}`)).toBe(true);
        seen.add(`${k}/${d.stored.blocks[0].block_hash}`);
      }
      const copy = await make();
      for (const ev of events) copy.applyEvent(ev);
      await copy.flush();
      for (let q = 0; q < 300; q++) {
        const query = wl.query();
        expect(copy.findMatches(query).scores).toEqual(ix.findMatches(query).scores);
      }
    });

    it('long random operation sequences agree with the reference model', async () => {
      for (const seed of [1, 2, 3]) {
        const ix = await make();
        const ref = new ReferenceIndex();
        const wl = new Workload(seed, { workers: 5, ranks: 2 });
        for (let step = 0; step < 1500; step++) {
          const op = wl.next();
          await applyOp(ix, op);
          if (op.kind === 'event') ref.apply(op.ev);
          else if (op.kind === 'removeWorker') ref.removeWorker(op.worker);
          else ref.removeWorkerDpRank(op.worker, op.dp);
          if (step % 25 === 0) {
            await ix.flush();
            for (let q = 0; q < 10; q++) {
              const query = wl.query();
              expect(ix.findMatches(query).scores, `seed ${seed} step ${step}`).toEqual(ref.scores(query));
            }
            expect(nonZero(ix.treeSizes())).toEqual(nonZero(ref.treeSizes()));
          }
        }
      }
    });
  });
}
