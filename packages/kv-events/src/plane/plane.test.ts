/**
 * One conformance suite for every event plane (docs/CONVENTIONS.md conventions): in-process, NATS core
 * against a real nats-server, and ZMQ direct with publishers found through (mem) discovery.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Publisher } from 'zeromq';
import { beU64, type EventEnvelope } from '@kvrouter/protocols';
import { MemDiscoveryHub, connectNats, type NatsConnection } from '@kvrouter/runtime';
import { startNats, type ServiceHandle } from '@kvrouter/testkit';
import { InprocEventBus } from './inproc.js';
import { NatsEventPlane } from './nats.js';
import { ZmqEventPlane } from './zmq.js';
import { ZmqBroker, parseBrokerUrl } from './zmq-broker.js';
import { channelKey, encodeChannel } from './channels.js';
import { activeSequencesTopic, kvEventsTopic, type EventPlane, type EventTopic } from './types.js';
import { waitFor } from '../test-helpers.js';

interface Fixture {
  /** Publisher side (id 11) and subscriber side (id 22). */
  pub: EventPlane;
  sub: EventPlane;
  /** Puts bytes on the wire of `topic` that are not a valid message of this plane. */
  injectGarbage(topic: EventTopic): Promise<void>;
  close(): Promise<void>;
}

const T = kvEventsTopic('ns', 'backend');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function collect(
  it: AsyncIterator<EventEnvelope>,
  n: number,
  timeoutMs = 5000,
): Promise<EventEnvelope[]> {
  const out: EventEnvelope[] = [];
  const deadline = setTimeout(() => void it.return?.(), timeoutMs);
  while (out.length < n) {
    const r = await it.next();
    if (r.done) break;
    out.push(r.value);
  }
  clearTimeout(deadline);
  return out;
}

function conformance(name: string, make: () => Promise<Fixture>): void {
  describe(`event plane conformance: ${name}`, () => {
    let f: Fixture;
    beforeAll(async () => {
      f = await make();
    });
    afterAll(async () => {
      await f.pub.close();
      await f.sub.close();
      await f.close();
    });

    it('delivers envelopes in order with publisher id, per-subject sequence, subject and payload', async () => {
      const s = f.sub.subscribe(T);
      await sleep(50);
      for (let i = 0; i < 100; i++) f.pub.publish(T, new Uint8Array([i, i + 1]));
      await f.pub.flush();
      const got = await collect(s, 100);
      s.close();
      expect(got.length).toBe(100);
      expect(got.map((e) => e.sequence)).toEqual(Array.from({ length: 100 }, (_, i) => BigInt(i + 1)));
      expect(got.every((e) => e.publisher_id === 11n && e.topic === T.subject)).toBe(true);
      expect(got.map((e) => [...e.payload])).toEqual(Array.from({ length: 100 }, (_, i) => [i, i + 1]));
    });

    it('delivers only the subscribed subject (no prefix matches)', async () => {
      const s = f.sub.subscribe(T);
      await sleep(50);
      const longer: EventTopic = { ...T, subject: `${T.subject}-x` };
      f.pub.publish(longer, new Uint8Array([1]));
      f.pub.publish(activeSequencesTopic('ns', 'backend'), new Uint8Array([2]));
      f.pub.publish(kvEventsTopic('ns', 'other'), new Uint8Array([3]));
      f.pub.publish(T, new Uint8Array([4]));
      await f.pub.flush();
      const got = await collect(s, 1);
      expect(got.map((e) => [...e.payload])).toEqual([[4]]);
      // nothing else is queued behind it
      const more = await Promise.race([s.next(), sleep(150).then(() => 'none')]);
      expect(more).toBe('none');
      s.close();
    });

    it('counts and drops malformed messages and keeps delivering', async () => {
      const failures: string[] = [];
      const s = f.sub.subscribe(T, { onDecodeFailure: (e) => failures.push(e.code) });
      await sleep(50);
      await f.injectGarbage(T);
      f.pub.publish(T, new Uint8Array([9]));
      await f.pub.flush();
      const got = await collect(s, 1);
      expect(got.map((e) => [...e.payload])).toEqual([[9]]);
      expect(await waitFor(() => s.decodeFailures >= 1)).toBe(true);
      expect(failures.every((c) => c === 'decode_error')).toBe(true);
      s.close();
    });

    it('ends the iterator on close', async () => {
      const s = f.sub.subscribe(T);
      const next = s.next();
      s.close();
      expect(await next).toEqual({ value: undefined, done: true });
    });
  });
}

conformance('inproc', () => {
  const bus = new InprocEventBus();
  return Promise.resolve({
    pub: bus.plane({ publisherId: 11n }),
    sub: bus.plane({ publisherId: 22n }),
    injectGarbage: (topic) => {
      bus.deliver(topic.subject, new Uint8Array([0x92, 0x01]));
      return Promise.resolve();
    },
    close: () => Promise.resolve(),
  });
});

conformance('nats', async () => {
  const nats: ServiceHandle = await startNats({ jetstream: false });
  const a: NatsConnection = await connectNats(nats.url);
  const b: NatsConnection = await connectNats(nats.url);
  return {
    pub: new NatsEventPlane({ publisherId: 11n, nc: a }),
    sub: new NatsEventPlane({ publisherId: 22n, nc: b }),
    injectGarbage: async (topic) => {
      a.publish(topic.subject, new Uint8Array([0xc1]));
      await a.flush();
    },
    close: async () => {
      await a.close();
      await b.close();
      await nats.stop();
    },
  };
});

conformance('zmq', async () => {
  const hub = new MemDiscoveryHub();
  const zopts = { bindHost: '127.0.0.1', advertiseHost: '127.0.0.1', joinDelayMs: 100 };
  const da = hub.connect();
  const db = hub.connect();
  const raw = new Publisher({ linger: 0 });
  await raw.bind('tcp://127.0.0.1:0');
  return {
    pub: new ZmqEventPlane({ publisherId: 11n, discovery: da, ...zopts }),
    sub: new ZmqEventPlane({ publisherId: 22n, discovery: db, ...zopts }),
    injectGarbage: async (topic) => {
      // A rogue publisher advertised like any other, sending a bad version byte and a 3-frame message.
      await da.put(channelKey(topic, 99n), encodeChannel({ transport: 'zmq', endpoint: raw.lastEndpoint! }));
      await sleep(200);
      const subj = Buffer.from(topic.subject);
      await raw.send([subj, Buffer.from(beU64(99n)), Buffer.from(beU64(1n)), Buffer.from([2, 0, 0, 0, 0])]);
      await raw.send([subj, Buffer.from(beU64(99n)), Buffer.from(beU64(2n))]);
      await sleep(50);
    },
    close: async () => {
      raw.close();
      await da.close();
      await db.close();
    },
  };
});

// Broker mode (§5.2): the same suite through XSUB/XPUB proxies, addressed by DYN_ZMQ_BROKER_URL ...
conformance('zmq broker (DYN_ZMQ_BROKER_URL)', async () => {
  const hub = new MemDiscoveryHub();
  const broker = await ZmqBroker.start();
  const endpoints = parseBrokerUrl(broker.url);
  const zopts = { joinDelayMs: 100, broker: endpoints };
  const raw = new Publisher({ linger: 0 });
  raw.connect(endpoints.xsub[0]);
  return {
    pub: new ZmqEventPlane({ publisherId: 11n, discovery: hub.connect(), ...zopts }),
    sub: new ZmqEventPlane({ publisherId: 22n, discovery: hub.connect(), ...zopts }),
    injectGarbage: async (topic) => {
      // Any publisher connected to the broker reaches every subscriber: a bad version byte, then 3 frames.
      await sleep(100);
      const subj = Buffer.from(topic.subject);
      await raw.send([subj, Buffer.from(beU64(99n)), Buffer.from(beU64(1n)), Buffer.from([2, 0, 0, 0, 0])]);
      await raw.send([subj, Buffer.from(beU64(99n)), Buffer.from(beU64(2n))]);
      await sleep(50);
    },
    close: async () => {
      raw.close();
      await broker.close();
    },
  };
});

// ... and by DYN_ZMQ_BROKER_ENABLED with two brokers found in discovery (every message arrives twice;
// the suite's exact-sequence checks prove the repeats are dropped).
conformance('zmq broker (discovery, 2 brokers)', async () => {
  const hub = new MemDiscoveryHub();
  const brokers = await Promise.all(
    [hub.connect(), hub.connect()].map((discovery) =>
      ZmqBroker.start({ discovery, namespaces: [T.namespace] }),
    ),
  );
  const zopts = { joinDelayMs: 100, broker: 'discovery' as const };
  const raw = new Publisher({ linger: 0 });
  raw.connect(brokers[0].endpoints.xsub[0]);
  return {
    pub: new ZmqEventPlane({ publisherId: 11n, discovery: hub.connect(), ...zopts }),
    sub: new ZmqEventPlane({ publisherId: 22n, discovery: hub.connect(), ...zopts }),
    injectGarbage: async (topic) => {
      await sleep(100);
      const subj = Buffer.from(topic.subject);
      await raw.send([subj, Buffer.from(beU64(99n)), Buffer.from(beU64(1n)), Buffer.from([2, 0, 0, 0, 0])]);
      await raw.send([subj, Buffer.from(beU64(99n)), Buffer.from(beU64(2n))]);
      await sleep(50);
    },
    close: async () => {
      raw.close();
      await Promise.all(brokers.map((b) => b.close()));
    },
  };
});
