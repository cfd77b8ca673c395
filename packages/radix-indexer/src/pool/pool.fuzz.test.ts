/**
 * The multi-threaded PoolIndexer against the reference model under random event sequences (issue
 * 17): 2 writer threads, stored chains over tiny hash domains (shared prefixes, dangling parents,
 * re-stores), removals, clears and worker/rank removal; after each sequence (flushed) tree sizes and
 * the scores of random queries equal the model's. One pool serves every case; each case has its own
 * worker ids and removes them at its end, so cases do not see each other.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RouterEvent } from '@kvrouter/protocols';
import { fuzzParams, fuzzTimeout } from '@kvrouter/testkit';
import { PoolIndexer } from './pool.js';
import { ReferenceIndex, cleared, removed, stored } from '../testing/index.js';

const T = fuzzTimeout(120_000);
const ext = fc.bigInt({ min: 1n, max: 24n });
const local = fc.bigInt({ min: 1n, max: 6n });
const w = fc.nat({ max: 2 });
const dp = fc.nat({ max: 1 });

type Step =
  | { kind: 'stored'; w: number; blocks: { ext: bigint; local: bigint }[]; parent: bigint | null; dp: number }
  | { kind: 'removed'; w: number; exts: bigint[]; dp: number }
  | { kind: 'cleared'; w: number }
  | { kind: 'removeWorker'; w: number }
  | { kind: 'removeWorkerDpRank'; w: number; dp: number };

const step: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('stored' as const),
      w,
      blocks: fc.array(fc.record({ ext, local }), { minLength: 1, maxLength: 5 }),
      parent: fc.oneof(fc.constant(null), ext),
      dp,
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('removed' as const),
      w,
      exts: fc.array(ext, { minLength: 1, maxLength: 5 }),
      dp,
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('cleared' as const), w }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('removeWorker' as const), w }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('removeWorkerDpRank' as const), w, dp }) },
);

const only = (m: Map<string, number>, keys: Set<string>) =>
  new Map([...m].filter(([k, v]) => keys.has(k.split(':')[0]!) && v > 0));

describe('PoolIndexer (2 writer threads) against the reference model', () => {
  let pool: PoolIndexer;
  let caseNo = 0;
  beforeAll(() => {
    pool = PoolIndexer.create({ threads: 2, initialCapacity: 64, maxSlots: 32 });
  });
  afterAll(async () => {
    await pool.close();
  });

  it('agrees after every random sequence', { timeout: T }, async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(step, { maxLength: 30 }),
        fc.array(fc.array(local, { minLength: 1, maxLength: 6 }), { minLength: 1, maxLength: 4 }),
        async (steps, queries) => {
          const base = BigInt(++caseNo) * 10n;
          const wid = (i: number) => base + BigInt(i);
          const mine = new Set([0, 1, 2].map((i) => String(wid(i))));
          const ref = new ReferenceIndex();
          for (const s of steps) {
            let ev: RouterEvent | null = null;
            if (s.kind === 'stored') ev = stored(wid(s.w), s.blocks, s.parent, s.dp);
            else if (s.kind === 'removed') ev = removed(wid(s.w), s.exts, s.dp);
            else if (s.kind === 'cleared') ev = cleared(wid(s.w));
            if (ev) {
              pool.applyEvent(ev);
              ref.apply(ev);
            } else if (s.kind === 'removeWorker') {
              pool.removeWorker(wid(s.w));
              ref.removeWorker(wid(s.w));
            } else if (s.kind === 'removeWorkerDpRank') {
              pool.removeWorkerDpRank(wid(s.w), s.dp);
              ref.removeWorkerDpRank(wid(s.w), s.dp);
            }
          }
          await pool.flush();
          try {
            expect(only(pool.treeSizes(), mine)).toEqual(only(ref.treeSizes(), mine));
            for (const q of queries)
              expect(only(pool.findMatches(q).scores, mine), `query [${q.join(',')}]`).toEqual(
                only(ref.scores(q), mine),
              );
          } finally {
            for (let i = 0; i < 3; i++) pool.removeWorker(wid(i));
            await pool.flush();
          }
        },
      ),
      fuzzParams(150, 10_000),
    );
  });
});
