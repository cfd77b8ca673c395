import {
  RemoteIndexerQueryCodec,
  RemoteIndexerRecordRequestCodec,
  computeLocalBlockHashes,
  computeSequenceHashes,
  pairsToU64s,
  type RemoteIndexerQuery,
  type RemoteIndexerRecordRequest,
} from '@kvrouter/protocols';
import { RadixIndexer } from '@kvrouter/radix-indexer';
import { Rng } from '@kvrouter/testkit';
import { describe, expect, it } from 'vitest';
import { VirtualClock } from '@kvrouter/protocols';
import { KvRouter } from './router.js';
import {
  RemoteIndexer,
  overlapScoresFromWire,
  overlapScoresToWire,
  type RemoteIndexerClient,
} from './remote-indexer.js';
import { storeEvent, toks, w, flush } from './test-fixtures.js';

const BS = 16;

/** A serving side as §7.7 describes it: a real index answering `{Scores}` keyed by model name. */
function servingClient(
  index: RadixIndexer,
  model = 'm',
): RemoteIndexerClient & { queries: RemoteIndexerQuery[]; records: RemoteIndexerRecordRequest[] } {
  const queries: RemoteIndexerQuery[] = [];
  const records: RemoteIndexerRecordRequest[] = [];
  return {
    queries,
    records,
    query: (q) => {
      // Through the wire codec, as a request-plane payload would arrive.
      const got = RemoteIndexerQueryCodec.fromValue(RemoteIndexerQueryCodec.toValue(q));
      queries.push(got);
      if (got.model_name !== model) return Promise.resolve({ Error: `no index for model ${got.model_name}` });
      return Promise.resolve({ Scores: overlapScoresToWire(index.findMatches(got.block_hashes)) });
    },
    record: (r) => {
      records.push(RemoteIndexerRecordRequestCodec.fromValue(RemoteIndexerRecordRequestCodec.toValue(r)));
      return Promise.resolve('Recorded');
    },
  };
}

function router(remote: RemoteIndexer): KvRouter {
  const rng = new Rng(3);
  const r = new KvRouter({
    blockSize: BS,
    deps: { clock: new VirtualClock(0), random: () => rng.next(), indexer: remote },
  });
  r.addWorker({ workerId: 1 });
  r.addWorker({ workerId: 2 });
  return r;
}

describe('RemoteIndexer (§7.7 --use-remote-indexer)', () => {
  it('routes with the overlap the serving index reports', async () => {
    const index = new RadixIndexer();
    const prompt = toks(1, 64); // 64 / 16 = 4 blocks
    index.applyEvent(storeEvent(w(2), prompt, BS, 3)); // worker 2 holds blocks 0..2
    const client = servingClient(index);
    const remote = new RemoteIndexer({ modelName: 'm', client });
    const r = router(remote);
    const d = await r.route({ requestId: 'a', tokens: prompt });
    // Idle workers: prefill blocks left = 4 - 3 = 1 on worker 2 against 4 on worker 1, so worker 2.
    expect(d.workerId).toBe(2n);
    expect(d.overlapBlocks).toBe(3);
    expect(d.cachedTokens).toBe(48); // 3 blocks x 16 tokens
    // The query carried the prompt's 4 local hashes, in order.
    expect(client.queries).toHaveLength(1);
    expect(client.queries[0]!.model_name).toBe('m');
    expect(client.queries[0]!.block_hashes).toEqual(pairsToU64s(computeLocalBlockHashes(prompt, BS)));
    r.close();
  });

  it('a failing query routes on load alone, reports the failure, and never reuses an older answer', async () => {
    const index = new RadixIndexer();
    const prompt = toks(5, 64);
    index.applyEvent(storeEvent(w(1), prompt, BS, 4));
    let down = false;
    const good = servingClient(index);
    const failures: unknown[] = [];
    const remote = new RemoteIndexer({
      modelName: 'm',
      client: {
        query: (q) => (down ? Promise.reject(new Error('cannot_connect')) : good.query(q)),
        record: (x) => good.record(x),
      },
      onQueryFailure: (e) => failures.push(e),
    });
    const r = router(remote);
    const d1 = await r.route({ requestId: 'a', tokens: prompt, queryOnly: true });
    expect(d1.overlapBlocks).toBe(4);
    down = true;
    const d2 = await r.route({ requestId: 'b', tokens: prompt, queryOnly: true });
    expect(d2.overlapBlocks).toBe(0);
    expect(failures).toHaveLength(1);
    expect(remote.stats).toEqual({ queries: 2, failures: 1, writeFailures: 0 });
    r.close();
  });

  it('an {"Error"} reply (unknown model) counts as a failure', async () => {
    const failures: unknown[] = [];
    const remote = new RemoteIndexer({
      modelName: 'other',
      client: servingClient(new RadixIndexer()),
      onQueryFailure: (e) => failures.push(e),
    });
    const r = router(remote);
    const d = await r.route({ requestId: 'a', tokens: toks(2, 40), queryOnly: true });
    expect(d.overlapBlocks).toBe(0);
    expect(String(failures[0])).toContain('no index for model other');
    r.close();
  });

  it('prompts shorter than one block send no query', async () => {
    const client = servingClient(new RadixIndexer());
    const r = router(new RemoteIndexer({ modelName: 'm', client }));
    await r.route({ requestId: 'a', tokens: toks(2, 15), queryOnly: true });
    expect(client.queries).toHaveLength(0);
    r.close();
  });

  it('approximate mode sends the decision as a record; event mode sends none', async () => {
    const prompt = toks(9, 50); // floor(50 / 16) = 3 full blocks
    const local = computeLocalBlockHashes(prompt, BS);
    for (const approximate of [true, false]) {
      const client = servingClient(new RadixIndexer());
      const r = router(new RemoteIndexer({ modelName: 'm', client, approximate }));
      const d = await r.route({ requestId: 'a', tokens: prompt });
      await flush();
      if (!approximate) {
        expect(client.records).toHaveLength(0);
      } else {
        expect(client.records).toHaveLength(1);
        const rec = client.records[0]!;
        expect(rec.model_name).toBe('m');
        expect(rec.worker).toEqual(d.worker);
        expect(rec.local_hashes).toEqual(pairsToU64s(local));
        expect(rec.sequence_hashes).toEqual(pairsToU64s(computeSequenceHashes(local)));
      }
      r.close();
    }
  });

  it('failed record writes are reported (rejected and {"Error"} replies)', async () => {
    const fails: unknown[] = [];
    let n = 0;
    const remote = new RemoteIndexer({
      modelName: 'm',
      approximate: true,
      client: {
        query: () => Promise.resolve({ Scores: { scores: [], frequencies: [], tree_sizes: [] } }),
        record: () =>
          n++ === 0 ? Promise.reject(new Error('gone')) : Promise.resolve({ Error: 'not approximate' }),
      },
      onWriteFailure: (e) => fails.push(e),
    });
    const r = router(remote);
    await r.route({ requestId: 'a', tokens: toks(1, 32) });
    await r.route({ requestId: 'b', tokens: toks(2, 32) });
    await flush();
    expect(fails).toHaveLength(2);
    expect(remote.stats.writeFailures).toBe(2);
    r.close();
  });

  it('wire form: pairs become maps, zero scores are dropped, and back', () => {
    const wire = {
      scores: [
        [w(7, 1), 5],
        [w(8, 0), 0],
      ] as [ReturnType<typeof w>, number][],
      frequencies: [],
      tree_sizes: [[w(7, 1), 12]] as [ReturnType<typeof w>, number][],
    };
    const o = overlapScoresFromWire(wire);
    expect([...o.scores]).toEqual([['7:1', 5]]);
    expect([...o.treeSizes]).toEqual([['7:1', 12]]);
    expect(overlapScoresToWire(o)).toEqual({
      scores: [[w(7, 1), 5]],
      frequencies: [],
      tree_sizes: [[w(7, 1), 12]],
    });
  });

  it('rejects bad options naming the field', () => {
    expect(() => new RemoteIndexer({ modelName: '', client: servingClient(new RadixIndexer()) })).toThrow(
      /modelName/,
    );
    expect(
      () => new RemoteIndexer({ modelName: 'm', client: servingClient(new RadixIndexer()), cacheEntries: 0 }),
    ).toThrow(/cacheEntries/);
  });
});
