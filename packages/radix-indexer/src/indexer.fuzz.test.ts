/**
 * Random KV event sequences against the reference index model (issue 17): after every event the
 * RadixIndexer agrees with `ReferenceIndex` (plain Maps and Sets, PROTOCOL §7.2-7.3) on the event's
 * status, on every worker's tree size and on the scores of random queries; worker removal agrees too.
 * Hash domains are tiny so chains share prefixes, re-store, dangle, repeat and collide. Malformed events
 * (bad ranks, ids, sizes) are refused without throwing anything but a KvrError and change nothing.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { KvrError, type RouterEvent } from '@kvrouter/protocols';
import { fuzzParams, fuzzTimeout } from '@kvrouter/testkit';
import { RadixIndexer } from './indexer.js';
import { ReferenceIndex, cleared, removed, stored } from './testing/index.js';

const T = fuzzTimeout(60_000);
const WORKERS = [1n, 7587872800778374919n, 42n];

const worker = fc.constantFrom(...WORKERS);
const dp = fc.nat({ max: 1 });
const ext = fc.bigInt({ min: 1n, max: 24n });
const local = fc.bigInt({ min: 1n, max: 6n });

type Step =
  | { kind: 'event'; ev: RouterEvent }
  | { kind: 'removeWorker'; worker: bigint }
  | { kind: 'removeWorkerDpRank'; worker: bigint; dp: number }
  | { kind: 'bad'; ev: RouterEvent };

const storedEv = fc
  .tuple(
    worker,
    fc.array(fc.record({ ext, local }), { minLength: 1, maxLength: 5 }),
    fc.oneof(fc.constant(null), ext),
    dp,
  )
  .map(([w, blocks, parent, r]) => stored(w, blocks, parent, r));
const removedEv = fc
  .tuple(worker, fc.array(ext, { minLength: 1, maxLength: 5 }), dp)
  .map(([w, xs, r]) => removed(w, xs, r));
const clearedEv = worker.map((w) => cleared(w));

/** Events no engine should send: the index must refuse them (status or KvrError), changing nothing. */
const badEv = fc.oneof(
  storedEv.map((e) => ({ ...e, event: { ...e.event, dp_rank: -1 } })),
  storedEv.map((e) => ({ ...e, event: { ...e.event, dp_rank: 2 ** 32 } })),
  storedEv.map((e) => ({ ...e, worker_id: -5n })),
  storedEv.map((e) => ({ ...e, worker_id: 1n << 64n })),
  removedEv.map((e) => ({ ...e, event: { ...e.event, data: { removed: { block_hashes: [-1n] } } } })),
  storedEv.map((e) => {
    const s = (e.event.data as unknown as { stored: { blocks: Array<Record<string, unknown>> } }).stored;
    return {
      ...e,
      event: {
        ...e.event,
        data: { stored: { ...s, blocks: s.blocks.map((b) => ({ ...b, tokens_hash: 1n << 65n })) } },
      },
    };
  }),
) as fc.Arbitrary<RouterEvent>;

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 6, arbitrary: storedEv.map((ev) => ({ kind: 'event' as const, ev })) },
  { weight: 4, arbitrary: removedEv.map((ev) => ({ kind: 'event' as const, ev })) },
  { weight: 1, arbitrary: clearedEv.map((ev) => ({ kind: 'event' as const, ev })) },
  { weight: 1, arbitrary: worker.map((w) => ({ kind: 'removeWorker' as const, worker: w })) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(worker, dp)
      .map(([w, r]) => ({ kind: 'removeWorkerDpRank' as const, worker: w, dp: r })),
  },
  { weight: 1, arbitrary: badEv.map((ev) => ({ kind: 'bad' as const, ev })) },
);
const query = fc.array(local, { minLength: 1, maxLength: 6 });

const nonZero = (m: Map<string, number>): Map<string, number> => new Map([...m].filter(([, v]) => v > 0));

function sameState(ix: RadixIndexer, ref: ReferenceIndex, queries: bigint[][], where: string): void {
  expect(nonZero(ix.treeSizes()), `tree sizes ${where}`).toEqual(nonZero(ref.treeSizes()));
  for (const q of queries)
    expect(ix.findMatches(q).scores, `scores of [${q.join(',')}] ${where}`).toEqual(ref.scores(q));
}

describe('RadixIndexer against the reference model under random event sequences', () => {
  it('never disagrees with the model and never throws anything but a KvrError', { timeout: T }, () => {
    fc.assert(
      fc.property(
        fc.array(step, { maxLength: 40 }),
        fc.array(query, { minLength: 1, maxLength: 4 }),
        (steps, queries) => {
          const ix = new RadixIndexer({ initialCapacity: 16, maxSlots: 32 });
          const ref = new ReferenceIndex();
          steps.forEach((s, i) => {
            const where = `after step ${i} (${s.kind})`;
            if (s.kind === 'event')
              expect(ix.applyEventStatus(s.ev), `status ${where}`).toBe(ref.apply(s.ev));
            else if (s.kind === 'removeWorker') {
              ix.removeWorker(s.worker);
              ref.removeWorker(s.worker);
            } else if (s.kind === 'removeWorkerDpRank') {
              ix.removeWorkerDpRank(s.worker, s.dp);
              ref.removeWorkerDpRank(s.worker, s.dp);
            } else {
              let status: string;
              try {
                status = ix.applyEventStatus(s.ev);
              } catch (e) {
                expect(e, `thrown ${where}`).toBeInstanceOf(KvrError);
                status = 'threw';
              }
              expect(status, `status of a malformed event ${where}`).not.toBe('ok');
            }
            sameState(ix, ref, queries, where);
          });
        },
      ),
      fuzzParams(200, 20_000),
    );
  });
});
