/**
 * Broker mode specifics (the shared conformance suite in plane.test.ts also runs over brokers):
 * URL parsing, the docs/configuration.md precedence, discovery records, brokers appearing late, and the full
 * subscriber path (gap recovery from the local indexer) relayed through a broker.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { MemDiscoveryHub } from '@kvrouter/runtime';
import { RadixIndexer } from '@kvrouter/radix-indexer';
import { KvrError, type EventEnvelope } from '@kvrouter/protocols';
import { createEventPlane } from './create.js';
import { kvEventsTopic } from './types.js';
import { ZmqEventPlane } from './zmq.js';
import {
  ZmqBroker,
  brokerChannelKey,
  brokerSetting,
  parseBrokerChannel,
  parseBrokerUrl,
} from './zmq-broker.js';
import { KvEventPublisher, planeSink } from '../publisher/publisher.js';
import { InprocQueryHub } from '../query.js';
import { KvEventSubscriber } from '../subscriber/subscriber.js';
import { chain, dumpKey, waitFor } from '../test-helpers.js';

const T = kvEventsTopic('brk', 'backend');
const closers: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

function fieldOf(f: () => unknown): unknown {
  try {
    f();
  } catch (e) {
    if (e instanceof KvrError) return e.detail?.field;
    throw e;
  }
  return undefined;
}

describe('DYN_ZMQ_BROKER_URL / DYN_ZMQ_BROKER_ENABLED', () => {
  it('parses the upstream format: ";" between brokers, "," between the sides', () => {
    expect(parseBrokerUrl('xsub=tcp://a:5555;tcp://b:5555 , xpub=tcp://a:5556;tcp://b:5556')).toEqual({
      xsub: ['tcp://a:5555', 'tcp://b:5555'],
      xpub: ['tcp://a:5556', 'tcp://b:5556'],
    });
    // Either order.
    expect(parseBrokerUrl('xpub=tcp://a:2,xsub=tcp://a:1')).toEqual({
      xsub: ['tcp://a:1'],
      xpub: ['tcp://a:2'],
    });
    for (const bad of [
      'tcp://a:5555',
      'xsub=tcp://a:1 , xpub=',
      'xsub=tcp://a:1 , sub=tcp://a:2',
      'xsub=a:1 , xpub=tcp://a:2',
    ])
      expect(fieldOf(() => parseBrokerUrl(bad))).toBe('DYN_ZMQ_BROKER_URL');
  });

  it('the URL wins; ENABLED alone means discovery; neither means direct mode', () => {
    expect(brokerSetting({ url: 'xsub=tcp://a:1 , xpub=tcp://a:2', enabled: true })).toEqual({
      xsub: ['tcp://a:1'],
      xpub: ['tcp://a:2'],
    });
    expect(brokerSetting({ url: null, enabled: true })).toBe('discovery');
    expect(brokerSetting({ url: '', enabled: false })).toBeNull();
  });
});

describe('ZmqBroker', () => {
  it('registers under v1/event_channels/{ns}/zmq_broker/broker/{id} and withdraws on close', async () => {
    const hub = new MemDiscoveryHub();
    const d = hub.connect();
    closers.push(() => d.close());
    const b = await ZmqBroker.start({ discovery: d, namespaces: ['ns1', 'ns2'] });
    const key = brokerChannelKey('ns1', d.leaseId);
    // Ids are unpadded hex, as every §6.1 key (Dynamo's `{:x}`): a lease id with a leading zero nibble has 15 digits.
    expect(key).toBe(`v1/event_channels/ns1/zmq_broker/broker/${d.leaseId.toString(16)}`);
    expect(parseBrokerChannel((await d.get(key))!)).toEqual(b.endpoints);
    expect(await d.get(brokerChannelKey('ns2', d.leaseId))).not.toBeNull();
    expect(b.url).toBe(`xsub=${b.endpoints.xsub[0]} , xpub=${b.endpoints.xpub[0]}`);
    await b.close();
    expect(await d.get(key)).toBeNull();
  });

  it('discovery mode follows a broker that registers after the planes started', async () => {
    const hub = new MemDiscoveryHub();
    const opts = { joinDelayMs: 50, broker: 'discovery' as const };
    const pub = createEventPlane({
      kind: 'zmq',
      discoveryBackend: 'mem',
      discovery: hub.connect(),
      publisherId: 1n,
      zmq: opts,
    });
    const sub = new ZmqEventPlane({ publisherId: 2n, discovery: hub.connect(), ...opts });
    closers.push(
      () => pub.close(),
      () => sub.close(),
    );
    const s = sub.subscribe(T);
    pub.publish(T, new Uint8Array([7])); // queued: no broker yet
    await new Promise((r) => setTimeout(r, 100));
    const b = await ZmqBroker.start({ discovery: hub.connect(), namespaces: ['brk'] });
    closers.push(() => b.close());
    const first = await s.next();
    expect(first.done).toBe(false);
    expect([...(first.value as EventEnvelope).payload]).toEqual([7]);
    s.close();
  });

  it('a router follows workers through a broker: dump restore, then live events', async () => {
    const hub = new MemDiscoveryHub();
    const broker = await ZmqBroker.start();
    closers.push(() => broker.close());
    const zopts = { joinDelayMs: 100, broker: parseBrokerUrl(broker.url) };
    const queries = new InprocQueryHub();
    const workers: KvEventPublisher[] = [];
    for (let w = 0; w < 2; w++) {
      const d = hub.connect();
      const plane = new ZmqEventPlane({ publisherId: d.leaseId, discovery: d, ...zopts });
      const p = new KvEventPublisher({ workerId: d.leaseId, sink: planeSink(plane, T) });
      queries.register(p);
      closers.push(
        () => d.close(),
        () => plane.close(),
      );
      workers.push(p);
      // Before any router subscribed: lost on the wire, restored from the local indexer.
      p.engineEvent({ data: chain(null, [1n, 2n, BigInt(10 + w)]) });
    }
    const rd = hub.connect();
    const routerPlane = new ZmqEventPlane({ publisherId: rd.leaseId, discovery: rd, ...zopts });
    const index = new RadixIndexer();
    const sub = new KvEventSubscriber({ index, query: queries, startupDelayMs: 0 });
    sub.start(() => routerPlane.subscribe(T));
    closers.push(
      () => rd.close(),
      () => routerPlane.close(),
      () => sub.close(),
    );
    await new Promise((r) => setTimeout(r, 200));
    for (const p of workers) p.engineEvent({ data: chain(1002n, [3n]) });
    const converged = async () =>
      dumpKey(await index.dump()).join() ===
      dumpKey(workers.flatMap((p) => p.localIndexer(0)!.dump())).join();
    expect(await waitFor(converged, 5000)).toBe(true);
    expect(index.findMatches([1n, 2n, 3n]).scores.size).toBe(2);
    for (const p of workers) p.engineEvent({ data: chain(1003n, [4n]) });
    expect(
      await waitFor(
        async () => (await converged()) && index.findMatches([1n, 2n, 3n, 4n]).scores.size === 2,
        5000,
      ),
    ).toBe(true);
    expect(sub.cursor(workers[0].workerId)).toEqual({ state: 'live', last: 3n, phase: 'none' });
  });
});
