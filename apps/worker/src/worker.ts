/**
 * The engine adapter: puts one external OpenAI-compatible engine (vLLM; the vLLM-compatible mocker)
 * behind kvrouter. It registers the engine as a worker (instance on `generate` + local-indexer query
 * endpoints, model card with block size and capacity), relays the engine's vLLM ZMQ KV events
 * through `VllmZmqIngest` → `KvEventPublisher` (event ids, batching, dedup, local indexer) onto the
 * event plane, and serves `generate` by forwarding to the engine's `/v1/completions`.
 *
 * Engine health: `/health` is polled every second. After two failures in a row the worker
 * deregisters (routers stop picking it) and publishes `Cleared` for every rank (the engine's cache is
 * gone with it); when the engine answers again it registers again.
 */
import {
  EMBED_ENDPOINT,
  KvrError,
  parseGenerateRequest,
  u64ToHex,
  type DpRank,
  type EmbedItem,
  type EmbedRequest,
  type WorkerId,
} from '@kvrouter/protocols';
import {
  JetStreamEventSink,
  VllmZmqIngest,
  createEventPlane,
  type EventPlane,
  type KvEventPublisher,
  type RouterEventSink,
} from '@kvrouter/kv-events';
import {
  cardFieldsForModelPath,
  connectNats,
  createDiscovery,
  registerModelCard,
  type Discovery,
  type NatsConnection,
  type Registration,
  type RequestServer,
} from '@kvrouter/runtime';
import { WorkerRegistration, activeLoad, listenRequestPlane, openWorkerEvents } from '@kvrouter/worker-host';
import { EngineClient } from './engine-client.js';
import { planFromConfig, type WorkerConfig, type WorkerPlan } from './options.js';
import { topologyRuntimeConfig } from './topology.js';
import { parseKvUsage, usedBlocks } from './engine-load.js';

export interface WorkerIo {
  log: (line: string) => void;
  /** The discovery lease ended behind the worker's back. Default: log it. */
  onLeaseLost?: (err: KvrError) => void;
}

export interface EngineInfo {
  model: string;
  maxModelLen: number | null;
  /** LoRA adapters the engine serves (`/v1/models` entries whose parent is the model). */
  loras?: string[];
}

export interface RunningWorker {
  readonly plan: WorkerPlan;
  readonly instanceId: WorkerId;
  readonly model: string;
  readonly publisher: KvEventPublisher;
  readonly ingests: readonly VllmZmqIngest[];
  readonly server: RequestServer;
  /** Whether the engine answered its last health checks (and the worker is registered). */
  readonly engineUp: boolean;
  /** Deregisters, lets streams run for `graceMs`, ends the rest with `engine_shutdown`, closes everything. */
  stop(graceMs?: number): Promise<void>;
}

/** Asks the engine what it serves (`/v1/models`), retrying until `waitMs` passes (engines load slowly). */
export async function probeEngine(
  baseUrl: string,
  waitMs: number,
  log: (l: string) => void,
): Promise<EngineInfo> {
  const end = performance.now() + waitMs;
  let said = false;
  for (;;) {
    try {
      const r = await fetch(new URL('/v1/models', baseUrl), { signal: AbortSignal.timeout(5000) });
      if (r.ok) {
        const body = (await r.json()) as {
          data?: Array<{ id?: unknown; max_model_len?: unknown; parent?: unknown }>;
        };
        const m = body.data?.[0];
        if (typeof m?.id !== 'string') throw new Error('/v1/models lists no model');
        const loras = (body.data ?? [])
          .filter((x) => x.parent === m.id && typeof x.id === 'string')
          .map((x) => x.id as string);
        return {
          model: m.id,
          maxModelLen: typeof m.max_model_len === 'number' ? m.max_model_len : null,
          loras,
        };
      }
      throw new Error(`/v1/models answered HTTP ${r.status}`);
    } catch (e) {
      if (performance.now() > end)
        throw new KvrError(
          'engine_unavailable',
          `engine at ${baseUrl} did not answer: ${e instanceof Error ? e.message : String(e)}`,
          503,
        );
      if (!said) log(`waiting for the engine at ${baseUrl} ...`);
      said = true;
      await sleep(500);
    }
  }
}

export interface StartWorkerOptions {
  /** How long to wait for the engine at start; default 120 s. */
  engineWaitMs?: number;
  /** Health poll period; default 1000 ms. */
  healthPeriodMs?: number;
  /** `/metrics` poll period for `ActiveLoad` (needs `--total-kv-blocks` and an event plane); default 250 ms. */
  loadPeriodMs?: number;
}

export async function startWorker(
  config: WorkerConfig,
  io: WorkerIo,
  opts: StartWorkerOptions = {},
): Promise<RunningWorker> {
  const plan = planFromConfig(config);
  for (const w of plan.warnings) io.log(`warning: ${w}`);
  // Topology files may take a while to appear (30 s wait); before anything is connected.
  const topology = await topologyRuntimeConfig(config);
  const info = await probeEngine(plan.engineUrl, opts.engineWaitMs ?? 120_000, io.log);
  const model = plan.modelName ?? info.model;
  const client = new EngineClient({
    baseUrl: plan.engineUrl,
    model: info.model,
    maxModelLen: info.maxModelLen,
  });

  const needNats = plan.requestPlane === 'nats' || plan.eventPlane === 'nats';
  const nc: NatsConnection | null = needNats ? await connectNats(config.natsServer) : null;
  const cleanup: Array<() => Promise<unknown>> = [];
  if (nc) cleanup.push(() => nc.close());
  try {
    const d: Discovery = await createDiscovery({
      backend: plan.discoveryBackend,
      etcdEndpoints: [...config.etcdEndpoints],
      fileRoot: config.fileKv ?? undefined,
    });
    cleanup.unshift(() => d.close());
    d.onLeaseLost((e) => (io.onLeaseLost ?? ((err) => io.log(`discovery lease lost: ${err.message}`)))(e));
    const id = d.leaseId as WorkerId;
    const onError = (e: unknown) => io.log(`kv events: ${e instanceof Error ? e.message : String(e)}`);

    let sink: RouterEventSink | null = null;
    let plane: EventPlane | null = null;
    if (plan.durableKvEvents) {
      io.log(
        'warning: --router-durable-kv-events is deprecated; KV events go to JetStream instead of the event plane',
      );
      const js = await JetStreamEventSink.create(nc!, plan.namespace, plan.component, {
        streamMaxAgeSec: Number(config.natsStreamMaxAge),
        onError,
      });
      cleanup.unshift(() => js.flush());
      sink = js;
    } else {
      plane = createEventPlane({
        kind: plan.eventPlane,
        discoveryBackend: plan.discoveryBackend,
        discovery: d,
        nc,
        publisherId: id,
        onError,
        zmq: { broker: plan.zmqBroker },
      });
      cleanup.unshift(() => plane!.close());
    }
    const ranks = Array.from({ length: plan.dataParallelSize }, (_, r) => r);
    const events = await openWorkerEvents({
      workerId: id,
      namespace: plan.namespace,
      component: plan.component,
      dpRanks: ranks,
      eventPlane: plane,
      sink,
      onError,
    });
    const publisher: KvEventPublisher = events.publisher;
    cleanup.unshift(() => publisher.close());
    const ingests = plan.kvEventEndpoints.map(
      (endpoint, r) =>
        new VllmZmqIngest({
          endpoint,
          replayEndpoint: plan.replayEndpoints[r] ?? null,
          publisher,
          kvBlockSize: plan.blockSize,
          dpRank: r,
          onWarning: (m) => io.log(`warning: rank ${r}: ${m}`),
          onError,
        }),
    );
    for (const g of ingests) cleanup.unshift(() => g.close());

    const server: RequestServer = await listenRequestPlane(
      plan.requestPlane === 'nats'
        ? { kind: 'nats', nc: nc! }
        : { kind: 'tcp', port: plan.tcpPort ?? undefined },
      plan.namespace,
      plan.component,
      id,
    );
    cleanup.unshift(async () => server.abort());
    server.serve(plan.endpoint, (payload, ctx) => {
      const req = parseGenerateRequest(payload);
      if (req.dpRank >= plan.dataParallelSize)
        throw new KvrError(
          'invalid_request',
          `generate dp_rank: expected an integer in [0, ${plan.dataParallelSize - 1}], got ${req.dpRank}`,
          400,
          {
            field: 'dp_rank',
          },
        );
      return client.generate(req, ctx.signal);
    });
    // --model-type embedding: a pooling model; the frontend sends `embed` (docs/protocol.md §5.7).
    if (plan.modelType === 'embedding')
      server.serve<EmbedRequest, EmbedItem>(EMBED_ENDPOINT, (p, ctx) => client.embed(p, ctx.signal));
    // --model-path: the engine's tokenizer files travel with the card (frontends tokenize with them).
    const cardFiles = await cardFieldsForModelPath({
      modelPath: config.modelPath ?? null,
      discoveryBackend: plan.discoveryBackend,
      fileKv: config.fileKv ?? null,
      nc,
      otherwise: {},
      log: io.log,
    });
    const registration = new WorkerRegistration({
      discovery: d,
      namespace: plan.namespace,
      component: plan.component,
      endpoint: plan.endpoint,
      server,
      publisher,
      card: {
        ...cardFiles,
        display_name: model,
        kv_cache_block_size: plan.blockSize,
        context_length: config.contextLength ?? info.maxModelLen ?? 8192,
        model_type: plan.modelType === 'embedding' ? ['embedding'] : ['completions', 'chat'],
        runtime_config: {
          ...topology,
          total_kv_blocks: config.totalKvBlocks,
          max_num_batched_tokens: config.maxNumBatchedTokens,
          max_num_seqs: config.maxNumSeqs,
          data_parallel_start_rank: 0,
          data_parallel_size: plan.dataParallelSize,
          enable_local_indexer: true,
          // --dyn-tool-call-parser / --dyn-reasoning-parser: the frontend parses this model's output with them.
          ...(config.dynToolCallParser ? { tool_call_parser: config.dynToolCallParser } : {}),
          ...(config.dynReasoningParser ? { reasoning_parser: config.dynReasoningParser } : {}),
        },
      },
    });
    // Each LoRA adapter of the engine: a card under the instance key with the adapter as suffix
    // (frontends serve it as a model of its own on this worker).
    let loraRegs: Registration<unknown>[] = [];
    const register = async () => {
      await registration.register();
      for (const l of info.loras ?? [])
        loraRegs.push(
          await registerModelCard(d, {
            namespace: plan.namespace,
            component: plan.component,
            endpoint: plan.endpoint,
            suffix: l.replace(/\//g, '_'),
            card: {
              display_name: l,
              kv_cache_block_size: plan.blockSize,
              context_length: config.contextLength ?? info.maxModelLen ?? 8192,
              model_type: ['completions', 'chat'],
              lora: { name: l },
            },
          }),
        );
    };
    const unregister = async () => {
      const regs = loraRegs;
      loraRegs = [];
      await Promise.all(regs.map((r) => r.unregister().catch(() => undefined)));
      await registration.unregister();
    };
    await register();

    let up = true;
    let failures = 0;
    let stopping = false;
    let checking = false;
    const health = setInterval(() => {
      // One check at a time: a slow engine must not be counted as down twice by overlapping checks.
      if (checking) return;
      checking = true;
      void (async () => {
        const ok = await fetch(new URL('/health', plan.engineUrl), {
          signal: AbortSignal.timeout(2000),
        }).then(
          (r) => r.ok,
          () => false,
        );
        if (stopping) return;
        if (ok) {
          failures = 0;
          if (!up) {
            up = true;
            io.log(`engine at ${plan.engineUrl} is back: registering again`);
            await register().catch((e: unknown) =>
              io.log(`re-registration failed: ${e instanceof Error ? e.message : String(e)}`),
            );
          }
        } else if (++failures === 2 && up) {
          up = false;
          io.log(`engine at ${plan.engineUrl} is not answering: deregistering and clearing its KV blocks`);
          await unregister();
          for (const r of ranks) publisher.engineEvent({ dp_rank: r as DpRank, data: 'cleared' });
        }
      })().finally(() => (checking = false));
    }, opts.healthPeriodMs ?? 1000);
    health.unref();

    // ActiveLoad (§5.5) from the engine's KV usage gauge: on change, and every 2 s anyway so a router
    // that joined later learns the current value.
    const total = config.totalKvBlocks;
    const loads = total !== null ? events.loads : null;
    const lastLoad = new Map<number, { used: number; at: number }>();
    let polling = false;
    const loadTimer =
      loads === null
        ? null
        : setInterval(() => {
            if (polling || stopping || !up) return;
            polling = true;
            void fetch(new URL('/metrics', plan.engineUrl), { signal: AbortSignal.timeout(2000) })
              .then((r) => (r.ok ? r.text() : ''))
              .then((text) => {
                for (const [rank, frac] of parseKvUsage(text)) {
                  if (rank >= plan.dataParallelSize) continue;
                  const used = usedBlocks(frac, total!);
                  const now = performance.now();
                  const last = lastLoad.get(rank);
                  if (last && last.used === used && now - last.at < 2000) continue;
                  lastLoad.set(rank, { used, at: now });
                  loads.publish(activeLoad(id, rank, { active_decode_blocks: null, kv_used_blocks: used }));
                }
              })
              .catch(() => undefined)
              .finally(() => (polling = false));
          }, opts.loadPeriodMs ?? 250);
    loadTimer?.unref();

    io.log(
      `worker ready: engine ${plan.engineUrl} (model ${JSON.stringify(model)}, block size ${plan.blockSize}, ` +
        `${plan.dataParallelSize} rank(s), KV events ${plan.kvEventEndpoints.join(',') || 'none'}) as instance ${u64ToHex(id)} on ` +
        `dyn://${plan.namespace}.${plan.component}.${plan.endpoint} (discovery ${plan.discoveryBackend}, request plane ${plan.requestPlane}, event plane ${plan.durableKvEvents ? 'jetstream' : plan.eventPlane})`,
    );
    let stopped: Promise<void> | null = null;
    return {
      plan,
      instanceId: id,
      model,
      publisher,
      ingests,
      server,
      get engineUp() {
        return up;
      },
      stop: (graceMs = 0) =>
        (stopped ??= (async () => {
          stopping = true;
          clearInterval(health);
          if (loadTimer) clearInterval(loadTimer);
          await unregister();
          await server.close({ graceMs });
          for (const g of ingests) await g.close();
          await publisher.close();
          await plane?.close();
          await d.close();
          await nc?.close();
        })()),
    };
  } catch (e) {
    for (const c of cleanup) await c().catch(() => undefined);
    throw e;
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
