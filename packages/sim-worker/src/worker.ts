/**
 * One simulated worker: a `SimEngine` driven in real time, registered in discovery like a real
 * engine worker (instance on `generate` + the local-indexer query endpoints, model card with the
 * runtime config), serving `generate` on its own request-plane server, publishing KV events through
 * the kv-events publisher (ids, batching, dedup, local indexer) and `ActiveLoad` on `kv_metrics`.
 * Its discovery handle is its lease: the instance id is the lease id (docs/protocol.md §6.2).
 */
import {
  GENERATE_ENDPOINT,
  KvrError,
  SESSION_CONTROL_ENDPOINT,
  u64ToHex,
  type WorkerId,
} from '@kvrouter/protocols';
import { SimEngine, type EngineConfig, type EngineDeps, type EngineKvEvent } from '@kvrouter/engine-sim';
import {
  CoalescingLoadPublisher,
  type EventPlane,
  type KvEventPublisher,
  type RouterEventSink,
} from '@kvrouter/kv-events';
import type {
  DeviceType,
  Discovery,
  Instance,
  ModelCardInput,
  ModelDeploymentCard,
  ModelRuntimeConfig,
  RequestServer,
} from '@kvrouter/runtime';
import {
  WorkerRegistration,
  activeLoad,
  listenRequestPlane,
  openWorkerEvents,
  type RequestPlaneSpec,
} from '@kvrouter/worker-host';
import { EngineDriver, type DriverStats } from './driver.js';
import { BootstrapServer } from './bootstrap.js';
import { disaggGenerateHandler, type SimDisaggOptions } from './disagg.js';
import { DEFAULT_EMBEDDING_DIM, serveMedia, type SimMediaOptions } from './media.js';
import { defaultPassScheduler, type PassScheduler } from './pass-scheduler.js';
import { EngineSessions, type SessionEvent } from './sessions.js';
import type { KvEventRelay } from './vllm-relay.js';

export type { RequestPlaneSpec };

/** Card fields a worker may set beyond what the engine config decides. */
export interface SimCardOptions {
  /** Default: what one request can hold, `numGpuBlocks × blockSize`. */
  contextLength?: number;
  migrationLimit?: number;
  modelType?: ModelCardInput['model_type'];
  /** Merged into `runtime_config` (topology domains, taints, …). */
  runtimeConfig?: Partial<ModelRuntimeConfig>;
  /** More card fields, e.g. the model files (`tokenizer`, `prompt_formatter`, `chat_template_file`). */
  extra?: Record<string, unknown>;
}

export interface SimWorkerOptions {
  /** An open discovery handle; its lease id becomes the instance id. The worker closes it on stop. */
  discovery: Discovery;
  namespace: string;
  component: string;
  /** Default `generate`. */
  endpoint?: string;
  modelName: string;
  engine?: Partial<EngineConfig>;
  engineDeps?: EngineDeps;
  requestPlane: RequestPlaneSpec;
  /**
   * Event plane for KV events and load, with `publisherId` = the discovery lease id; the worker
   * closes it on stop. Null: nothing is published (the local indexer still answers queries).
   */
  eventPlane?: EventPlane | null;
  /** Where numbered KV events go instead of the event plane (e.g. JetStream durable mode); not closed by the worker. */
  kvEventSink?: RouterEventSink | null;
  /** `enable_local_indexer`; default true. */
  enableLocalIndexer?: boolean;
  /** Default the process-wide one on the real clock. */
  scheduler?: PassScheduler;
  defaultMaxTokens?: number;
  maxLagMs?: number;
  card?: SimCardOptions;
  /** `--disaggregation-mode` and the KV transfer model (`disagg.ts`); default aggregated. */
  disagg?: SimDisaggOptions | null;
  /**
   * `--model-type embedding|images|videos` (`media.ts`): the media endpoints are served beside
   * `generate`, and the card's `model_type` is these kinds (unless `card.modelType` says otherwise).
   */
  media?: SimMediaOptions | null;
  deviceType?: DeviceType;
  /**
   * Engine KV events go through this relay (e.g. `VllmRelay`: vLLM ZMQ out and back in) instead of
   * straight to the publisher; the engine then attaches token ids to stored blocks. Closed on stop.
   */
  kvEventRelay?: ((publisher: KvEventPublisher, engine: SimEngine) => Promise<KvEventRelay>) | null;
  /** Each pass's raw engine KV events (before the publisher), e.g. for `DYN_MOCKER_KV_CACHE_TRACE`. */
  onEngineKvEvents?: (workerId: bigint, events: readonly EngineKvEvent[]) => void;
  /** Publisher and plane failures (the event plane is lossy by contract; routers recover). */
  onError?: (err: unknown) => void;
  /** Engine-side sessions opened, closed or expired through `session_control` (`sessions.ts`). */
  onSession?: (workerId: bigint, e: SessionEvent) => void;
}

export interface StopOptions {
  /** How long in-flight streams may run on before they end with `engine_shutdown`; default 0. */
  graceMs?: number;
}

export class SimWorker {
  private stopping: Promise<void> | null = null;
  private relay: KvEventRelay | null = null;
  /** Prefill workers with a bootstrap port (§14 bootstrap variant). */
  private bootstrap: BootstrapServer | null = null;
  /** Engine-side sessions of `session_control` (§5.6). */
  sessions!: EngineSessions;

  private constructor(
    readonly instanceId: WorkerId,
    readonly engine: SimEngine,
    readonly driver: EngineDriver,
    readonly publisher: KvEventPublisher,
    readonly server: RequestServer,
    readonly instance: Instance,
    readonly card: ModelDeploymentCard,
    private readonly discovery: Discovery,
    private readonly registration: WorkerRegistration,
    private readonly eventPlane: EventPlane | null,
    private readonly load: CoalescingLoadPublisher | null,
  ) {}

  /**
   * Builds the engine, starts the request-plane server and registers. Instance records come before
   * the model card, so a frontend that reacts to the card finds the instance already there.
   * On failure everything started so far is torn down, including the discovery handle.
   */
  static async start(o: SimWorkerOptions): Promise<SimWorker> {
    const d = o.discovery;
    const id = d.leaseId as WorkerId;
    const endpoint = o.endpoint ?? GENERATE_ENDPOINT;
    let server: RequestServer | null = null;
    let publisher: KvEventPublisher | null = null;
    let relay: KvEventRelay | null = null;
    let bootstrap: BootstrapServer | null = null;
    try {
      const engine = new SimEngine(
        o.engine ?? {},
        o.kvEventRelay ? { ...o.engineDeps, blockTokenIds: true } : (o.engineDeps ?? {}),
      );
      const cfg = engine.config;
      const ranks = Array.from({ length: cfg.dataParallelSize }, (_, r) => r);
      const localIndexer = o.enableLocalIndexer ?? true;
      const events = await openWorkerEvents({
        workerId: id,
        namespace: o.namespace,
        component: o.component,
        dpRanks: ranks,
        eventPlane: o.eventPlane ?? null,
        sink: o.kvEventSink ?? null,
        localIndexer,
        onError: o.onError,
      });
      const pub = events.publisher;
      publisher = pub;
      relay = o.kvEventRelay ? await o.kvEventRelay(pub, engine) : null;
      const scheduler = o.scheduler ?? defaultPassScheduler();
      const load = events.loads ? new CoalescingLoadPublisher(events.loads, 1, scheduler.clock) : null;
      const onEngineKvEvents = o.onEngineKvEvents;
      const driver = new EngineDriver(engine, {
        scheduler,
        defaultMaxTokens: o.defaultMaxTokens,
        maxLagMs: o.maxLagMs,
        hooks: {
          onKvEvents: (evs) => {
            onEngineKvEvents?.(id, evs);
            if (relay) relay.push(evs);
            else for (const ev of evs) pub.engineEvent({ dp_rank: ev.dp_rank, data: ev.data }, ev.event_id);
          },
          onLoad: load ? (l) => load.update(activeLoad(id, l.dp_rank, l)) : undefined,
        },
      });

      server = await listenRequestPlane(
        o.requestPlane.kind === 'inproc'
          ? { ...o.requestPlane, name: o.requestPlane.name ?? `sim-worker-${u64ToHex(id)}` }
          : o.requestPlane,
        o.namespace,
        o.component,
        id,
      );
      const c = o.card ?? {};
      const dis = o.disagg ?? null;
      if (dis?.mode === 'prefill' && dis.bootstrap)
        bootstrap = await BootstrapServer.listen({
          port: dis.bootstrap.port,
          advertiseHost: dis.bootstrap.host,
        });
      server.serve(
        endpoint,
        disaggGenerateHandler(driver, dis, {
          workerId: id,
          clock: scheduler.clock,
          speedupRatio: cfg.speedupRatio,
          bootstrap,
          topologyDomains: c.runtimeConfig?.topology_domains,
          kvTransferDomain: c.runtimeConfig?.kv_transfer_domain,
        }),
      );
      const media = o.media && o.media.kinds.length > 0 ? o.media : null;
      if (media) serveMedia(server, media);
      // §5.6: session_control on the same server as generate (the router calls the bound instance).
      const sessions = new EngineSessions(scheduler.clock, (e) => o.onSession?.(id, e));
      server.serve(SESSION_CONTROL_ENDPOINT, (p) => Promise.resolve(sessions.handle(p)));
      const registration = new WorkerRegistration({
        discovery: d,
        namespace: o.namespace,
        component: o.component,
        endpoint,
        server,
        publisher: localIndexer ? pub : null,
        deviceType: o.deviceType,
        card: {
          ...c.extra,
          display_name: o.modelName,
          kv_cache_block_size: cfg.blockSize,
          context_length: c.contextLength ?? cfg.numGpuBlocks * cfg.blockSize,
          ...(c.migrationLimit !== undefined ? { migration_limit: c.migrationLimit } : {}),
          ...(c.modelType !== undefined
            ? { model_type: c.modelType }
            : media
              ? { model_type: [...media.kinds] }
              : dis?.mode === 'prefill'
                ? { model_type: ['prefill' as const] }
                : {}),
          ...(media?.kinds.includes('embedding')
            ? { embedding_dim: media.embeddingDim ?? DEFAULT_EMBEDDING_DIM }
            : {}),
          runtime_config: {
            ...c.runtimeConfig,
            ...(bootstrap ? { disaggregated_endpoint: { host: bootstrap.host, port: bootstrap.port } } : {}),
            total_kv_blocks: cfg.numGpuBlocks,
            max_num_batched_tokens: cfg.maxNumBatchedTokens,
            max_num_seqs: cfg.maxNumSeqs,
            data_parallel_start_rank: 0,
            data_parallel_size: cfg.dataParallelSize,
            enable_local_indexer: localIndexer,
          },
        },
      });
      const records = await registration.register();
      // A first (empty) load lets busy monitors know the ranks before any traffic.
      if (load) for (const r of ranks) load.update(activeLoad(id, r, engine.load(r)));
      const w = new SimWorker(
        id,
        engine,
        driver,
        pub,
        server,
        records.instance,
        records.card,
        d,
        registration,
        o.eventPlane ?? null,
        load,
      );
      w.relay = relay;
      w.bootstrap = bootstrap;
      w.sessions = sessions;
      return w;
    } catch (e) {
      server?.abort();
      await bootstrap?.close().catch(() => undefined);
      await relay?.close().catch(() => undefined);
      await publisher?.close().catch(() => undefined);
      await o.eventPlane?.close().catch(() => undefined);
      await d.close().catch(() => undefined);
      throw e;
    }
  }

  get stats(): DriverStats {
    return this.driver.stats;
  }

  /**
   * Clean shutdown: deregisters (routers stop picking this worker), lets streams run for `graceMs`,
   * ends the rest with `engine_shutdown` (a migratable code), flushes the last KV events and load,
   * and revokes the lease.
   */
  stop(opts: StopOptions = {}): Promise<void> {
    this.stopping ??= (async () => {
      await this.registration.unregister();
      await this.server.close({ graceMs: opts.graceMs ?? 0 });
      this.driver.stop(new KvrError('engine_shutdown', `worker ${u64ToHex(this.instanceId)} shut down`, 503));
      this.sessions.close();
      this.load?.flush();
      await this.bootstrap?.close();
      await this.relay?.close();
      await this.publisher.close();
      await this.eventPlane?.close();
      await this.discovery.close();
    })();
    return this.stopping;
  }

  /**
   * Dies like a killed process: connections drop (`disconnected` on the client side), nothing is
   * deregistered (the keys expire with the lease TTL), nothing is flushed.
   */
  crash(): void {
    this.server.abort();
    this.driver.stop(new KvrError('disconnected', 'worker crashed', 502));
    this.sessions.close();
    this.discovery.abandon();
    void this.bootstrap?.close();
    void this.relay?.close();
    void this.eventPlane?.close();
  }
}
