/**
 * The wiring block every worker process shares — the simulated workers of `@kvrouter/sim-worker`
 * (mocker, embedded fleet) and the real-engine adapter (`apps/worker`): the request-plane server,
 * the KV event publisher (ids, batching, dedup, local indexer) on the event plane or a durable
 * sink, the `ActiveLoad` channel, and the registration (instance on the generate endpoint, the
 * local indexer's query endpoints, then the model card, docs/protocol.md §6.1–§6.4).
 */
import {
  KvEventPublisher,
  LoadChannel,
  ZmqEventPlane,
  kvEventsTopic,
  planeSink,
  serveLocalIndexer,
  type EventPlane,
  type RouterEventSink,
} from '@kvrouter/kv-events';
import {
  KvrError,
  componentSubject,
  u64ToHex,
  type ActiveLoad,
  type DpRank,
  type WorkerId,
} from '@kvrouter/protocols';
import {
  NatsRequestServer,
  TcpRequestServer,
  defaultInprocHub,
  registerInstance,
  registerModelCard,
  type DeviceType,
  type Discovery,
  type InprocHub,
  type Instance,
  type ModelCardInput,
  type ModelDeploymentCard,
  type NatsConnection,
  type Registration,
  type RequestServer,
} from '@kvrouter/runtime';

export type RequestPlaneSpec =
  | {
      kind: 'tcp';
      /** Bind address; default `0.0.0.0`. */
      host?: string;
      /** Default `DYN_TCP_RPC_PORT`, else OS-assigned. */
      port?: number;
      advertiseHost?: string;
    }
  | {
      kind: 'nats';
      nc: NatsConnection;
      /** Default `namespace.{ns}.component.{comp}.instance.{id:hex}`. */
      subject?: string;
    }
  | {
      kind: 'inproc';
      /** Default the process-wide hub (where an embedding frontend's inproc client looks). */
      hub?: InprocHub;
      /** Default `worker-{id:hex}`. */
      name?: string;
    };

/** The worker's request-plane server (its `generate` and local-indexer endpoints are served there). */
export async function listenRequestPlane(
  p: RequestPlaneSpec,
  namespace: string,
  component: string,
  workerId: bigint,
): Promise<RequestServer> {
  switch (p.kind) {
    case 'tcp':
      return TcpRequestServer.listen({ host: p.host, port: p.port, advertiseHost: p.advertiseHost });
    case 'nats':
      return NatsRequestServer.start(p.nc, {
        subject: p.subject ?? `${componentSubject(namespace, component)}.instance.${u64ToHex(workerId)}`,
      });
    case 'inproc':
      return (p.hub ?? defaultInprocHub()).listen({ name: p.name ?? `worker-${u64ToHex(workerId)}` });
    default:
      throw new KvrError(
        'invalid_argument',
        `requestPlane.kind: must be tcp, nats or inproc, got ${JSON.stringify((p as { kind?: unknown }).kind)}`,
        400,
        { field: 'requestPlane.kind' },
      );
  }
}

export interface WorkerEventsOptions {
  workerId: WorkerId;
  namespace: string;
  component: string;
  dpRanks: readonly number[];
  /** KV events and loads (null: nothing is published; the local indexer still answers queries). */
  eventPlane: EventPlane | null;
  /** Where numbered KV events go instead of the event plane (e.g. JetStream durable mode). */
  sink?: RouterEventSink | null;
  /** `enable_local_indexer`; default true. */
  localIndexer?: boolean;
  onError?: (err: unknown) => void;
}

export interface WorkerEvents {
  readonly publisher: KvEventPublisher;
  /** `ActiveLoad` out (null without an event plane). */
  readonly loads: LoadChannel | null;
}

/**
 * The publisher of a worker's KV events and its load channel. On a ZMQ plane the topic is
 * announced first, so a router that discovers this worker connects before the first event.
 */
export async function openWorkerEvents(o: WorkerEventsOptions): Promise<WorkerEvents> {
  const topic = kvEventsTopic(o.namespace, o.component);
  const plane = o.eventPlane;
  if (!o.sink && plane instanceof ZmqEventPlane) await plane.announce(topic);
  const sink = o.sink ?? (plane ? planeSink(plane, topic) : null);
  const publisher = new KvEventPublisher({
    workerId: o.workerId,
    sink,
    dpRanks: [...o.dpRanks],
    localIndexer: o.localIndexer ?? true,
    onError: o.onError,
  });
  return { publisher, loads: plane ? new LoadChannel(plane, o.namespace) : null };
}

/** One rank's `ActiveLoad` (§5.5) as a worker reports it (its prefill tokens are the router's to track). */
export function activeLoad(
  workerId: WorkerId,
  dpRank: number,
  l: { active_decode_blocks: number | null; kv_used_blocks: number },
): ActiveLoad {
  return {
    worker_id: workerId,
    dp_rank: dpRank as DpRank,
    active_decode_blocks: l.active_decode_blocks,
    active_prefill_tokens: null,
    kv_used_blocks: l.kv_used_blocks,
  };
}

export interface WorkerRegistrationOptions {
  /** Its lease id is the instance id; every key lives under that lease. */
  discovery: Discovery;
  namespace: string;
  component: string;
  /** The generate endpoint (`generate` unless configured). */
  endpoint: string;
  server: RequestServer;
  /** Serves the local indexer's query endpoints on `server` (§5.3) before anything is registered. */
  publisher?: KvEventPublisher | null;
  deviceType?: DeviceType;
  card: ModelCardInput;
}

/**
 * A worker's discovery records. Instance records come before the model card, so a router that
 * reacts to the card finds the instance already there; `unregister` takes them all away (routers
 * stop picking the worker) and `register` may put them back (an engine that came back).
 */
export class WorkerRegistration {
  private regs: Registration<unknown>[] = [];
  private readonly queryEndpoints: string[];
  private records: { instance: Instance; card: ModelDeploymentCard } | null = null;

  constructor(private readonly o: WorkerRegistrationOptions) {
    this.queryEndpoints = o.publisher ? serveLocalIndexer(o.server, o.publisher) : [];
  }

  /** The last registered instance and card (null before the first `register`). */
  get registered(): { instance: Instance; card: ModelDeploymentCard } | null {
    return this.records;
  }

  async register(): Promise<{ instance: Instance; card: ModelDeploymentCard }> {
    const o = this.o;
    const d = o.discovery;
    const base = {
      namespace: o.namespace,
      component: o.component,
      transport: o.server.transport,
      ...(o.deviceType !== undefined ? { device_type: o.deviceType } : {}),
    };
    const regs: Registration<unknown>[] = [];
    try {
      const inst = await registerInstance(d, { ...base, endpoint: o.endpoint });
      regs.push(inst);
      for (const ep of this.queryEndpoints) regs.push(await registerInstance(d, { ...base, endpoint: ep }));
      const card = await registerModelCard(d, {
        namespace: o.namespace,
        component: o.component,
        endpoint: o.endpoint,
        card: o.card,
      });
      regs.push(card);
      this.regs.push(...regs);
      this.records = { instance: inst.record, card: card.record };
      return this.records;
    } catch (e) {
      await Promise.all(regs.map((r) => r.unregister().catch(() => undefined)));
      throw e;
    }
  }

  /** Deletes every record; failures are ignored (the lease takes the keys with it anyway). */
  async unregister(): Promise<void> {
    const r = this.regs;
    this.regs = [];
    await Promise.all(r.map((x) => x.unregister().catch(() => undefined)));
  }
}
