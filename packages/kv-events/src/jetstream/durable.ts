/**
 * JetStream durable mode (deprecated `--router-durable-kv-events`, docs/protocol.md §5.3). Workers
 * publish JSON RouterEvents to `{stream}.kv-events`; each router reads the stream through its own
 * durable pull consumer, applies every message to its index and acks it. Past
 * `--router-snapshot-threshold` messages a router dumps its index into the object store
 * (`radix-state`) and purges what every consumer has acknowledged; a starting router replays that
 * snapshot (read twice until two reads agree) before consuming the rest of the stream.
 *
 * Order of the snapshot step (implementation choice, safer than "purge, then upload in the
 * background"): read the lowest ack floor, dump, upload, then purge up to that floor. The dump is
 * taken after the floor was read and this router acks only what it applied, so the stored snapshot
 * always covers every purged message, even if the router dies between steps.
 */
import { nanos, type NatsConnection } from '@nats-io/nats-core';
import {
  AckPolicy,
  DeliverPolicy,
  jetstream,
  jetstreamManager,
  type ConsumerMessages,
  type JetStreamClient,
  type JetStreamManager,
} from '@nats-io/jetstream';
import { Objm, type ObjectStore } from '@nats-io/obj';
import {
  DecodeError,
  RADIX_STATE_OBJECT,
  RouterEventListCodec,
  decodeRouterEventJson,
  durableConsumerName,
  encodeRouterEventJson,
  jetStreamName,
  jetStreamPublishSubject,
  jetStreamSubjects,
  radixBucketName,
  type RouterEvent,
  errorMessage,
  KvrError,
} from '@kvrouter/protocols';
import type { KvIndexer } from '@kvrouter/radix-indexer';
import { checkCount, checkPositive, checkU64 } from '../errors.js';
import type { RouterEventSink } from '../publisher/publisher.js';

/** `DYN_NATS_STREAM_MAX_AGE` default. */
export const DEFAULT_STREAM_MAX_AGE_SEC = 3600;
export const DEFAULT_SNAPSHOT_THRESHOLD = 1_000_000;
/** Durable consumers idle this long are removed by the server (§5.3). */
const CONSUMER_INACTIVE_THRESHOLD_MS = 300_000;

export interface DurableNames {
  stream: string;
  /** Where workers publish. */
  subject: string;
  bucket: string;
}

export function durableNames(namespace: string, component: string): DurableNames {
  const stream = jetStreamName(namespace, component);
  return { stream, subject: jetStreamPublishSubject(stream), bucket: radixBucketName(namespace, component) };
}

/** Creates the stream if missing (subjects `{stream}.*`, max_age). */
export async function ensureStream(
  jsm: JetStreamManager,
  names: DurableNames,
  maxAgeSec = DEFAULT_STREAM_MAX_AGE_SEC,
): Promise<void> {
  try {
    await jsm.streams.info(names.stream);
    return;
  } catch (e) {
    if (!/not found/i.test(errorMessage(e))) throw e;
  }
  try {
    await jsm.streams.add({
      name: names.stream,
      subjects: [jetStreamSubjects(names.stream)],
      max_age: nanos(checkPositive(maxAgeSec, 'DYN_NATS_STREAM_MAX_AGE') * 1000),
    });
  } catch (e) {
    // Another process created it between our look and our add.
    if (!/already in use|exists/i.test(errorMessage(e))) throw e;
  }
}

// ---------------------------------------------------------------------------------------------------
// Worker side

/** A publisher sink writing JSON RouterEvents to the durable stream. */
export class JetStreamEventSink implements RouterEventSink {
  private readonly pending = new Set<Promise<unknown>>();

  private constructor(
    private readonly js: JetStreamClient,
    private readonly subject: string,
    private readonly onError: (err: unknown) => void,
  ) {}

  static async create(
    nc: NatsConnection,
    namespace: string,
    component: string,
    opts: { streamMaxAgeSec?: number; onError?: (err: unknown) => void } = {},
  ): Promise<JetStreamEventSink> {
    const names = durableNames(namespace, component);
    await ensureStream(await jetstreamManager(nc), names, opts.streamMaxAgeSec);
    return new JetStreamEventSink(jetstream(nc), names.subject, opts.onError ?? (() => undefined));
  }

  publishEvent(ev: RouterEvent): void {
    // Publishes leave in call order on the one connection; acks only confirm storage.
    const p = this.js.publish(this.subject, encodeRouterEventJson(ev)).catch((e: unknown) => this.onError(e));
    this.pending.add(p);
    void p.finally(() => this.pending.delete(p));
  }

  async flush(): Promise<void> {
    while (this.pending.size > 0) await Promise.all([...this.pending]);
  }
}

// ---------------------------------------------------------------------------------------------------
// Router side

export interface DurableConsumerOptions {
  nc: NatsConnection;
  namespace: string;
  component: string;
  /** This router's instance id; its consumer is named after it (lowercase hex). */
  routerId: bigint;
  index: Pick<KvIndexer, 'applyEvent' | 'removeWorker' | 'dump' | 'flush'>;
  /** `--router-snapshot-threshold`. */
  snapshotThreshold?: number;
  /** `--router-reset-states`: purge the stream and delete the bucket first (affects other replicas). */
  resetStates?: boolean;
  streamMaxAgeSec?: number;
  /** Snapshot check period and jitter (default 1000 ± 100 ms). */
  checkIntervalMs?: number;
  checkJitterMs?: number;
  random?: () => number;
  /** Live `router-discovery` instance ids: consumers of other routers are deleted. */
  liveRouters?: () => Promise<Iterable<bigint>> | Iterable<bigint>;
  /** Live worker ids: workers missing here are removed from the index before a snapshot. */
  liveWorkers?: () => Promise<Iterable<bigint>> | Iterable<bigint>;
  /** Snapshot double-read: pause between reads and maximum reads (default 100 ms, 10). */
  snapshotReadPauseMs?: number;
  snapshotMaxReads?: number;
  onDecodeFailure?: (err: DecodeError) => void;
  onSnapshot?: (info: { blocks: number; bytes: number; purgedBelow: number }) => void;
  onError?: (err: unknown, context: string) => void;
}

export interface DurableStats {
  /** Events applied from the snapshot at startup. */
  snapshotEvents: number;
  /** Stream messages applied. */
  applied: number;
  decodeFailures: number;
  snapshots: number;
  consumersDeleted: number;
}

export class DurableKvConsumer {
  readonly names: DurableNames;
  readonly consumerName: string;
  private readonly threshold: number;
  private messages: ConsumerMessages | null = null;
  private loop: Promise<void> | null = null;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private snapshotting: Promise<void> | null = null;
  private closed = false;
  private readonly counters: DurableStats = {
    snapshotEvents: 0,
    applied: 0,
    decodeFailures: 0,
    snapshots: 0,
    consumersDeleted: 0,
  };

  private constructor(
    private readonly opts: DurableConsumerOptions,
    private readonly jsm: JetStreamManager,
    private readonly js: JetStreamClient,
    private os: ObjectStore,
  ) {
    this.names = durableNames(opts.namespace, opts.component);
    this.consumerName = durableConsumerName(checkU64(opts.routerId, 'routerId'));
    this.threshold = checkPositive(
      opts.snapshotThreshold ?? DEFAULT_SNAPSHOT_THRESHOLD,
      'router_snapshot_threshold',
    );
  }

  get stats(): DurableStats {
    return { ...this.counters };
  }

  /**
   * Startup (§5.3): stream and bucket exist; reset or replay the snapshot; drop consumers of
   * routers that are gone; (re)create this router's consumer from the start of the stream; consume.
   */
  static async start(opts: DurableConsumerOptions): Promise<DurableKvConsumer> {
    checkCount(opts.snapshotMaxReads ?? 10, 'snapshotMaxReads');
    const jsm = await jetstreamManager(opts.nc);
    const names = durableNames(opts.namespace, opts.component);
    await ensureStream(jsm, names, opts.streamMaxAgeSec);
    const objm = new Objm(opts.nc);
    let os = await objm.create(names.bucket);
    const c = new DurableKvConsumer(opts, jsm, jetstream(opts.nc), os);
    if (opts.resetStates) {
      await jsm.streams.purge(names.stream);
      await os.destroy();
      os = await objm.create(names.bucket);
      c.os = os;
    } else await c.replaySnapshot();
    await c.removeStaleConsumers();
    // The index starts empty, so an old consumer of ours (same id after a restart) would resume
    // past messages we never applied: start a fresh one at the first stored message.
    await jsm.consumers.delete(names.stream, c.consumerName).catch(() => false);
    await jsm.consumers.add(names.stream, {
      durable_name: c.consumerName,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      inactive_threshold: nanos(CONSUMER_INACTIVE_THRESHOLD_MS),
    });
    c.loop = c.consume();
    c.schedule();
    return c;
  }

  private async replaySnapshot(): Promise<void> {
    const bytes = await this.readSnapshotConsistently();
    if (bytes === null || bytes.length === 0) return;
    let events: RouterEvent[];
    try {
      events = RouterEventListCodec.decodeJson(bytes);
    } catch (e) {
      this.decodeFailure(e);
      return;
    }
    for (const ev of events) this.opts.index.applyEvent(ev);
    this.counters.snapshotEvents += events.length;
  }

  /** Reads the snapshot until two consecutive reads agree (a writer may be mid-upload). */
  private async readSnapshotConsistently(): Promise<Uint8Array | null> {
    const max = this.opts.snapshotMaxReads ?? 10;
    let prev: Uint8Array | null | undefined;
    for (let i = 0; i < max; i++) {
      const cur = await this.os.getBlob(RADIX_STATE_OBJECT);
      if (prev !== undefined && sameBytes(prev, cur)) return cur;
      prev = cur;
      if (i + 1 < max) await sleep(this.opts.snapshotReadPauseMs ?? 100);
    }
    this.opts.onError?.(
      new KvrError(
        'kv_events_failed',
        `snapshot ${RADIX_STATE_OBJECT}: no two reads agreed in ${max} tries; using the last`,
      ),
      'snapshot',
    );
    return prev ?? null;
  }

  /** Deletes consumers whose router is no longer in discovery (needs `liveRouters`). */
  async removeStaleConsumers(): Promise<number> {
    if (!this.opts.liveRouters) return 0;
    const live = new Set<string>([this.consumerName]);
    for (const id of await this.opts.liveRouters()) live.add(durableConsumerName(id));
    let n = 0;
    for await (const ci of this.jsm.consumers.list(this.names.stream)) {
      if (live.has(ci.name)) continue;
      if (await this.jsm.consumers.delete(this.names.stream, ci.name).catch(() => false)) n++;
    }
    this.counters.consumersDeleted += n;
    return n;
  }

  private async consume(): Promise<void> {
    while (!this.closed) {
      try {
        const consumer = await this.js.consumers.get(this.names.stream, this.consumerName);
        const msgs = await consumer.consume({ max_messages: 1000 });
        this.messages = msgs;
        for await (const m of msgs) {
          let ev: RouterEvent;
          try {
            ev = decodeRouterEventJson(m.data);
          } catch (e) {
            this.decodeFailure(e);
            m.ack();
            continue;
          }
          try {
            this.opts.index.applyEvent(ev);
            this.counters.applied++;
          } catch (e) {
            this.opts.onError?.(e, 'apply');
          }
          m.ack();
        }
      } catch (e) {
        if (!this.closed) this.opts.onError?.(e, 'consume');
      }
      if (!this.closed) await sleep(500);
    }
  }

  private schedule(): void {
    if (this.closed) return;
    const base = this.opts.checkIntervalMs ?? 1000;
    const jitter = this.opts.checkJitterMs ?? 100;
    const r = (this.opts.random ?? Math.random)();
    this.timer = setTimeout(
      () => {
        this.timer = null;
        void this.maybeSnapshot().finally(() => this.schedule());
      },
      Math.max(1, base + (2 * r - 1) * jitter),
    );
  }

  /** The periodic check: snapshot + purge when the stream holds more than the threshold. */
  async maybeSnapshot(): Promise<boolean> {
    try {
      const info = await this.jsm.streams.info(this.names.stream);
      if (info.state.messages <= this.threshold) return false;
      await this.snapshot();
      return true;
    } catch (e) {
      if (!this.closed) this.opts.onError?.(e, 'snapshot');
      return false;
    }
  }

  /** Dump -> upload -> purge below the lowest ack floor + 1 (see the module comment). */
  snapshot(): Promise<void> {
    this.snapshotting ??= this.doSnapshot().finally(() => {
      this.snapshotting = null;
    });
    return this.snapshotting;
  }

  private async doSnapshot(): Promise<void> {
    if (this.opts.liveWorkers) {
      const live = new Set(await this.opts.liveWorkers());
      const dumpNow = await this.opts.index.dump();
      for (const id of new Set(dumpNow.map((e) => e.worker_id as bigint)))
        if (!live.has(id)) this.opts.index.removeWorker(id);
    }
    let floor = Number.MAX_SAFE_INTEGER;
    for await (const ci of this.jsm.consumers.list(this.names.stream))
      floor = Math.min(floor, ci.ack_floor.stream_seq);
    if (floor === Number.MAX_SAFE_INTEGER) floor = 0;
    await this.opts.index.flush();
    const events = await this.opts.index.dump();
    const bytes = new TextEncoder().encode(RouterEventListCodec.encodeJson(events));
    await this.os.putBlob({ name: RADIX_STATE_OBJECT }, bytes);
    if (floor > 0) await this.jsm.streams.purge(this.names.stream, { seq: floor + 1 });
    this.counters.snapshots++;
    this.opts.onSnapshot?.({ blocks: events.length, bytes: bytes.length, purgedBelow: floor + 1 });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    await this.snapshotting?.catch(() => undefined);
    try {
      await this.messages?.close();
    } catch {
      // Connection already gone.
    }
    await this.loop?.catch(() => undefined);
  }

  private decodeFailure(e: unknown): void {
    this.counters.decodeFailures++;
    this.opts.onDecodeFailure?.(
      e instanceof DecodeError ? e : new DecodeError(errorMessage(e), { field: 'payload' }),
    );
  }
}

function sameBytes(a: Uint8Array | null, b: Uint8Array | null): boolean {
  if (a === null || b === null) return a === b;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
