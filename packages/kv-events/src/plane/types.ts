/**
 * The one event-plane interface (docs/protocol.md §5.1, §5.2) shared by the NATS core, ZMQ direct and
 * in-process transports: publish a msgpack payload on a topic (the plane wraps it in the envelope),
 * subscribe to a topic and iterate decoded envelopes.
 */
import {
  ACTIVE_SEQUENCES_TOPIC,
  KV_EVENTS_TOPIC,
  KV_METRICS_TOPIC,
  activeSequencesSubject,
  kvEventsSubject,
  kvMetricsSubject,
  type DecodeError,
  type EventEnvelope,
} from '@kvrouter/protocols';

/**
 * Where a message goes: the NATS subject, plus the discovery coordinates under which a ZMQ
 * publisher advertises itself (`v1/event_channels/{ns}/{component}/{topic}/{id}`, §6.1).
 */
export interface EventTopic {
  readonly subject: string;
  readonly namespace: string;
  readonly component: string;
  readonly topic: string;
}

/**
 * `kv_metrics` is namespace-wide, but a channel key needs a component level; ZMQ publishers of
 * namespace-wide topics advertise under this one (implementation choice).
 */
export const NAMESPACE_CHANNEL_COMPONENT = '_namespace';

export const kvEventsTopic = (ns: string, component: string): EventTopic => ({
  subject: kvEventsSubject(ns, component),
  namespace: ns,
  component,
  topic: KV_EVENTS_TOPIC,
});

export const activeSequencesTopic = (ns: string, component: string): EventTopic => ({
  subject: activeSequencesSubject(ns, component),
  namespace: ns,
  component,
  topic: ACTIVE_SEQUENCES_TOPIC,
});

export const kvMetricsTopic = (ns: string): EventTopic => ({
  subject: kvMetricsSubject(ns),
  namespace: ns,
  component: NAMESPACE_CHANNEL_COMPONENT,
  topic: KV_METRICS_TOPIC,
});

export type EventPlaneKind = 'nats' | 'zmq' | 'inproc';

export interface SubscribeOptions {
  /** A message that is not a valid envelope (or ZMQ framing) was dropped; the subscription goes on. */
  onDecodeFailure?: (err: DecodeError) => void;
}

/** Decoded envelopes in arrival order. `close()` ends the iterator and releases the transport. */
export interface EventSubscription extends AsyncIterableIterator<EventEnvelope> {
  close(): void;
  /** Messages dropped because they did not decode. */
  readonly decodeFailures: number;
}

export interface EventPlane {
  readonly kind: EventPlaneKind;
  /** This process's instance id: the envelope's `publisher_id`. */
  readonly publisherId: bigint;
  /**
   * Queues one message; order is kept per topic. Transport failures go to the plane's `onError`
   * (an event plane is lossy by contract: consumers detect the gap and recover).
   */
  publish(topic: EventTopic, payload: Uint8Array): void;
  /** Resolves once everything published so far has been handed to the transport. */
  flush(): Promise<void>;
  subscribe(topic: EventTopic, opts?: SubscribeOptions): EventSubscription;
  close(): Promise<void>;
}

export interface PlaneOptions {
  /** Envelope `publisher_id`: the process's discovery instance id. */
  publisherId: bigint;
  /** Wall clock for `published_at` (ms); default `Date.now`. */
  now?: () => number;
  /** Transport errors while publishing. */
  onError?: (err: unknown) => void;
}
