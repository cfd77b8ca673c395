/**
 * Replica sync (§5.4) and load metrics (§5.5) as transport helpers: the router applies what these
 * deliver (`applyReplicaEvent`, load ingestion); nothing here keeps routing state.
 */
import {
  ACTIVE_SEQUENCES_TOPIC,
  ActiveLoadCodec,
  ActiveSequenceEventCodec,
  activeSequencesSubject,
  DecodeError,
  type ActiveLoad,
  type ActiveSequenceEvent,
  type EventEnvelope,
  errorMessage,
  type Timers,
} from '@kvrouter/protocols';
import { checkU64 } from './errors.js';
import { realTimers } from './publisher/publisher.js';
import {
  activeSequencesTopic,
  kvMetricsTopic,
  type EventPlane,
  type EventSubscription,
  type EventTopic,
} from './plane/types.js';

export interface MessageSubscription {
  close(): void;
  readonly stats: { delivered: number; ignored: number; decodeFailures: number };
}

export interface SubscribeHooks {
  onDecodeFailure?: (err: DecodeError) => void;
  onError?: (err: unknown) => void;
}

/** Iterates a subscription, decoding each payload; a bad message is counted, never fatal. */
function pump<T>(
  sub: EventSubscription,
  decode: (b: Uint8Array) => T,
  accept: (m: T, env: EventEnvelope) => boolean,
  deliver: (m: T) => void,
  hooks: SubscribeHooks,
): MessageSubscription {
  const stats = { delivered: 0, ignored: 0, decodeFailures: 0 };
  void (async () => {
    try {
      for await (const env of sub) {
        let m: T;
        try {
          m = decode(env.payload);
        } catch (e) {
          stats.decodeFailures++;
          hooks.onDecodeFailure?.(
            e instanceof DecodeError ? e : new DecodeError(errorMessage(e), { field: 'payload' }),
          );
          continue;
        }
        if (!accept(m, env)) {
          stats.ignored++;
          continue;
        }
        try {
          deliver(m);
          stats.delivered++;
        } catch (e) {
          hooks.onError?.(e);
        }
      }
    } catch (e) {
      hooks.onError?.(e);
    }
  })();
  return { close: () => sub.close(), stats };
}

export class ReplicaSync {
  readonly topic: EventTopic;
  readonly routerId: bigint;

  constructor(
    private readonly plane: EventPlane,
    namespace: string,
    workerComponent: string,
    routerId: bigint,
  ) {
    this.topic = activeSequencesTopic(namespace, workerComponent);
    this.routerId = checkU64(routerId, 'routerId');
  }

  /** This router's booking event (wire it to the router's `publishActiveSequenceEvent`). */
  publish(ev: ActiveSequenceEvent): void {
    this.plane.publish(this.topic, ActiveSequenceEventCodec.encodeMsgpack(ev));
  }

  /** Other routers' events; this router's own (same `router_id`) are dropped (§5.4). */
  subscribe(apply: (ev: ActiveSequenceEvent) => void, hooks: SubscribeHooks = {}): MessageSubscription {
    return pump(
      this.plane.subscribe(this.topic, { onDecodeFailure: hooks.onDecodeFailure }),
      (b) => ActiveSequenceEventCodec.decodeMsgpack(b),
      (ev) => (ev.router_id as bigint) !== this.routerId,
      apply,
      hooks,
    );
  }
}

/** A router's live request ids (replica reconciliation, issue 18). */
export interface LiveRequestList {
  router_id: bigint;
  request_ids: string[];
}

/** The reconciliation topic beside §5.4's: `{component subject}.active_sequences_events_live`. */
const activeSequencesLiveTopic = (ns: string, component: string): EventTopic => ({
  subject: `${activeSequencesSubject(ns, component)}_live`,
  namespace: ns,
  component,
  topic: `${ACTIVE_SEQUENCES_TOPIC}_live`,
});

const utf8 = new TextEncoder();
const fromUtf8 = new TextDecoder('utf-8', { fatal: true });

function decodeLiveList(b: Uint8Array): LiveRequestList {
  const o = JSON.parse(fromUtf8.decode(b)) as { router_id?: unknown; request_ids?: unknown };
  if (typeof o?.router_id !== 'string' || !/^\d{1,20}$/.test(o.router_id))
    throw new DecodeError('router_id must be a decimal u64 string', { field: 'router_id' });
  if (!Array.isArray(o.request_ids) || o.request_ids.some((r) => typeof r !== 'string'))
    throw new DecodeError('request_ids must be an array of strings', { field: 'request_ids' });
  return { router_id: checkU64(BigInt(o.router_id), 'router_id'), request_ids: o.request_ids as string[] };
}

/**
 * Replica reconciliation lists (a kvrouter addition beside §5.4's events, issue 18): every few
 * seconds each router publishes which of its requests are still live, so its peers free bookings
 * whose `Free` the event plane lost. JSON `{"router_id": "<decimal u64>", "request_ids": [...]}`;
 * routers that do not speak it (Dynamo's) never see it, on a topic of its own.
 */
export class ReplicaLiveChannel {
  readonly topic: EventTopic;
  readonly routerId: bigint;

  constructor(
    private readonly plane: EventPlane,
    namespace: string,
    workerComponent: string,
    routerId: bigint,
  ) {
    this.topic = activeSequencesLiveTopic(namespace, workerComponent);
    this.routerId = checkU64(routerId, 'routerId');
  }

  publish(list: LiveRequestList): void {
    this.plane.publish(
      this.topic,
      utf8.encode(JSON.stringify({ router_id: list.router_id.toString(), request_ids: list.request_ids })),
    );
  }

  /** Other routers' lists (this router's own are dropped). */
  subscribe(apply: (list: LiveRequestList) => void, hooks: SubscribeHooks = {}): MessageSubscription {
    return pump(
      this.plane.subscribe(this.topic, { onDecodeFailure: hooks.onDecodeFailure }),
      decodeLiveList,
      (l) => l.router_id !== this.routerId,
      apply,
      hooks,
    );
  }
}

/** `ActiveLoad` on `namespace.{ns}.kv_metrics`. */
export class LoadChannel {
  readonly topic: EventTopic;

  constructor(
    private readonly plane: EventPlane,
    namespace: string,
  ) {
    this.topic = kvMetricsTopic(namespace);
  }

  publish(load: ActiveLoad): void {
    this.plane.publish(this.topic, ActiveLoadCodec.encodeMsgpack(load));
  }

  subscribe(apply: (load: ActiveLoad) => void, hooks: SubscribeHooks = {}): MessageSubscription {
    return pump(
      this.plane.subscribe(this.topic, { onDecodeFailure: hooks.onDecodeFailure }),
      (b) => ActiveLoadCodec.decodeMsgpack(b),
      () => true,
      apply,
      hooks,
    );
  }
}

/**
 * Worker-side load publishing (§5.5): updates of a rank within `windowMs` (default 1 ms) collapse
 * into one message carrying the latest values.
 */
export class CoalescingLoadPublisher {
  private readonly latest = new Map<number, ActiveLoad>();
  private timer: unknown = null;
  private readonly timers: Timers;

  constructor(
    private readonly channel: Pick<LoadChannel, 'publish'>,
    private readonly windowMs = 1,
    timers?: Timers,
  ) {
    this.timers = timers ?? realTimers;
  }

  update(load: ActiveLoad): void {
    this.latest.set(load.dp_rank, load);
    this.timer ??= this.timers.setTimeout(() => this.flush(), this.windowMs);
  }

  flush(): void {
    if (this.timer !== null) this.timers.clearTimeout(this.timer);
    this.timer = null;
    const loads = [...this.latest.values()];
    this.latest.clear();
    for (const l of loads) this.channel.publish(l);
  }
}
