/**
 * NATS core event plane (§5.2): the envelope bytes are published to the topic's subject. The
 * connection comes from `@kvrouter/runtime`'s `connectNats` (one owner of reconnect policy); the
 * client re-subscribes by itself after a server restart, and whatever was lost meanwhile shows up
 * as an event-id gap that the subscriber recovers.
 */
import { errorMessage, KvrError } from '@kvrouter/protocols';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';

import { type ChannelDiscovery, channelKey, encodeChannel } from './channels.js';
import { EnvelopeBuilder } from './envelope-seq.js';
import { EnvelopeQueue } from './subscription.js';
import type { EventPlane, EventSubscription, EventTopic, PlaneOptions, SubscribeOptions } from './types.js';

export interface NatsPlaneOptions extends PlaneOptions {
  nc: NatsConnection;
  /** Close `nc` with the plane (default false: the connection is shared with the request plane). */
  ownsConnection?: boolean;
  /** Registers each published topic under `v1/event_channels/...` (§5.2). */
  discovery?: ChannelDiscovery | null;
}

export class NatsEventPlane implements EventPlane {
  readonly kind = 'nats' as const;
  private readonly env: EnvelopeBuilder;
  private readonly nc: NatsConnection;
  private readonly subs = new Set<{ q: EnvelopeQueue; sub: Subscription }>();
  /** subject -> its channel key, once advertised. */
  private readonly registered = new Map<string, string>();
  private readonly pendingRegs: Promise<void>[] = [];
  private closed = false;

  constructor(private readonly opts: NatsPlaneOptions) {
    this.env = new EnvelopeBuilder(opts);
    this.nc = opts.nc;
  }

  get publisherId(): bigint {
    return this.env.publisherId;
  }

  publish(topic: EventTopic, payload: Uint8Array): void {
    if (this.closed) return;
    if (this.opts.discovery && !this.registered.has(topic.subject)) this.register(topic);
    try {
      // While reconnecting the client buffers; after close it throws, which is reported, not fatal.
      this.nc.publish(topic.subject, this.env.encode(topic.subject, payload));
    } catch (e) {
      this.opts.onError?.(e);
    }
  }

  private register(topic: EventTopic): void {
    const key = channelKey(topic, this.publisherId);
    this.registered.set(topic.subject, key);
    const p = this.opts
      .discovery!.put(key, encodeChannel({ transport: 'nats', subject: topic.subject }))
      .catch((e: unknown) => {
        this.registered.delete(topic.subject);
        this.opts.onError?.(e);
      });
    this.pendingRegs.push(p);
  }

  async flush(): Promise<void> {
    await Promise.all(this.pendingRegs.splice(0));
    if (this.closed || this.nc.isClosed()) return;
    try {
      await this.nc.flush();
    } catch (e) {
      this.opts.onError?.(e);
    }
  }

  subscribe(topic: EventTopic, opts: SubscribeOptions = {}): EventSubscription {
    let entry: { q: EnvelopeQueue; sub: Subscription } | null = null;
    const q = new EnvelopeQueue(opts, () => {
      if (!entry) return;
      this.subs.delete(entry);
      try {
        entry.sub.unsubscribe();
      } catch {
        // Already closed with the connection.
      }
    });
    if (this.closed) {
      q.close();
      return q;
    }
    const sub = this.nc.subscribe(topic.subject, {
      callback: (err, msg) => {
        if (err)
          q.fail(
            new KvrError(
              'kv_events_failed',
              `nats subscription ${topic.subject}: ${errorMessage(err)}`,
              undefined,
              undefined,
              { cause: err },
            ),
          );
        else q.pushBytes(msg.data);
      },
    });
    entry = { q, sub };
    this.subs.add(entry);
    return q;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    // A flush waits for a reconnect that may never come; closing must not.
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([this.flush(), new Promise<void>((r) => (timer = setTimeout(r, 2000)))]);
    clearTimeout(timer);
    this.closed = true;
    for (const e of [...this.subs]) e.q.close();
    const d = this.opts.discovery;
    if (d) await Promise.all([...this.registered.values()].map((k) => d.delete(k).catch(() => undefined)));
    if (this.opts.ownsConnection) await this.nc.close();
  }
}
