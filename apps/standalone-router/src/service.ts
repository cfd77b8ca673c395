/**
 * The standalone router process as one object (upstream `python -m dynamo.router`): a KvRouter for
 * the workers of one endpoint (`--endpoint dyn://ns.component.endpoint`), its index fed by their KV
 * events, its endpoints `route` / `mark_prefill_completed` / `free` on the request plane (component
 * `router`) and over HTTP, `router-discovery` registered under the worker component (§6.1), replica
 * sync and `ActiveLoad` like an embedded router, `--serve-indexer` (§7.7), and `/metrics` +
 * `/health` on `DYN_SYSTEM_PORT`.
 */
import { randomUUID } from 'node:crypto';
import type { ResolvedConfig } from '@kvrouter/config';
import {
  DurableKvConsumer,
  KvEventSubscriber,
  LoadChannel,
  ReplicaSync,
  brokerSetting,
  createEventPlane,
  discoveryTransportResolver,
  kvEventsTopic,
  requestPlaneQueryClient,
  watchWorkers,
  type EventPlane,
} from '@kvrouter/kv-events';
import {
  KvIndexMetrics,
  RouterRequestMetrics,
  createRegistry,
  type RouterEndpointMetrics,
} from '@kvrouter/metrics';
import {
  KV_INDEXER_QUERY_ENDPOINT,
  KV_INDEXER_RECORD_ENDPOINT,
  KvrError,
  ROUTER_DISCOVERY_ENDPOINT,
  componentSubject,
  instancesPrefix,
  parseDiscoveryKey,
  u64ToHex,
} from '@kvrouter/protocols';
import { ApproxIndexer, type KvIndexer } from '@kvrouter/radix-indexer';
import { createKvIndexer } from '@kvrouter/radix-indexer/pool';
import { KvRouter, routerParamsFromConfig, type RouterParams, type RoutingRecorder } from '@kvrouter/router';
import {
  MultiTransportClient,
  NatsRequestClient,
  NatsRequestServer,
  TcpRequestClient,
  TcpRequestServer,
  connectNats,
  createDiscovery,
  effectiveMaxBatchedTokens,
  registerInstance,
  watchInstances,
  type Discovery,
  type MemDiscoveryHub,
  type ModelDeploymentCard,
  type NatsConnection,
  type RequestClient,
  type RequestServer,
} from '@kvrouter/runtime';
import {
  FREE_ENDPOINT,
  GENERATE_VIA_ROUTER_ENDPOINT,
  MARK_PREFILL_COMPLETED_ENDPOINT,
  forwardPayload,
  ROUTER_COMPONENT,
  ROUTE_ENDPOINT,
  parseRequestRef,
  parseRoute,
  routeReply,
  toRouteRequest,
  type RouteReply,
} from './api.js';
import { startJsonServer, type JsonServer } from './http.js';
import { ServedIndexer } from './served-indexer.js';
import { WorkerTracker, type EndpointPath } from './workers.js';

export type RouterAppConfig = ResolvedConfig<'router'>;

export interface Logger {
  info(msg: string): void;
  warn(msg: string): void;
  error(msg: string): void;
}

export const stderrLogger: Logger = {
  info: (m) => void process.stderr.write(`${new Date().toISOString()} INFO  ${m}\n`),
  warn: (m) => void process.stderr.write(`${new Date().toISOString()} WARN  ${m}\n`),
  error: (m) => void process.stderr.write(`${new Date().toISOString()} ERROR ${m}\n`),
};

export interface StandaloneRouterOptions {
  log?: Logger;
  /** mem discovery: the shared store (tests); default the process-wide hub. */
  memHub?: MemDiscoveryHub;
  /** Listen address of the system port (default 0.0.0.0). */
  systemHost?: string;
}

/** Ids of requests whose first token has not been reported yet, with their routing time (ms). */
const TTFT_PENDING_MAX = 65_536;

type Index = KvIndexer & Partial<RoutingRecorder>;

export class StandaloneRouter {
  private router_: KvRouter | null = null;
  private closing: Promise<void> | null = null;
  private readonly cleanup: (() => unknown)[] = [];
  private readonly routedAt = new Map<string, number>();
  private http_: JsonServer | null = null;
  private tracker!: WorkerTracker;
  private server!: RequestServer;
  private endpointMetrics!: RouterEndpointMetrics;
  private indexMetrics: KvIndexMetrics | null = null;
  private readonly registry = createRegistry();
  private served: ServedIndexer | null = null;
  private client!: RequestClient;

  private constructor(
    readonly config: RouterAppConfig,
    readonly path: EndpointPath,
    readonly discovery: Discovery,
    readonly params: RouterParams,
    readonly index: Index | null,
    private readonly log: Logger,
  ) {}

  /** The discovery lease id: `router_id` of replica sync and the instance id of every endpoint. */
  get routerId(): bigint {
    return this.discovery.leaseId;
  }

  /** Null until the first worker card (its block size) is known. */
  get router(): KvRouter | null {
    return this.router_;
  }

  get workerCount(): number {
    return this.tracker.readyCount;
  }

  get modelNames(): string[] {
    return this.tracker.modelNames;
  }

  /** `http://host:port` of the system port, or null when `DYN_SYSTEM_PORT` is unset. */
  get systemUrl(): string | null {
    return this.http_?.url ?? null;
  }

  get transport(): RequestServer['transport'] {
    return this.server.transport;
  }

  static async start(
    config: RouterAppConfig,
    path: EndpointPath,
    opts: StandaloneRouterOptions = {},
  ): Promise<StandaloneRouter> {
    const log = opts.log ?? stderrLogger;
    const params = routerParamsFromConfig(config);
    if (params.index.kind === 'remote')
      throw new KvrError(
        'not_supported',
        '--use-remote-indexer is for frontends; a standalone router keeps its own index (and can serve it with --serve-indexer)',
        400,
        { field: 'use-remote-indexer' },
      );
    if (params.aic)
      throw new KvrError(
        'not_supported',
        '--router-prefill-load-model aic needs a performance model kvrouter does not ship yet',
        400,
        {
          field: 'router-prefill-load-model',
        },
      );
    const discovery = await createDiscovery({
      backend: config.discoveryBackend,
      ...(opts.memHub ? { hub: opts.memHub } : {}),
      ...(config.fileKv ? { fileRoot: config.fileKv } : {}),
      etcdEndpoints: [...config.etcdEndpoints],
    });
    const index = buildIndex(params, log);
    const s = new StandaloneRouter(config, path, discovery, params, index, log);
    try {
      await s.init(opts);
    } catch (e) {
      await s.close();
      throw e;
    }
    return s;
  }

  private async init(opts: StandaloneRouterOptions): Promise<void> {
    const { config, path, discovery, params, index, log } = this;
    const { namespace: ns, component: comp } = path;
    this.cleanup.push(() => discovery.close());
    if (index) this.cleanup.push(() => index.close());
    const eventPlaneKind =
      config.eventPlane ??
      (config.discoveryBackend === 'etcd' || config.discoveryBackend === 'kubernetes' ? 'nats' : 'zmq');
    let nc: NatsConnection | null = null;
    if (config.requestPlane === 'nats' || eventPlaneKind === 'nats') {
      nc = await connectNats(config.natsServer);
      const c = nc;
      this.cleanup.push(() => c.close());
    }
    const plane: EventPlane = createEventPlane({
      kind: eventPlaneKind,
      discoveryBackend: config.discoveryBackend,
      discovery,
      nc,
      publisherId: this.routerId,
      zmq: { broker: brokerSetting({ url: config.zmqBrokerUrl, enabled: config.zmqBrokerEnabled }) },
      onError: (e) => log.warn(`event plane: ${(e as Error).message}`),
    });
    this.cleanup.push(() => plane.close());
    const client = (this.client = new MultiTransportClient({
      tcp: new TcpRequestClient(),
      ...(nc ? { nats_tcp: new NatsRequestClient(nc) } : {}),
    }));
    this.cleanup.push(() => client.close());

    this.endpointMetrics = new RouterRequestMetrics(this.registry).forEndpoint(path);
    if (index) this.indexMetrics = new KvIndexMetrics(this.registry);

    const durable = index !== null && params.index.kind === 'events' && config.routerDurableKvEvents;
    if (index && params.index.kind === 'events' && !durable) {
      const sub = new KvEventSubscriber({
        index,
        query: requestPlaneQueryClient(client, { resolve: discoveryTransportResolver(discovery, ns, comp) }),
        onError: (e, ctx) => log.warn(`kv events ${ns}/${comp}: ${ctx}: ${(e as Error).message}`),
      });
      sub.start(() => plane.subscribe(kvEventsTopic(ns, comp)));
      const watch = watchWorkers({
        discovery,
        namespace: ns,
        component: comp,
        endpoint: path.endpoint,
        subscriber: sub,
      });
      this.cleanup.push(
        () => watch.close(),
        () => sub.close(),
      );
    }

    const replica = params.replicaSync ? new ReplicaSync(plane, ns, comp, this.routerId) : null;
    const loads = new LoadChannel(plane, ns);
    const loadSub = loads.subscribe((l) => void this.router_?.ingestLoad(l));
    this.cleanup.push(() => loadSub.close());
    if (replica) {
      const rs = replica.subscribe((ev) => void this.router_?.applyReplicaEvent(ev));
      this.cleanup.push(() => rs.close());
    }

    const { index: _i, blockSizeOverride, replicaSync: _r, aic: _a, ...routerOpts } = params;
    const makeRouter = (card: ModelDeploymentCard): KvRouter => {
      const blockSize = blockSizeOverride ?? card.kv_cache_block_size;
      log.info(
        `router for ${ns}/${comp}/${path.endpoint}: mode ${params.mode}, block size ${blockSize}, index ${params.index.kind}`,
      );
      return new KvRouter({
        ...routerOpts,
        blockSize,
        clock: {
          now: Date.now,
          setTimeout: (f, ms) => setTimeout(f, ms).unref(),
          clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
        },
        random: Math.random,
        indexer: index,
        routerId: this.routerId,
        hrtime: () => performance.now(),
        ...(replica
          ? { publishActiveSequenceEvent: (ev) => replica.publish(ev), publishLoad: (l) => loads.publish(l) }
          : {}),
        onError: (e, ctx) => log.warn(`router: ${ctx}: ${(e as Error).message}`),
      });
    };

    this.served =
      config.serveIndexer && index ? new ServedIndexer(params.index.kind === 'approximate') : null;
    this.tracker = new WorkerTracker(discovery, path, {
      onReady: (id, card) => {
        this.router_ ??= makeRouter(card);
        const r = this.router_;
        if (blockSizeOverride === null && card.kv_cache_block_size !== r.blockSize)
          log.warn(
            `worker ${u64ToHex(id)} has block size ${card.kv_cache_block_size}, the router uses ${r.blockSize} (the first card's)`,
          );
        const rc = card.runtime_config;
        r.addWorker({
          workerId: id,
          dpStart: rc.data_parallel_start_rank,
          dpSize: rc.data_parallel_size,
          totalKvBlocks: rc.total_kv_blocks,
          maxNumBatchedTokens: effectiveMaxBatchedTokens(rc),
          taints: rc.taints,
          topologyDomains: rc.topology_domains,
        });
        log.info(`worker ${u64ToHex(id)} joined (${this.tracker.readyCount} routable)`);
      },
      onGone: (id) => {
        this.router_?.removeWorker(id);
        // §5.3: in durable mode nothing else tells the index a worker left.
        if (durable) index.removeWorker(id);
        log.info(`worker ${u64ToHex(id)} left`);
      },
      onModel: (name) => {
        if (this.served && index) this.served.bind(name, index);
      },
      onWarning: (m) => log.warn(m),
    });
    this.cleanup.push(() => this.tracker.close());
    await this.tracker.synced;
    // Before anything of this router is registered, so a refused start leaves no trace.
    if (this.served) await this.checkServedIndexRules(this.served.approximate);

    this.server =
      config.requestPlane === 'nats'
        ? await NatsRequestServer.start(nc!, {
            subject: `${componentSubject(ns, ROUTER_COMPONENT)}.instance.${u64ToHex(this.routerId)}`,
          })
        : await TcpRequestServer.listen({ port: 0 });
    const server = this.server;
    this.cleanup.push(() => server.close({ graceMs: 1000 }));
    server.serve(ROUTE_ENDPOINT, (p, ctx) => this.route(p, ctx.signal));
    server.serve(MARK_PREFILL_COMPLETED_ENDPOINT, (p) => Promise.resolve(this.markPrefillCompleted(p)));
    server.serve(FREE_ENDPOINT, (p) => Promise.resolve(this.free(p)));
    server.serve(GENERATE_VIA_ROUTER_ENDPOINT, (p, ctx) => this.generate(p, ctx.signal));
    const reg = (component: string, endpoint: string) =>
      registerInstance(discovery, { namespace: ns, component, endpoint, transport: server.transport });
    for (const ep of [
      ROUTE_ENDPOINT,
      MARK_PREFILL_COMPLETED_ENDPOINT,
      FREE_ENDPOINT,
      GENERATE_VIA_ROUTER_ENDPOINT,
    ])
      await reg(ROUTER_COMPONENT, ep);
    await reg(comp, ROUTER_DISCOVERY_ENDPOINT);

    if (this.served) {
      const served = this.served;
      server.serve(KV_INDEXER_QUERY_ENDPOINT, (p) => Promise.resolve(served.query(p)));
      if (served.approximate)
        server.serve(KV_INDEXER_RECORD_ENDPOINT, (p) => Promise.resolve(served.record(p)));
      await reg(comp, KV_INDEXER_QUERY_ENDPOINT);
      if (served.approximate) await reg(comp, KV_INDEXER_RECORD_ENDPOINT);
      log.info(
        `serving the ${served.approximate ? 'approximate' : 'event-driven'} index on ${ns}/${comp}/${KV_INDEXER_QUERY_ENDPOINT}`,
      );
    }

    // Durable mode (§5.3) after router-discovery is registered: stale consumers are those of routers
    // without one.
    if (durable) await this.startDurable(nc!, index);

    if (config.systemPort !== null) {
      this.http_ = await startJsonServer(
        {
          'GET /health': () => this.health(),
          'GET /live': () => this.health(),
          'GET /metrics': async () => ({
            text: await this.metricsText(),
            contentType: this.registry.contentType,
          }),
          'POST /route': async (b, signal) => ({ json: await this.route(b, signal) }),
          'POST /mark_prefill_completed': (b) => ({ json: this.markPrefillCompleted(b) }),
          'POST /free': (b) => ({ json: this.free(b) }),
        },
        config.systemPort,
        opts.systemHost,
      );
      const h = this.http_;
      this.cleanup.push(() => h.close());
    }
    log.info(
      `standalone router ${u64ToHex(this.routerId)} ready for dyn://${ns}.${comp}.${path.endpoint} ` +
        `(${this.tracker.readyCount} workers; request plane ${config.requestPlane} ${JSON.stringify(server.transport)}; event plane ${eventPlaneKind}` +
        `${this.http_ ? `; system port ${this.http_.url}` : ''})`,
    );
  }

  /**
   * `--router-durable-kv-events` (deprecated; §5.3): a JetStream durable consumer named after this
   * router feeds the index (snapshot replay first), instead of the event-plane subscriber. When a
   * `router-discovery` instance leaves, consumers of routers that are gone are deleted.
   */
  private async startDurable(nc: NatsConnection, index: Index): Promise<void> {
    const { config, discovery, log } = this;
    const { namespace: ns, component: comp } = this.path;
    const ids = async (ep: string): Promise<bigint[]> =>
      (await discovery.list(instancesPrefix(ns, comp, ep))).flatMap((e) => {
        const k = parseDiscoveryKey(e.key);
        return k ? [k.instance_id] : [];
      });
    const consumer = await DurableKvConsumer.start({
      nc,
      namespace: ns,
      component: comp,
      routerId: this.routerId,
      index,
      snapshotThreshold: Number(config.routerSnapshotThreshold),
      resetStates: config.routerResetStates,
      streamMaxAgeSec: Number(config.natsStreamMaxAge),
      liveRouters: () => ids(ROUTER_DISCOVERY_ENDPOINT),
      liveWorkers: () => ids(this.path.endpoint),
      onError: (e, ctx) => log.warn(`durable kv events: ${ctx}: ${(e as Error).message}`),
    });
    this.cleanup.push(() => consumer.close());
    const routers = watchInstances(discovery, {
      namespace: ns,
      component: comp,
      endpoint: ROUTER_DISCOVERY_ENDPOINT,
    });
    this.cleanup.push(() => routers.close());
    void (async () => {
      try {
        for await (const ch of routers)
          if (ch.type === 'delete')
            await consumer
              .removeStaleConsumers()
              .catch((e: unknown) => log.warn(`durable kv events: stale consumers: ${(e as Error).message}`));
      } catch {
        // Closed at shutdown.
      }
    })();
    log.info(`durable KV events: consumer ${consumer.consumerName} on stream ${consumer.names.stream}`);
  }

  /**
   * §7.7: event-driven and approximate served indexes cannot be mixed on one component, and an
   * approximate one must be the only serving instance (its records would otherwise split).
   */
  private async checkServedIndexRules(approximate: boolean): Promise<void> {
    const { namespace: ns, component: comp } = this.path;
    const others = async (ep: string): Promise<string[]> =>
      (await this.discovery.list(instancesPrefix(ns, comp, ep)))
        .map((e) => parseDiscoveryKey(e.key))
        .filter((k) => k !== null && k.instance_id !== this.routerId)
        .map((k) => u64ToHex(k!.instance_id));
    const queries = await others(KV_INDEXER_QUERY_ENDPOINT);
    const records = await others(KV_INDEXER_RECORD_ENDPOINT);
    if (approximate && queries.length > 0)
      throw new KvrError(
        'config_error',
        `--serve-indexer in approximate mode needs to be the only serving instance on ${ns}/${comp}; ${queries.join(', ')} already serve${queries.length === 1 ? 's' : ''} ${KV_INDEXER_QUERY_ENDPOINT}`,
        400,
        { field: 'serve-indexer' },
      );
    if (!approximate && records.length > 0)
      throw new KvrError(
        'config_error',
        `--serve-indexer: ${ns}/${comp} already has an approximate served index (${records.join(', ')}); event-driven and approximate served indexes cannot be mixed`,
        400,
        { field: 'serve-indexer' },
      );
  }

  private health(): { status: number; json: unknown } {
    const ok = this.closing === null;
    return {
      status: ok ? 200 : 503,
      json: {
        status: ok ? 'healthy' : 'shutting_down',
        router_id: this.routerId,
        endpoint: `dyn://${this.path.namespace}.${this.path.component}.${this.path.endpoint}`,
        workers: this.tracker.readyCount,
        models: this.tracker.modelNames,
      },
    };
  }

  async metricsText(): Promise<string> {
    if (this.index && this.indexMetrics) this.indexMetrics.syncFrom(this.index.appliedCounts());
    return this.registry.metrics();
  }

  /**
   * `route`: the decision for a prompt; booked unless `query_only` (free it with `free`). A caller
   * that goes away while its request is parked in the queue (§10) takes it out unbooked.
   */
  async route(body: unknown, signal?: AbortSignal): Promise<RouteReply> {
    if (this.closing) throw new KvrError('router_closed', 'router is shutting down', 503);
    const p = parseRoute(body, randomUUID);
    const r = this.router_;
    if (!r)
      throw new KvrError(
        'no_eligible_workers',
        `no worker of dyn://${this.path.namespace}.${this.path.component}.${this.path.endpoint} is known yet`,
        503,
      );
    const d = await r.route(toRouteRequest(p, signal));
    if (signal?.aborted) {
      // Nobody will see this decision (nor free it): undo the booking now rather than at expiry.
      if (d.booked) r.free(d.requestId);
      throw new KvrError('cancelled', `request ${d.requestId}: the caller went away`, 499);
    }
    if (d.booked) {
      if (this.routedAt.size >= TTFT_PENDING_MAX) this.routedAt.delete(this.routedAt.keys().next().value!);
      this.routedAt.set(d.requestId, performance.now());
      this.endpointMetrics.observeIsl(p.token_ids.length);
      this.endpointMetrics.observeKvHitRate(d.kvHitRate);
    }
    return routeReply(d);
  }

  /**
   * `generate` on the router component (upstream's): route, forward the §5.7 generate payload to
   * the chosen worker, stream its items back; the first item marks prefill completed, the end (any
   * outcome, a caller cancel included) frees the booking. Worker errors reach the caller after the
   * items that preceded them (migration is the caller's).
   */
  async *generate(body: unknown, signal: AbortSignal): AsyncGenerator<unknown> {
    const b =
      body !== null && typeof body === 'object' && !Array.isArray(body)
        ? { ...(body as Record<string, unknown>), query_only: false }
        : body;
    const d = await this.route(b, signal);
    const ref = { request_id: d.request_id };
    try {
      const target = this.tracker.transportOf(d.worker_id);
      if (!target)
        throw new KvrError('cannot_connect', `worker ${u64ToHex(d.worker_id)} left before dispatch`, 503);
      let first = true;
      for await (const item of this.client.stream(
        target,
        this.path.endpoint,
        forwardPayload(body, d.request_id, d.dp_rank),
        { signal },
      )) {
        if (first) {
          this.markPrefillCompleted(ref);
          first = false;
        }
        yield item;
      }
    } finally {
      this.free(ref);
    }
  }

  /** `mark_prefill_completed`: the request's first token arrived (its prefill load ends). */
  markPrefillCompleted(body: unknown): { request_id: string; found: boolean } {
    const { request_id } = parseRequestRef(body);
    const found = this.router_?.markPrefillCompleted(request_id) ?? false;
    const t = this.routedAt.get(request_id);
    if (found && t !== undefined) {
      // Time to first token as the router sees it: from its decision to the caller's report.
      this.endpointMetrics.observeTtft((performance.now() - t) / 1000);
      this.routedAt.delete(request_id);
    }
    return { request_id, found };
  }

  /** `free`: the request ended (any outcome); idempotent. */
  free(body: unknown): { request_id: string; found: boolean } {
    const { request_id } = parseRequestRef(body);
    const found = this.router_?.free(request_id) ?? false;
    this.routedAt.delete(request_id);
    if (found) this.endpointMetrics.requestCompleted();
    return { request_id, found };
  }

  /** Deregisters (lease revoked: every key at once), stops serving, releases everything. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.router_?.close();
      for (const c of [...this.cleanup].reverse()) {
        try {
          await c();
        } catch (e) {
          this.log.warn(`shutdown: ${(e as Error).message}`);
        }
      }
    })();
    return this.closing;
  }
}

function buildIndex(p: RouterParams, log: Logger): Index | null {
  const plan = p.index;
  switch (plan.kind) {
    case 'events':
      return createKvIndexer({ threads: plan.eventThreads, onError: (e) => log.warn(`index: ${e.message}`) });
    case 'approximate': {
      const approx = {
        ttlSecs: plan.ttlSecs,
        maxTreeSize: plan.maxTreeSize,
        pruneTargetRatio: plan.pruneTargetRatio,
        now: Date.now,
      };
      return plan.eventThreads > 1
        ? createKvIndexer({ threads: plan.eventThreads, approximate: approx })
        : new ApproxIndexer(approx);
    }
    default:
      return null;
  }
}
