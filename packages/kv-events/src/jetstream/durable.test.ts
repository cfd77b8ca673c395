/**
 * JetStream durable mode against a real nats-server: a router that restarts from the object-store
 * snapshot (stream purged below the ack floor) ends with the same index as the router that read
 * every message; reset-states empties both stream and bucket; stale consumers are removed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Objm } from '@nats-io/obj';
import { RADIX_STATE_OBJECT } from '@kvrouter/protocols';
import { RadixIndexer } from '@kvrouter/radix-indexer';
import { SimEngine } from '@kvrouter/engine-sim';
import { connectNats, type NatsConnection } from '@kvrouter/runtime';
import { Rng, startNats, type ServiceHandle } from '@kvrouter/testkit';
import { DurableKvConsumer, JetStreamEventSink, durableNames } from './durable.js';
import { KvEventPublisher } from '../publisher/publisher.js';
import { dumpKey, waitFor } from '../test-helpers.js';

const NS = 'dur';
const COMP = 'backend';

describe('JetStream durable mode (nats-server -js)', () => {
  let nats: ServiceHandle;
  let nc: NatsConnection;
  const consumers: DurableKvConsumer[] = [];

  beforeAll(async () => {
    nats = await startNats({ jetstream: true });
    nc = await connectNats(nats.url);
  });
  afterAll(async () => {
    for (const c of consumers) await c.close();
    await nc?.close();
    await nats?.stop();
  });

  it('a router restarted from the snapshot has the same index as one that read every message', async () => {
    const names = durableNames(NS, COMP);
    expect(names).toEqual({
      stream: 'namespace-dur-component-backend-kv-events',
      subject: 'namespace-dur-component-backend-kv-events.kv-events',
      bucket: 'namespace-dur-component-backend-radix-bucket',
    });
    const sink = await JetStreamEventSink.create(nc, NS, COMP);
    const pub = new KvEventPublisher({ workerId: 0x51n, sink });
    const eng = new SimEngine({ numGpuBlocks: 64, blockSize: 16, maxNumSeqs: 4 });
    const rng = new Rng(7);
    let now = 0;
    let rid = 0;
    const run = (n: number) => {
      for (let i = 0; i < n; i++)
        eng.enqueue(
          {
            id: `r${rid++}`,
            tokenIds: Uint32Array.from({ length: rng.int(20, 120) }, () => rng.int(1, 500)),
            maxTokens: 4,
          },
          now,
        );
      while (eng.hasWork(0)) {
        const r = eng.step(now, 0);
        now += r.durationMs;
        for (const ev of r.kvEvents) pub.engineEvent({ data: ev.data }, ev.event_id);
      }
    };

    const indexA = new RadixIndexer();
    const snapshots: number[] = [];
    const a = await DurableKvConsumer.start({
      nc,
      namespace: NS,
      component: COMP,
      routerId: 0xaan,
      index: indexA,
      snapshotThreshold: 40,
      checkIntervalMs: 50,
      checkJitterMs: 10,
      onSnapshot: (s) => snapshots.push(s.purgedBelow),
    });
    consumers.push(a);

    run(30);
    await sink.flush();
    const jsm = await jetstreamManager(nc);
    const published = Number(pub.lastEventId(0));
    expect(published).toBeGreaterThan(40);
    expect(await waitFor(() => a.stats.applied === published)).toBe(true);
    // more than 40 messages -> a snapshot is taken and everything acked is purged
    expect(await waitFor(() => snapshots.length > 0, 5000)).toBe(true);
    // Malformed message on the stream: counted, acked, consumption goes on.
    await jetstream(nc).publish(names.subject, new TextEncoder().encode('{"worker_id": "x"}'));
    run(6);
    await sink.flush();
    const total = Number(pub.lastEventId(0));
    expect(await waitFor(() => a.stats.applied === total)).toBe(true);
    expect(a.stats.decodeFailures).toBe(1);
    // Acks reach the server asynchronously: a check may find a floor of 0 and purge nothing; a
    // later one (the stream still holds more than 40 messages) purges.
    expect(await waitFor(async () => (await jsm.streams.info(names.stream)).state.first_seq > 1, 5000)).toBe(
      true,
    );

    // A's index is the engine's cache.
    const dumpA = await indexA.dump();
    expect(
      new Set(
        dumpA.map(
          (e) =>
            (e.event.data as { stored: { blocks: { block_hash: bigint }[] } }).stored.blocks[0].block_hash,
        ),
      ),
    ).toEqual(eng.cachedBlocks(0));

    // Router B starts from the snapshot plus what is left of the stream.
    const indexB = new RadixIndexer();
    const b = await DurableKvConsumer.start({
      nc,
      namespace: NS,
      component: COMP,
      routerId: 0xbbn,
      index: indexB,
      snapshotThreshold: 1e9,
    });
    consumers.push(b);
    expect(b.stats.snapshotEvents).toBeGreaterThan(0);
    expect(
      await waitFor(async () => dumpKey(await indexB.dump()).join() === dumpKey(dumpA).join(), 5000),
    ).toBe(true);
    // B read fewer stream messages than A applied (the purged ones came from the snapshot).
    expect(b.stats.applied).toBeLessThan(total);
  });

  it('removes consumers of routers that left, and reset-states empties stream and bucket', async () => {
    const names = durableNames(NS, COMP);
    const jsm = await jetstreamManager(nc);
    const before = [];
    for await (const ci of jsm.consumers.list(names.stream)) before.push(ci.name);
    expect(before.sort()).toEqual(['aa', 'bb']);
    const indexC = new RadixIndexer();
    const c = await DurableKvConsumer.start({
      nc,
      namespace: NS,
      component: COMP,
      routerId: 0xccn,
      index: indexC,
      resetStates: true,
      liveRouters: () => [0xaan],
    });
    consumers.push(c);
    const after = [];
    for await (const ci of jsm.consumers.list(names.stream)) after.push(ci.name);
    expect(after.sort()).toEqual(['aa', 'cc']);
    expect(c.stats.consumersDeleted).toBe(1);
    expect((await jsm.streams.info(names.stream)).state.messages).toBe(0);
    const os = await new Objm(nc).open(names.bucket);
    expect(await os.getBlob(RADIX_STATE_OBJECT)).toBe(null);
    expect(await indexC.dump()).toEqual([]);
  });
});
