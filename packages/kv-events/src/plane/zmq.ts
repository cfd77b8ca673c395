/**
 * ZMQ direct event plane (§5.2): each publishing process binds one PUB socket and advertises its
 * endpoint under `v1/event_channels/{ns}/{component}/{topic}/{id:hex}` for every topic it publishes;
 * subscribers watch that prefix and connect one SUB socket to every advertised publisher. Frames:
 * `[subject, publisher_id (8 B BE), sequence (8 B BE), 0x01 ‖ u32 BE length ‖ envelope]`.
 * The topic frame carries the full subject, so SUB prefix filtering is exact up to a suffix check.
 * Publishing is zeromq.js's `Publisher`; the SUB side is `ZmtpSubscriber` (zmtp-sub.ts: ZMTP read in
 * JavaScript, a fraction of zeromq.js's per-message cost on the event loop and no I/O thread).
 *
 * Broker mode (`broker` option, see zmq-broker.ts): nothing is bound or advertised; the PUB socket
 * connects to every broker's XSUB side and each SUB socket to every broker's XPUB side, either a fixed
 * list (`DYN_ZMQ_BROKER_URL`) or the brokers registered in the topic's namespace
 * (`DYN_ZMQ_BROKER_ENABLED`). With several brokers a message arrives once per broker; subscribers
 * drop repeats by (publisher_id, sequence).
 */
import { networkInterfaces } from 'node:os';
import { Publisher } from 'zeromq';
import { decodeZmqEventFrames, type EventEnvelope, errorMessage, KvrError } from '@kvrouter/protocols';

import { type ChannelDiscovery, channelKey, encodeChannel, parseChannel } from './channels.js';
import { eventChannelsPrefix } from '@kvrouter/protocols';
import { EnvelopeBuilder } from './envelope-seq.js';
import { EnvelopeQueue } from './subscription.js';
import { ZmtpSubscriber } from './zmtp-sub.js';
import { encodeZmqEventFrames } from '@kvrouter/protocols';
import { brokerChannelsPrefix, parseBrokerChannel, type ZmqBrokerSetting } from './zmq-broker.js';
import type { EventPlane, EventSubscription, EventTopic, PlaneOptions, SubscribeOptions } from './types.js';

export interface ZmqPlaneOptions extends PlaneOptions {
  discovery: ChannelDiscovery;
  /** Interface the PUB socket binds (default `0.0.0.0`, port chosen by the OS). */
  bindHost?: string;
  /** Host written into the advertised endpoint; default the first non-internal IPv4, else 127.0.0.1. */
  advertiseHost?: string;
  /**
   * Pause between bind + advertise and the first send, so subscribers watching discovery can
   * connect (PUB/SUB slow joiner). Default 200 ms.
   */
  joinDelayMs?: number;
  /** Messages queued per peer before PUB drops (default 100 000). */
  highWaterMark?: number;
  /** Relay through XSUB/XPUB brokers instead of binding and advertising (null = direct mode). */
  broker?: ZmqBrokerSetting | null;
}

/** Repeats remembered per subscription in broker mode (messages arrive once per broker). */
const DEDUP_WINDOW = 65_536;

type Watch = AsyncIterable<{ type: string; key?: string; value?: string }> & { close(): void };

type Frames = [Uint8Array, Uint8Array, Uint8Array, Uint8Array];

export class ZmqEventPlane implements EventPlane {
  readonly kind = 'zmq' as const;
  private readonly env: EnvelopeBuilder;
  private pub: Publisher | null = null;
  private bound: Promise<string> | null = null;
  private endpoint: string | null = null;
  private readonly advertised = new Map<string, Promise<void>>();
  private readonly queue: Frames[] = [];
  private draining: Promise<void> | null = null;
  private readonly subs = new Set<EnvelopeQueue>();
  private closed = false;
  /** Broker mode: readiness of the PUB socket per namespace (connected to its brokers + join delay). */
  private readonly brokerReady = new Map<string, Promise<void>>();
  private readonly brokerWatches: Watch[] = [];

  constructor(private readonly opts: ZmqPlaneOptions) {
    this.env = new EnvelopeBuilder(opts);
  }

  get publisherId(): bigint {
    return this.env.publisherId;
  }

  /** `tcp://host:port` this plane advertises, once bound. */
  get advertisedEndpoint(): string | null {
    return this.endpoint;
  }

  publish(topic: EventTopic, payload: Uint8Array): void {
    if (this.closed) return;
    void this.announce(topic).catch(() => undefined);
    this.queue.push(encodeZmqEventFrames(this.env.next(topic.subject, payload), topic.subject));
    this.draining ??= this.drain();
  }

  /**
   * Binds and advertises the topic's channel (direct mode) or connects to the brokers, without
   * sending anything; `publish` does it on first use. A worker calls it at startup so that routers,
   * which find publishers through discovery (a file backend polls), are connected before the first
   * event instead of missing it and waiting for the next one to notice the gap.
   */
  announce(topic: EventTopic): Promise<void> {
    if (this.closed) return Promise.resolve();
    const broker = this.opts.broker ?? null;
    if (broker !== null) {
      const ns = broker === 'discovery' ? topic.namespace : '';
      let p = this.brokerReady.get(ns);
      if (!p) this.brokerReady.set(ns, (p = this.connectPub(ns)));
      return p;
    }
    const key = channelKey(topic, this.publisherId);
    let p = this.advertised.get(key);
    if (!p) this.advertised.set(key, (p = this.advertise(key)));
    return p;
  }

  private pubSocket(): Publisher {
    this.pub ??= new Publisher({ sendHighWaterMark: this.opts.highWaterMark ?? 100_000, linger: 0 });
    return this.pub;
  }

  /**
   * Broker mode: connects the PUB socket to the brokers (all of a namespace's, followed for the
   * plane's lifetime, in discovery mode) and waits the join delay; sends queue until then.
   */
  private connectPub(ns: string): Promise<void> {
    const pub = this.pubSocket();
    const broker = this.opts.broker!;
    if (broker !== 'discovery') {
      for (const ep of broker.xsub) pub.connect(ep);
      return sleep(this.opts.joinDelayMs ?? 200);
    }
    return new Promise<void>((resolve) => {
      let first = true;
      this.followBrokers(
        ns,
        'xsub',
        (ep) => pub.connect(ep),
        (ep) => pub.disconnect(ep),
        () => {
          if (!first) return;
          first = false;
          void sleep(this.opts.joinDelayMs ?? 200).then(resolve);
        },
      );
    });
  }

  /**
   * Watches the brokers registered in `ns` and keeps a socket connected to the `side` endpoint of
   * each. `onConnected` runs after every connection made.
   */
  private followBrokers(
    ns: string,
    side: 'xsub' | 'xpub',
    connect: (ep: string) => void,
    disconnect: (ep: string) => void,
    onConnected: () => void,
    until: () => boolean = () => this.closed,
  ): Watch {
    const watch = this.opts.discovery.watch(brokerChannelsPrefix(ns)) as Watch;
    this.brokerWatches.push(watch);
    const byKey = new Map<string, readonly string[]>();
    const refs = new Map<string, number>();
    const drop = (key: string) => {
      for (const ep of byKey.get(key) ?? []) {
        const n = (refs.get(ep) ?? 1) - 1;
        if (n > 0) refs.set(ep, n);
        else {
          refs.delete(ep);
          try {
            disconnect(ep);
          } catch {
            // Already gone with the socket.
          }
        }
      }
      byKey.delete(key);
    };
    void (async () => {
      try {
        for await (const ev of watch) {
          if (until()) break;
          if (ev.type === 'put' && ev.key !== undefined && ev.value !== undefined) {
            const b = parseBrokerChannel(ev.value);
            if (!b) continue;
            drop(ev.key);
            const eps = side === 'xsub' ? b.xsub : b.xpub;
            byKey.set(ev.key, eps);
            for (const ep of eps) {
              const n = refs.get(ep) ?? 0;
              refs.set(ep, n + 1);
              if (n === 0) connect(ep);
            }
            onConnected();
          } else if (ev.type === 'delete' && ev.key !== undefined) drop(ev.key);
        }
      } catch (e) {
        if (!until())
          this.opts.onError?.(
            new KvrError(
              'watch_failed',
              `zmq: broker discovery watch ended: ${errorMessage(e)}`,
              undefined,
              undefined,
              { cause: e },
            ),
          );
      }
    })();
    return watch;
  }

  private bind(): Promise<string> {
    this.bound ??= (async () => {
      const pub = this.pubSocket();
      await pub.bind(`tcp://${this.opts.bindHost ?? '0.0.0.0'}:0`);
      const port = /:([0-9]+)$/.exec(pub.lastEndpoint ?? '')?.[1];
      if (!port)
        throw new KvrError(
          'listen_failed',
          `zmq: cannot read the bound port from ${pub.lastEndpoint ?? 'nothing'}`,
        );
      this.endpoint = `tcp://${this.opts.advertiseHost ?? defaultAdvertiseHost()}:${port}`;
      return this.endpoint;
    })();
    return this.bound;
  }

  private async advertise(key: string): Promise<void> {
    const ep = await this.bind();
    await this.opts.discovery.put(key, encodeChannel({ transport: 'zmq', endpoint: ep }));
    await sleep(this.opts.joinDelayMs ?? 200);
  }

  private async drain(): Promise<void> {
    try {
      // Every advertisement (and its join delay) precedes the sends queued after it.
      while (this.queue.length > 0 && !this.closed) {
        await Promise.all([...this.advertised.values(), ...this.brokerReady.values()]);
        const batch = this.queue.splice(0);
        for (const frames of batch) {
          if (this.closed) return;
          await this.pub!.send(frames);
        }
      }
    } catch (e) {
      this.queue.length = 0;
      this.opts.onError?.(e);
      // A failed advertisement is retried on the next publish.
      for (const [k, p] of this.advertised) p.catch(() => this.advertised.delete(k));
      for (const [k, p] of this.brokerReady) p.catch(() => this.brokerReady.delete(k));
    } finally {
      this.draining = null;
      if (this.queue.length > 0 && !this.closed) this.draining = this.drain();
    }
  }

  async flush(): Promise<void> {
    while (this.draining) await this.draining;
  }

  subscribe(topic: EventTopic, opts: SubscribeOptions = {}): EventSubscription {
    const broker = this.opts.broker ?? null;
    // A single static broker delivers each message once; otherwise repeats are expected.
    const dedup = broker !== null && (broker === 'discovery' || broker.xpub.length > 1);
    const sub = new ZmtpSubscriber({
      onMessage: this.receiver(topic.subject, () => q, dedup),
      onError: (e) =>
        this.opts.onError?.(new KvrError('kv_events_failed', e.message, undefined, undefined, { cause: e })),
    });
    let watch: Watch | null = null;
    const q: EnvelopeQueue = new EnvelopeQueue(opts, () => {
      this.subs.delete(q);
      watch?.close();
      sub.close();
    });
    if (this.closed) {
      q.close();
      return q;
    }
    this.subs.add(q);
    sub.subscribe(topic.subject);
    if (broker === null) {
      watch = this.opts.discovery.watch(
        eventChannelsPrefix(topic.namespace, topic.component, topic.topic),
      ) as Watch;
      void this.follow(watch, sub, q);
    } else if (broker === 'discovery') {
      watch = this.followBrokers(
        topic.namespace,
        'xpub',
        (ep) => sub.connect(ep),
        (ep) => sub.disconnect(ep),
        () => undefined,
        () => q.closed,
      );
    } else for (const ep of broker.xpub) sub.connect(ep);
    return q;
  }

  /** Connects to every advertised publisher of the topic and disconnects from withdrawn ones. */
  private async follow(
    watch: AsyncIterable<{ type: string; key?: string; value?: string }>,
    sub: Pick<ZmtpSubscriber, 'connect' | 'disconnect'>,
    q: EnvelopeQueue,
  ): Promise<void> {
    const byKey = new Map<string, string>();
    const refs = new Map<string, number>();
    try {
      for await (const ev of watch) {
        if (q.closed) break;
        if (ev.type === 'put' && ev.key !== undefined && ev.value !== undefined) {
          const ch = parseChannel(ev.value);
          if (!ch || ch.transport !== 'zmq' || byKey.get(ev.key) === ch.endpoint) continue;
          this.drop(ev.key, byKey, refs, sub);
          byKey.set(ev.key, ch.endpoint);
          const n = refs.get(ch.endpoint) ?? 0;
          refs.set(ch.endpoint, n + 1);
          if (n === 0) sub.connect(ch.endpoint);
        } else if (ev.type === 'delete' && ev.key !== undefined) this.drop(ev.key, byKey, refs, sub);
      }
    } catch (e) {
      if (!q.closed)
        this.opts.onError?.(
          new KvrError(
            'watch_failed',
            `zmq: discovery watch ended: ${errorMessage(e)}`,
            undefined,
            undefined,
            { cause: e },
          ),
        );
    }
  }

  private drop(
    key: string,
    byKey: Map<string, string>,
    refs: Map<string, number>,
    sub: Pick<ZmtpSubscriber, 'disconnect'>,
  ): void {
    const ep = byKey.get(key);
    if (ep === undefined) return;
    byKey.delete(key);
    const n = (refs.get(ep) ?? 1) - 1;
    if (n > 0) refs.set(ep, n);
    else {
      refs.delete(ep);
      try {
        sub.disconnect(ep);
      } catch {
        // Already gone with the socket.
      }
    }
  }

  /**
   * What a subscription does with each message: decode, keep only its own subject (SUB filtering
   * is by prefix: `…kv-events` must not receive `…kv-events-x`), drop repeats (brokers), queue.
   */
  private receiver(subject: string, queue: () => EnvelopeQueue, dedup: boolean): (frames: Buffer[]) => void {
    const seen = new Set<string>();
    return (frames) => {
      const q = queue();
      if (q.closed) return;
      let env: EventEnvelope;
      try {
        const d = decodeZmqEventFrames(frames);
        if (d.subject !== subject) return;
        env = d.envelope;
      } catch (e) {
        q.fail(e);
        return;
      }
      if (dedup) {
        const id = `${env.publisher_id}:${env.sequence}`;
        if (seen.has(id)) return;
        seen.add(id);
        // Sets iterate in insertion order: the oldest entry goes first.
        if (seen.size > DEDUP_WINDOW) seen.delete(seen.values().next().value!);
      }
      q.push(env);
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await this.flush();
    this.closed = true;
    for (const q of [...this.subs]) q.close();
    for (const w of this.brokerWatches) w.close();
    const keys = [...this.advertised.keys()];
    await Promise.all(keys.map((k) => this.opts.discovery.delete(k).catch(() => undefined)));
    this.pub?.close();
  }
}

function defaultAdvertiseHost(): string {
  for (const list of Object.values(networkInterfaces()))
    for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  return '127.0.0.1';
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
