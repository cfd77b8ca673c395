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
import { brokerSetting, createEventPlane, type EventPlane } from '@kvrouter/kv-events';
import {
  KvIndexMetrics,
  RouterRequestMetrics,
  createRegistry,
  type RouterEndpointMetrics,
} from '@kvrouter/metrics';
import {
  KV_INDEXER_QUERY_ENDPOINT,
  KvrError,
  ROUTER_DISCOVERY_ENDPOINT,
  componentSubject,
  u64ToHex,
  type Logger,
} from '@kvrouter/protocols';
import type { KvRouter } from '@kvrouter/router';
import {
  Closers,
  RouterHost,
  ServedIndexer,
  WorkerCatalog,
  checkServedIndexRules,
  planRouter,
  readTextFile,
  refuse,
  registerServedIndex,
  serveIndexHandlers,
  startDurableKvFeed,
  stderrLogger,
  type HostIndex,
  type RouterPlan,
} from '@kvrouter/router-host';
import {
  MultiTransportClient,
  NatsRequestClient,
  NatsRequestServer,
  TcpRequestClient,
  TcpRequestServer,
  connectNats,
  probeHealth,
  createDiscovery,
  registerInstance,
  type Discovery,
  type MemDiscoveryHub,
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
import { standaloneDashboard, standaloneDashboardSource } from './dashboard.js';
import { startJsonServer, type JsonServer } from './http.js';
import type { EndpointPath } from './args.js';

export type RouterAppConfig = ResolvedConfig<'router'>;
export { stderrLogger, type Logger };

export interface StandaloneRouterOptions {
  log?: Logger;
  /** mem discovery: the shared store (tests); default the process-wide hub. */
  memHub?: MemDiscoveryHub;
  /** Listen address of the system port (default 0.0.0.0). */
  systemHost?: string;
}

/** Ids of requests whose first token has not been reported yet, with their routing time (ms). */
const TTFT_PENDING_MAX = 65_536;

export class StandaloneRouter {
  private closing: Promise<void> | null = null;
  private readonly cleanup = new Closers();
  /** The NATS connection where routing needs it (request plane, or KV events), for `/health`. */
  private healthNats: { nc: NatsConnection; role: string } | null = null;
  private readonly routedAt = new Map<string, number>();
  private reachedMin = false;
  private http_: JsonServer | null = null;
  private host!: RouterHost;
  private catalog!: WorkerCatalog<RouterHost>;
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
    readonly plan: RouterPlan,
    private readonly log: Logger,
  ) {}

  /** The index this router owns (null with overlap credit 0). */
  get index(): HostIndex | null {
    return this.host?.index ?? null;
  }

  /** The discovery lease id: `router_id` of replica sync and the instance id of every endpoint. */
  get routerId(): bigint {
    return this.discovery.leaseId;
  }

  /** Null until the first worker card (its block size) is known. */
  get router(): KvRouter | null {
    return this.host?.router ?? null;
  }

  get workerCount(): number {
    return this.catalog.readyCount;
  }

  get modelNames(): string[] {
    return this.catalog.modelNames;
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
    // Every refusal (and the --aic-* errors) before anything is connected.
    const plan = planRouter(config, 'standalone-router', { readText: readTextFile });
    // Accepted (Dynamo's router flags are shared) but not this process's job: refused, not ignored.
    for (const [on, flag] of [
      [config.enforceDisagg, '--enforce-disagg'],
      [config.decodeFallback, '--decode-fallback'],
    ] as const)
      if (on)
        throw refuse(
          flag,
          'disaggregated serving is orchestrated by the frontend (its prefill and decode routers); a standalone router routes one endpoint — set it on the frontend',
        );
    const discovery = await createDiscovery({
      backend: config.discoveryBackend,
      ...(opts.memHub ? { hub: opts.memHub } : {}),
      ...(config.fileKv ? { fileRoot: config.fileKv } : {}),
      etcdEndpoints: [...config.etcdEndpoints],
    });
    const s = new StandaloneRouter(config, path, discovery, plan, log);
    try {
      await s.init(opts);
    } catch (e) {
      await s.close();
      throw e;
    }
    return s;
  }

  private async init(opts: StandaloneRouterOptions): Promise<void> {
    const { config, path, discovery, plan, log } = this;
    const params = plan.params;
    const { namespace: ns, component: comp } = path;
    this.cleanup.push(() => discovery.close());
    // Discovery grants a lost lease again under the same id and puts every key back (issue 18).
    discovery.onLeaseLost((e) => log.warn(`${e.message}; re-registering`));
    discovery.onLeaseRestored((st) =>
      log.info(
        `discovery lease ${u64ToHex(this.routerId)} re-acquired after ${st.lastGap!.restoredAt - st.lastGap!.lostAt} ms; ${st.lastGap!.keys} keys registered again`,
      ),
    );
    const eventPlaneKind = config.eventPlane; // computed by the config table (--event-plane auto)
    let nc: NatsConnection | null = null;
    if (config.requestPlane === 'nats' || eventPlaneKind === 'nats') {
      nc = await connectNats(config.natsServer, { onStatus: (m) => log.warn(m) });
      const c = nc;
      this.cleanup.push(() => c.close());
      if (config.requestPlane === 'nats') this.healthNats = { nc, role: 'request plane' };
      else if (params.index.kind === 'events') this.healthNats = { nc, role: 'KV event plane' };
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
    // §5.3: with --router-durable-kv-events a JetStream consumer feeds the index, not the event plane.
    const durable = params.index.kind === 'events' && config.routerDurableKvEvents;
    const dash = standaloneDashboard(config.dashboard);
    const host = (this.host = new RouterHost({
      ...(dash.decisionLog ? { ports: { decisionLog: dash.decisionLog } } : {}),
      plan,
      path,
      discovery,
      client,
      eventPlane: plane,
      routerId: this.routerId,
      log,
      label: 'router',
      noEventFeed: durable,
    }));
    this.cleanup.push(() => host.close());
    const index = host.index;
    if (index) this.indexMetrics = new KvIndexMetrics(this.registry);

    this.served =
      config.serveIndexer && index ? new ServedIndexer(params.index.kind === 'approximate') : null;
    const catalog = (this.catalog = new WorkerCatalog<RouterHost>(
      {
        openGroup: () => host,
        onReady: (_g, w) => {
          const card = w.card!;
          const first = host.router === null;
          const r = host.addWorker(w.id, card);
          if (first)
            log.info(
              `router for ${ns}/${comp}/${path.endpoint}: mode ${params.policy.mode}, block size ${r.blockSize}, index ${params.index.kind}`,
            );
          else if (params.blockSizeOverride === null && card.kv_cache_block_size !== r.blockSize)
            log.warn(
              `worker ${u64ToHex(w.id)} has block size ${card.kv_cache_block_size}, the router uses ${r.blockSize} (the first card's)`,
            );
          log.info(`worker ${u64ToHex(w.id)} joined (${catalog.readyCount} routable)`);
        },
        onGone: (_g, w) => {
          host.removeWorker(w.id);
          // §5.3: in durable mode nothing else tells the index a worker left.
          if (durable) index!.removeWorker(w.id);
          log.info(`worker ${u64ToHex(w.id)} left`);
        },
        onModel: (name) => {
          if (this.served && index) this.served.bind(name, index);
        },
      },
      // One endpoint, one model: cards are not checked against each other (a mismatched block size is warned about).
      { checksums: false, warn: (m) => log.warn(m) },
    ));
    this.cleanup.push(() => catalog.close());
    await catalog.watch(discovery, { namespace: ns, component: comp, endpoint: path.endpoint });
    // Before anything of this router is registered, so a refused start leaves no trace.
    if (this.served) await checkServedIndexRules(discovery, path, this.routerId, this.served.approximate);

    this.server =
      config.requestPlane === 'nats'
        ? await NatsRequestServer.start(nc!, {
            subject: `${componentSubject(ns, ROUTER_COMPONENT)}.instance.${u64ToHex(this.routerId)}`,
          })
        : await TcpRequestServer.listen({
            port: 0,
            // DYN_TCP_RPC_HOST publishes (and binds) an address; KVR_TCP_RPC_BIND_HOST binds elsewhere.
            ...((config.tcpRpcBindHost ?? config.tcpRpcHost)
              ? { host: (config.tcpRpcBindHost ?? config.tcpRpcHost)! }
              : {}),
            ...(config.tcpRpcHost ? { advertiseHost: config.tcpRpcHost } : {}),
          });
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
      serveIndexHandlers(server, served);
      // Announced once the index caught up with the workers seen at startup (issue 18): a frontend
      // never waits on this router's rebuild (it routes with the other instances, or on load alone).
      const known = [...(catalog.allGroups()[0]?.workers.values() ?? [])]
        .filter((w) => w.routed)
        .map((w) => w.id);
      if (!(await host.rebuilt(known)))
        log.warn(`index rebuild of ${known.length} workers not finished within 5 s; serving it anyway`);
      await registerServedIndex(discovery, path, server, served.approximate);
      log.info(
        `serving the ${served.approximate ? 'approximate' : 'event-driven'} index on ${ns}/${comp}/${KV_INDEXER_QUERY_ENDPOINT}`,
      );
    }

    // Durable mode (§5.3) after router-discovery is registered: stale consumers are those of routers
    // without one.
    if (durable) await this.startDurable(nc!, index!);

    if (config.systemPort !== null) {
      const dashboard = dash.hub(
        standaloneDashboardSource(
          () => ({
            namespace: ns,
            component: comp,
            endpoint: path.endpoint,
            router: host.router,
            index: host.index,
            workers: catalog.allGroups()[0]?.workers.values() ?? [],
            model: catalog.modelNames[0] ?? path.endpoint,
            cursor: (id, rank) => host.cursor(id, rank),
          }),
          this.registry,
        ),
      );
      if (dashboard) this.cleanup.push(() => dashboard.close());
      this.http_ = await startJsonServer(
        {
          'GET /health': () => this.health(),
          'GET /live': () => this.live(),
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
        dashboard ? (req, res) => dashboard.handle(req, res) : undefined,
      );
      const h = this.http_;
      this.cleanup.push(() => h.close());
    }
    log.info(
      `standalone router ${u64ToHex(this.routerId)} ready for dyn://${ns}.${comp}.${path.endpoint} ` +
        `(${catalog.readyCount} workers; request plane ${config.requestPlane} ${JSON.stringify(server.transport)}; event plane ${eventPlaneKind}` +
        `${this.http_ ? `; system port ${this.http_.url}` : ''})`,
    );
  }

  /** `--router-durable-kv-events` (deprecated; §5.3): the shared durable feed of `@kvrouter/router-host`. */
  private async startDurable(nc: NatsConnection, index: HostIndex): Promise<void> {
    const { config } = this;
    const feed = await startDurableKvFeed({
      nc,
      discovery: this.discovery,
      path: this.path,
      routerId: this.routerId,
      index,
      snapshotThreshold: config.routerSnapshotThreshold,
      resetStates: config.routerResetStates,
      streamMaxAgeSec: config.natsStreamMaxAge,
      log: this.log,
    });
    this.cleanup.push(() => feed.close());
  }

  /** Live = the process serves (also while unhealthy). */
  private live(): { status: number; json: unknown } {
    return { status: 200, json: { status: 'live', message: 'the standalone router serves HTTP' } };
  }

  /**
   * Healthy = it can route (Dynamo's semantics): discovery reachable, NATS connected where the
   * request plane or the KV event plane needs it, at least one ready worker; the reasons in the body.
   */
  private async health(): Promise<{ status: number; json: unknown }> {
    const h = await probeHealth({
      discovery: this.discovery,
      nats: this.healthNats?.nc ?? null,
      natsRole: this.healthNats?.role ?? '',
      checks: {
        shutting_down: () => (this.closing === null ? 'ok' : 'the router is shutting down'),
        workers: () =>
          this.catalog.readyCount > 0
            ? 'ok'
            : `no ready worker for dyn://${this.path.namespace}.${this.path.component}.${this.path.endpoint}`,
      },
    });
    return {
      status: h.healthy ? 200 : 503,
      json: {
        status: h.healthy ? 'healthy' : 'unhealthy',
        reasons: h.reasons,
        checks: h.checks,
        router_id: this.routerId,
        endpoint: `dyn://${this.path.namespace}.${this.path.component}.${this.path.endpoint}`,
        workers: this.catalog.readyCount,
        models: this.catalog.modelNames,
        // The discovery lease: `state` lost while a gap lasts, `reacquired` / `last_gap` after (issue 18).
        lease: h.lease ?? null,
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
    // --router-min-initial-workers (§6.5): no decision until that many workers were ready once.
    if (!this.reachedMin && this.catalog.readyCount < this.config.routerMinInitialWorkers)
      throw new KvrError(
        'model_not_ready',
        `waiting for --router-min-initial-workers ${this.config.routerMinInitialWorkers} workers (${this.catalog.readyCount} ready)`,
        503,
        { error_type: 'overload' },
      );
    this.reachedMin = true;
    const r = this.router;
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
      const target = this.catalog.transportOf(d.worker_id);
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
    const found = this.router?.markPrefillCompleted(request_id) ?? false;
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
    const found = this.router?.free(request_id) ?? false;
    this.routedAt.delete(request_id);
    if (found) this.endpointMetrics.requestCompleted();
    return { request_id, found };
  }

  /** Deregisters (lease revoked: every key at once), stops serving, releases everything. */
  close(): Promise<void> {
    this.closing ??= this.cleanup.close((e) => this.log.warn(`shutdown: ${(e as Error).message}`));
    return this.closing;
  }
}
