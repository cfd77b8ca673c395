/**
 * The ZMQ direct plane end to end (the `--event-plane auto` choice for mem/file discovery): worker
 * publishers advertise in discovery, a router that joins late connects to them, misses what was
 * sent before it connected, and restores each worker from its local indexer on the first live event.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { RadixIndexer } from '@kvrouter/radix-indexer';
import { MemDiscoveryHub } from '@kvrouter/runtime';
import { ZmqEventPlane } from './plane/zmq.js';
import { kvEventsTopic } from './plane/types.js';
import { KvEventPublisher, planeSink } from './publisher/publisher.js';
import { InprocQueryHub } from './query.js';
import { KvEventSubscriber } from './subscriber/subscriber.js';
import { chain, dumpKey, removed, waitFor } from './test-helpers.js';

const TOPIC = kvEventsTopic('zmq', 'backend');
const zopts = { bindHost: '127.0.0.1', advertiseHost: '127.0.0.1', joinDelayMs: 100 };
const closers: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  for (const c of closers.reverse()) await c();
});

describe('ZMQ event plane end to end', () => {
  it('a late router restores from the local indexers and then follows live events', async () => {
    const hub = new MemDiscoveryHub();
    const queries = new InprocQueryHub();
    const workers: KvEventPublisher[] = [];
    for (let w = 0; w < 2; w++) {
      const d = hub.connect();
      const plane = new ZmqEventPlane({ publisherId: d.leaseId, discovery: d, ...zopts });
      const pub = new KvEventPublisher({ workerId: d.leaseId, sink: planeSink(plane, TOPIC) });
      queries.register(pub);
      closers.push(
        () => plane.close(),
        () => d.close(),
      );
      workers.push(pub);
    }
    // Published before any router exists: nobody receives these.
    for (const [i, p] of workers.entries()) {
      p.engineEvent({ data: chain(null, [1n, 2n, BigInt(10 + i)]) });
      p.engineEvent({ data: removed([1000n + BigInt(10 + i)]) });
    }
    await Promise.all(workers.map((p) => p.drain()));

    const rd = hub.connect();
    const routerPlane = new ZmqEventPlane({ publisherId: rd.leaseId, discovery: rd, ...zopts });
    const index = new RadixIndexer();
    const sub = new KvEventSubscriber({ index, query: queries, startupDelayMs: 0 });
    sub.start(() => routerPlane.subscribe(TOPIC));
    closers.push(
      () => sub.close(),
      () => routerPlane.close(),
      () => rd.close(),
    );
    await new Promise((r) => setTimeout(r, 300)); // let the SUB socket connect to both publishers

    for (const p of workers) p.engineEvent({ data: chain(1002n, [3n]) });
    const converged = async () => {
      const mine = dumpKey(await index.dump());
      const theirs = dumpKey(workers.flatMap((p) => p.localIndexer(0)!.dump()));
      return mine.join() === theirs.join();
    };
    expect(await waitFor(converged, 5000)).toBe(true);
    // Each worker: blocks 1, 2 and 3 under 2 (its own third block was removed).
    expect(index.findMatches([1n, 2n, 3n]).scores.size).toBe(2);
    expect(sub.stats.recoveredByDump).toBe(2);
    // Live from here on.
    for (const p of workers) p.engineEvent({ data: chain(1003n, [4n]) });
    expect(
      await waitFor(
        async () =>
          (await converged()) &&
          index.findMatches([1n, 2n, 3n, 4n]).scores.get(`${workers[0].workerId}:0`) === 4,
        5000,
      ),
    ).toBe(true);
    expect(sub.cursor(workers[0].workerId)).toEqual({ state: 'live', last: 4n, phase: 'none' });
  });
});
