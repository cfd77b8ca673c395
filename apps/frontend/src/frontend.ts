/**
 * The frontend process as one object: discovery (its lease id is the `router_id`), the request and
 * event planes, metrics, tokenizer, model registry, the embedded simulated workers (mem discovery
 * with no workers), and the HTTP(S) server with graceful shutdown.
 */
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import path from 'node:path';
import type { ResolvedConfig } from '@kvrouter/config';
import { InprocEventBus, brokerSetting, createEventPlane, type EventPlane } from '@kvrouter/kv-events';
import { FrontendMetricSet, bucketOverridesFromConfig } from '@kvrouter/metrics';
import { KvrError } from '@kvrouter/protocols';
import { consoleLogger as kernelConsoleLogger } from '@kvrouter/protocols/node';
import { Closers, planRouter, readTextFile } from '@kvrouter/router-host';
import {
  InprocRequestClient,
  MultiTransportClient,
  NatsRequestClient,
  TcpRequestClient,
  connectNats,
  createDiscovery,
  defaultInprocHub,
  defaultMemHub,
  probeHealth,
  type Discovery,
  type InprocHub,
  type MemDiscoveryHub,
  type NatsConnection,
} from '@kvrouter/runtime';
import { SimFleet, type SimWorkerOptions } from '@kvrouter/sim-worker';
import { dashboardDecisionLog, frontendDashboard } from './dashboard/index.js';
import { createApp, healthChecks } from './http/app.js';
import { KserveServer } from './kserve/server.js';
import { LoraCatalog } from './openai/lora.js';
import { pathsFromConfig } from './http/paths.js';
import { OpenStreams } from './http/streams.js';
import { limitHeaderCount, TLS_PROFILE } from './http/util.js';
import { ModelRegistry, type Logger } from './models.js';
import { checkChatProcessor } from './flags.js';
import { checkRouterServiceFlags, durableKvEventsOn, routerServices } from './router-services.js';
import { InferenceService } from './service.js';
import { TruthWatch } from './truth.js';
import { StringCache } from './http/json-bytes.js';
import { registerMemoryTables } from './memory.js';
import { PromptEncoder } from './tokenizer/encoder.js';
import { loadTokenizer, specFor } from './tokenizer/load.js';
import { startModelTokenizers } from './tokenizer/per-model.js';
import { TokenizerPool } from './tokenizer/pool.js';

export type FrontendConfig = ResolvedConfig<'frontend'>;

export interface EmbeddedOptions {
  /** Engine parameters of the simulated workers (default: PROTOCOL §17's mocker defaults). */
  engine?: SimWorkerOptions['engine'];
  /** Tokens generated when a request gives no max_tokens (default 128). */
  defaultMaxTokens?: number;
  namespace?: string;
  component?: string;
}

export interface FrontendOptions {
  log?: Logger;
  /** mem discovery store; default the process-wide hub (where in-process workers register). */
  memHub?: MemDiscoveryHub;
  /** In-process request plane; default the process-wide hub. */
  inprocHub?: InprocHub;
  embedded?: EmbeddedOptions;
  /** Tokenizer threads for long prompts (default 1; 0 = tokenize on the event loop). */
  tokenizerThreads?: number;
  /** Do not open the HTTP port (interactive mode). */
  noHttp?: boolean;
  /** mem discovery: the in-process event bus, for workers started beside the frontend (tests, benchmarks). */
  eventBus?: InprocEventBus;
}

/** Model name of the embedded workers when neither --model-name nor --model-path says otherwise. */
export const DEFAULT_EMBEDDED_MODEL = 'mock-model';

/** The kernel's console logger: info on stdout, warn / error on stderr, `time LEVEL  msg` lines. */
export const consoleLogger: Logger = kernelConsoleLogger();

export class Frontend {
  private inflight = 0;
  private idleWaiters: (() => void)[] = [];
  private closing: Promise<void> | null = null;
  private readonly sockets = new Set<Socket>();
  /** SSE responses in progress: cut with an error event when the shutdown grace period ends. */
  private readonly streams = new OpenStreams();
  /** `--kserve-grpc-server` (its bound ports), else null. */
  kserve: KserveServer | null = null;

  private constructor(
    readonly config: FrontendConfig,
    readonly discovery: Discovery,
    readonly registry: ModelRegistry,
    readonly service: InferenceService,
    readonly metrics: FrontendMetricSet,
    readonly fleet: SimFleet | null,
    readonly server: http.Server | https.Server | null,
    private readonly cleanup: Closers,
    private readonly log: Logger,
  ) {
    server?.on('connection', (s: Socket) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
  }

  /** `http(s)://host:port` as a client reaches it (0.0.0.0 → 127.0.0.1). */
  get url(): string {
    const a = this.server?.address() as AddressInfo | null;
    if (!a) return '';
    const host =
      a.address === '0.0.0.0' || a.address === '::'
        ? '127.0.0.1'
        : a.address.includes(':')
          ? `[${a.address}]`
          : a.address;
    return `${this.server instanceof https.Server ? 'https' : 'http'}://${host}:${a.port}`;
  }

  get inflightRequests(): number {
    return this.inflight;
  }

  static async start(config: FrontendConfig, opts: FrontendOptions = {}): Promise<Frontend> {
    const log = opts.log ?? consoleLogger;
    const cleanup = new Closers();
    try {
      // Every refusal (and the --aic-* errors) before anything is connected.
      const plan = planRouter(config, 'frontend', { readText: readTextFile });
      checkRouterServiceFlags(config, plan);
      checkChatProcessor(config);
      const backend = config.discoveryBackend;
      const memHub = opts.memHub ?? defaultMemHub();
      const inprocHub = opts.inprocHub ?? defaultInprocHub();
      const discovery = await createDiscovery({
        backend,
        hub: memHub,
        fileRoot: config.fileKv,
        etcdEndpoints: [...config.etcdEndpoints],
      });
      cleanup.push(() => discovery.close());
      const routerId = discovery.leaseId;

      const needNats =
        config.requestPlane === 'nats' ||
        (backend !== 'mem' && config.eventPlane === 'nats') ||
        durableKvEventsOn(config, plan);
      let nc: NatsConnection | null = null;
      if (needNats) {
        nc = await connectNats(config.natsServer, { onStatus: (m) => log.warn(m) });
        const c = nc;
        cleanup.push(() => c.close());
      }
      // mem discovery is process-local, so every worker it lists is in this process: the
      // in-process event bus replaces zmq/nats there.
      const bus = opts.eventBus ?? new InprocEventBus();
      const plane: EventPlane =
        backend === 'mem'
          ? bus.plane({ publisherId: routerId })
          : createEventPlane({
              kind: config.eventPlane,
              discoveryBackend: backend,
              discovery,
              nc,
              publisherId: routerId,
              zmq: { broker: brokerSetting({ url: config.zmqBrokerUrl, enabled: config.zmqBrokerEnabled }) },
              onError: (e) => log.warn(`event plane: ${(e as Error).message}`),
            });
      cleanup.push(() => plane.close());

      const client = new MultiTransportClient({
        tcp: new TcpRequestClient(),
        inproc: new InprocRequestClient(inprocHub),
        ...(nc ? { nats_tcp: new NatsRequestClient(nc) } : {}),
      });
      cleanup.push(() => client.close());

      const metrics = new FrontendMetricSet({
        prefix: config.metricsPrefix,
        buckets: bucketOverridesFromConfig(config),
        routerMode: config.routerMode,
        routerId,
      });

      const loaded = loadTokenizer(specFor(config.modelPath));
      const threads = opts.tokenizerThreads ?? (config.dynPreprocessWorkers || 1);
      const budgetMs = config.dynPreprocessBudgetMs;
      const encoderMode = { mode: config.tokenizer, cacheTokens: config.tokenizerPrefixCacheTokens };
      const pool =
        threads > 0 ? new TokenizerPool(loaded.spec, threads, { budgetMs, encoder: encoderMode }) : null;
      if (pool) cleanup.push(() => pool.close());
      const encoder = new PromptEncoder({
        tokenizer: loaded.tokenizer,
        ...encoderMode,
        pool,
        template: loaded.template,
        offloadChatChars: config.tokenizerThreadChatChars,
      });
      const tokenizers = await startModelTokenizers({
        ...{ discovery, backend, memHub, fileRoot: config.fileKv, nc, log, threads, budgetMs },
        ...{
          namespace: config.namespace,
          namespacePrefix: config.namespacePrefix,
          modelName: config.modelName,
        },
        ...{ mode: config.tokenizer, cacheTokens: config.tokenizerPrefixCacheTokens },
        threadChatChars: config.tokenizerThreadChatChars,
        fallback: {
          loaded,
          encoder,
          fromFlag: config.modelPath !== null,
          source: config.modelPath ? `--model-path ${config.modelPath}` : 'cl100k_base',
        },
      });
      cleanup.push(() => tokenizers.close());

      let decisionLog: { sink: (line: string) => void; sampleRate: number } | null = null;
      if (config.decisionLog) {
        const target = config.decisionLog;
        const fd = target === '-' ? null : fs.openSync(target, 'a');
        if (fd !== null) cleanup.push(() => fs.closeSync(fd));
        decisionLog = {
          sink:
            fd === null
              ? (line) => void process.stdout.write(`${line}\n`)
              : (line) => fs.writeSync(fd, `${line}\n`),
          sampleRate: config.decisionLogSample,
        };
      }
      const dash = dashboardDecisionLog(config.dashboard, decisionLog);
      const registry = new ModelRegistry({
        decisionLog: dash.decisionLog,
        minInitialWorkers: config.routerMinInitialWorkers,
        disagg: { enforceDisagg: config.enforceDisagg, decodeFallback: config.decodeFallback },
        discovery,
        namespace: config.namespace,
        namespacePrefix: config.namespacePrefix,
        modelName: config.modelName,
        plan,
        eventPlane: plane,
        client,
        metrics,
        routerId,
        log,
        // --router-durable-kv-events, --serve-indexer (router-services.ts).
        durableKvEvents: durableKvEventsOn(config, plan),
        attach: routerServices({ config, plan, discovery, nc, routerId, log }),
      });
      cleanup.push(() => registry.close());
      await registry.start();

      let fleet: SimFleet | null = null;
      const hasWorkers = registry.allSets().some((s) => s.workers.size > 0);
      if (backend === 'mem' && config.mockerWorkers > 0 && !hasWorkers) {
        const e = opts.embedded ?? {};
        const modelName =
          config.modelName ??
          (config.modelPath ? path.basename(path.resolve(config.modelPath)) : DEFAULT_EMBEDDED_MODEL);
        fleet = await SimFleet.start({
          numWorkers: config.mockerWorkers,
          openDiscovery: async () => memHub.connect(),
          namespace: e.namespace ?? config.namespace ?? 'dynamo',
          component: e.component ?? 'backend',
          modelName,
          // The simulated mock-model's tokenizer is cl100k, said explicitly in its card.
          ...(config.modelPath ? {} : { card: { extra: { tokenizer: { tiktoken: 'cl100k_base' } } } }),
          requestPlane: { kind: 'inproc', hub: inprocHub },
          eventPlane: (id) => bus.plane({ publisherId: id }),
          defaultMaxTokens: e.defaultMaxTokens ?? 128,
          engine: {
            ...(config.kvCacheBlockSize !== null ? { blockSize: config.kvCacheBlockSize } : {}),
            // Output ids the tokenizer can decode.
            vocabSize: Math.min(loaded.tokenizer.vocabSize, 100256),
            ...e.engine,
          },
          onError: (err) => log.warn(`embedded worker: ${(err as Error).message}`),
        });
        const f = fleet;
        cleanup.push(() => f.stop());
        await waitFor(
          () =>
            registry.get(modelName) !== null &&
            registry.get(modelName)!.sets.some((s) => s.readyCount === f.workers.length),
          10_000,
        );
        log.info(
          `no workers registered in mem discovery: started ${config.mockerWorkers} embedded simulated workers (--mocker-workers) serving model "${modelName}"`,
        );
      }

      const service = new InferenceService({
        registry,
        client,
        encoder,
        template: loaded.template,
        tokenizers,
        metrics,
        migrationLimit: config.migrationLimit,
        migrationMaxSeqLen: config.migrationMaxSeqLen,
        log,
        debugPerf: config.dynDebugPerf,
      });

      // Truth-checked routing (issue 19): reports per model, logged and exported.
      const truth = new TruthWatch({ registry, metrics: metrics.truth, log });
      cleanup.push(() => truth.close());
      // Long strings of request bodies, reused when a later body sends the same bytes (json-bytes.ts).
      const bodyStrings =
        config.httpBodyStringCacheMb > 0 ? new StringCache(config.httpBodyStringCacheMb * 1024 * 1024) : null;
      // Bounded memory (issue 17): every cache's size and limit on /metrics (docs/memory.md).
      registerMemoryTables({ metrics, registry, encoder, tokenizers, bodyStrings });
      const ref: { fe: Frontend | null } = { fe: null };
      // One exposition and one set of health probes for the HTTP port and the gRPC metrics port.
      const metricsText = async () => {
        metrics.index?.syncFrom(registry.appliedCounts());
        truth.report();
        metrics.memory.sync();
        return { contentType: metrics.registry.contentType, body: await metrics.registry.metrics() };
      };
      const probes = () =>
        probeHealth({
          discovery,
          // NATS matters to routing when it carries requests, or KV events in kv mode.
          nats: config.requestPlane === 'nats' || config.routerMode === 'kv' ? nc : null,
          natsRole: config.requestPlane === 'nats' ? 'request plane' : 'KV event plane',
        });
      const healthy = () => ref.fe !== null && !ref.fe.closing;
      // --kserve-grpc-server: KServe v2 gRPC beside HTTP over the same service (kserve/server.ts).
      let kserve: KserveServer | null = null;
      if (config.kserveGrpcServer) {
        const k = (kserve = await KserveServer.start({
          ...{ service, registry, host: config.httpHost, port: config.kserveGrpcPort },
          metricsPort: config.grpcMetricsPort,
          maxMessageMb: config.httpBodyLimitMb,
          tls:
            config.tlsCertPath && config.tlsKeyPath
              ? { cert: fs.readFileSync(config.tlsCertPath), key: fs.readFileSync(config.tlsKeyPath) }
              : null,
          ...{ metrics: metricsText, health: () => healthChecks({ probes, healthy, registry }) },
          accepting: healthy,
          onInflight: (d) => ref.fe?.onInflight(d),
          paths: pathsFromConfig(config),
          log,
        }));
        cleanup.push(() => k.close());
        log.info(
          `KServe v2 gRPC on ${config.httpHost}:${k.port}; its metrics on http://${config.httpHost}:${k.metricsPort}${config.httpSvcMetricsPath}`,
        );
      }
      let server: http.Server | https.Server | null = null;
      if (!opts.noHttp) {
        const dashboard = frontendDashboard(config.dashboard, dash.tap, registry, metrics);
        if (dashboard) cleanup.push(() => dashboard.close());
        const app = createApp({
          streams: {
            add: (res, abort, errorFrame) =>
              ref.fe?.streams.add(res, abort, errorFrame, config.httpMaxStreams) ?? (() => undefined),
            track: (res, plain) => ref.fe?.streams.track(res, plain),
          },
          dashboard,
          service,
          registry,
          paths: pathsFromConfig(config),
          bodyLimitMb: config.httpBodyLimitMb,
          bodyThreadBytes: config.httpBodyThreadBytes,
          bodyStrings,
          enableAnthropicApi: config.enableAnthropicApi,
          responsesStore: { size: config.responsesStoreSize, ttlSecs: config.responsesStoreTtlSecs },
          metrics: metricsText,
          healthy,
          probes,
          routing: () => truth.report(),
          tables: metrics.memory,
          onInflight: (d) => ref.fe?.onInflight(d),
          parsers: { toolCallParser: config.dynToolCallParser, reasoningParser: config.dynReasoningParser },
          lora: loraCatalog(discovery, log, cleanup),
          internalErrors: { error: (m) => log.error(m), count: (r) => metrics.frontend.internalError(r) },
        });
        // Hardening (issue 17): bounded heads (bytes and fields), slow-client timeouts on receiving
        // the request (never on the response: long prompts and slow engines), a modern TLS profile.
        const requestMs = config.httpRequestTimeoutSecs * 1000;
        const headersMs = Math.min(config.httpHeadersTimeoutSecs * 1000, requestMs || Infinity);
        const limits: http.ServerOptions = {
          maxHeaderSize: config.httpMaxHeaderBytes,
          requestTimeout: requestMs,
          headersTimeout: headersMs,
          // How often those timeouts are checked (Node's default, 30 s, would let a slow client stay longer).
          connectionsCheckingInterval: Math.min(1000, headersMs),
          keepAliveTimeout: 65_000,
        };
        const listener = limitHeaderCount(config.httpMaxHeaders, app);
        server =
          config.tlsCertPath && config.tlsKeyPath
            ? https.createServer(
                {
                  ...limits,
                  ...TLS_PROFILE,
                  cert: fs.readFileSync(config.tlsCertPath),
                  key: fs.readFileSync(config.tlsKeyPath),
                },
                listener,
              )
            : http.createServer(limits, listener);
        server.maxHeadersCount = config.httpMaxHeaders + 1;
        const s = server;
        await new Promise<void>((resolve, reject) => {
          s.once('error', reject);
          s.listen(config.httpPort, config.httpHost, () => {
            s.off('error', reject);
            resolve();
          });
        });
      }
      ref.fe = new Frontend(config, discovery, registry, service, metrics, fleet, server, cleanup, log);
      ref.fe.kserve = kserve;
      return ref.fe;
    } catch (e) {
      await cleanup.close();
      throw e;
    }
  }

  private onInflight(d: number): void {
    this.inflight += d;
    if (this.inflight === 0 && this.idleWaiters.length > 0) for (const w of this.idleWaiters.splice(0)) w();
  }

  /**
   * Graceful shutdown (DYN_HTTP_GRACEFUL_SHUTDOWN_TIMEOUT_SECS): stop accepting connections, let
   * in-flight requests (streams included) finish for up to the timeout, then drop what is left
   * and release everything.
   */
  close(timeoutSecs: number = this.config.httpGracefulShutdownTimeoutSecs): Promise<void> {
    this.closing ??= (async () => {
      const srv = this.server;
      if (srv) {
        const closed = new Promise<void>((r) => srv.close(() => r()));
        // Idle keep-alive connections would hold close() open.
        srv.closeIdleConnections();
        if (this.inflight > 0) {
          let timer: NodeJS.Timeout | undefined;
          await Promise.race([
            new Promise<void>((r) => this.idleWaiters.push(r)),
            new Promise<void>((r) => (timer = setTimeout(r, timeoutSecs * 1000))),
          ]);
          clearTimeout(timer);
          if (this.inflight > 0)
            this.log.warn(
              `shutdown: ${this.inflight} requests still running after ${timeoutSecs}s; closing them`,
            );
          // Streams still running get an SSE error event, other requests a 503 error response,
          // before their connection closes.
          await this.streams.cut();
        }
        srv.closeAllConnections();
        for (const s of this.sockets) s.destroy();
        await closed;
      }
      await this.cleanup.close((e) => this.log.warn(`shutdown: ${(e as Error).message}`));
    })();
    return this.closing;
  }
}

async function waitFor(cond: () => boolean, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end)
      throw new KvrError('startup_timeout', 'embedded workers did not become routable in time', 500);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** LoRA adapters registered by workers (cards with a key suffix), served as models. */
function loraCatalog(
  discovery: Discovery,
  log: { warn(m: string): void },
  cleanup: { push(f: () => void): void },
): LoraCatalog {
  const l = new LoraCatalog(discovery, (m) => log.warn(m));
  cleanup.push(() => l.close());
  return l;
}
