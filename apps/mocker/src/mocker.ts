/**
 * The mocker process: resolve the configuration, connect the infrastructure (one NATS connection
 * shared by every worker when a plane needs it), start `--num-workers` simulated workers, and shut
 * them down cleanly on SIGINT / SIGTERM.
 */
import { readFileSync } from 'node:fs';
import { inflateRawSync } from 'node:zlib';
import { join } from 'node:path';
import { ConfigError, resolveConfig } from '@kvrouter/config';
import { CONFIG_EXIT_CODE, parseAppConfig } from '@kvrouter/config/cli';
import { KV_EVENTS_TOPIC, KvrError, u64ToHex, type RouterEvent } from '@kvrouter/protocols';
import {
  JetStreamEventSink,
  brokerSetting,
  createEventPlane,
  type EventPlane,
  type RouterEventSink,
} from '@kvrouter/kv-events';
import { cardFieldsForModelPath, connectNats, createDiscovery, type NatsConnection } from '@kvrouter/runtime';
import { cliFiles } from '@kvrouter/router-host/main';
import { SimFleet, VllmRelay, type RequestPlaneSpec, type SessionEvent } from '@kvrouter/sim-worker';
import {
  MockerConfigError,
  extraArgsToArgv,
  planFromConfig,
  timingModelOf,
  type MockerConfig,
  type MockerPlan,
} from './options.js';
import { topologyRuntimeConfig } from './topology.js';
import { resolveDisagg } from './disagg.js';

export interface MockerIo {
  log: (line: string) => void;
  /**
   * A worker's discovery lease ended behind its back (etcd unreachable for a TTL): its keys are gone
   * and routers dropped it. Default: log it (the app exits so a supervisor restarts it).
   */
  onLeaseLost?: (instanceId: bigint, err: KvrError) => void;
  /** Default process.exit. */
  exit?: (code: number) => never;
  /**
   * Fault injection (`pnpm soak`): while this answers true, the workers' KV events are dropped
   * instead of published (load metrics and serving go on), as from an engine whose events stopped.
   */
  kvEventsMuted?: () => boolean;
}

export interface RunningMocker {
  readonly config: MockerConfig;
  readonly plan: MockerPlan;
  readonly fleet: SimFleet;
  /** Deregisters, lets streams run for `graceMs`, ends the rest with `engine_shutdown`, closes connections. */
  stop(graceMs?: number): Promise<void>;
}

const readModelConfig = (modelPath: string): string | null => {
  try {
    return readFileSync(join(modelPath, 'config.json'), 'utf8');
  } catch {
    return null;
  }
};

const readTextOrNull = (path: string): string | null => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
};

const { isDirectory } = cliFiles;

/** The plane, with KV events dropped while `muted()` says so (no `muted`: the plane itself). */
function mutable(plane: EventPlane, muted: (() => boolean) | undefined): EventPlane {
  if (!muted) return plane;
  return {
    kind: plane.kind,
    publisherId: plane.publisherId,
    publish: (topic, payload) => {
      if (topic.topic !== KV_EVENTS_TOPIC || !muted()) plane.publish(topic, payload);
    },
    flush: () => plane.flush(),
    subscribe: (topic, opts) => plane.subscribe(topic, opts),
    close: () => plane.close(),
  };
}

/**
 * Resolves the configuration. `--extra-engine-args` names a JSON file whose values are appended to
 * the command line (so they override flags) and the whole is resolved once more; any problem ends
 * the process with `error: <message>` and exit code 2.
 */
export function resolveMockerConfig(
  argv: readonly string[],
  env: Record<string, string | undefined>,
  io: MockerIo,
): MockerConfig {
  const exit = io.exit ?? ((code: number) => process.exit(code));
  let full = [...argv];
  let path: string | null = null;
  try {
    path = resolveConfig('mocker', argv, env, { isDirectory }).config.extraEngineArgs;
  } catch (e) {
    // Errors of the plain command line are reported by parseAppConfig below.
    if (!(e instanceof ConfigError)) throw e;
  }
  if (path !== null) {
    try {
      full = [...argv, ...extraArgsToArgv(readFileSync(path, 'utf8'), path)];
    } catch (e) {
      const msg = e instanceof MockerConfigError ? e.message : `--extra-engine-args ${path}: ${errText(e)}`;
      process.stderr.write(`error: ${msg}\n`);
      return exit(CONFIG_EXIT_CODE);
    }
  }
  return parseAppConfig('mocker', full, env, {
    info: {
      name: 'kvrouter-mocker',
      description: 'Simulated inference engine workers (docs/protocol.md §17)',
    },
    ...cliFiles,
    onWarning: (w) => io.log(`warning: ${w}`),
    exit: io.exit,
  }).config;
}

export async function startMocker(config: MockerConfig, io: MockerIo): Promise<RunningMocker> {
  const plan = planFromConfig(config);
  for (const w of plan.warnings) io.log(`warning: ${w}`);
  const timing = timingModelOf(
    plan.timing,
    { numGpuBlocks: config.numGpuBlocksOverride, blockSize: config.blockSize },
    readTextOrNull,
    {
      readBytes: (path) => {
        try {
          return readFileSync(path);
        } catch {
          return null;
        }
      },
      inflateRaw: (b) => inflateRawSync(b),
    },
  );
  const runtimeConfig = await topologyRuntimeConfig(config);
  const disagg = plan.disagg ? resolveDisagg(plan.disagg, config.modelPath, readModelConfig, io.log) : null;
  const needNats = plan.requestPlane === 'nats' || plan.eventPlane === 'nats';
  const nc: NatsConnection | null = needNats ? await connectNats(config.natsServer) : null;
  let durable: JetStreamEventSink | null = null;
  try {
    if (plan.durableKvEvents) {
      io.log(
        'warning: --durable-kv-events is deprecated; KV events go to JetStream instead of the event plane',
      );
      durable = await JetStreamEventSink.create(nc!, plan.path.namespace, plan.path.component, {
        streamMaxAgeSec: Number(config.natsStreamMaxAge),
        onError: (e) => io.log(`kv events: JetStream publish failed: ${errText(e)}`),
      });
    }
    // The card names the tokenizer: a model directory's files by checksum, else the simulated
    // model's cl100k, explicitly.
    const cardFiles = await cardFieldsForModelPath({
      modelPath: config.modelPath,
      discoveryBackend: plan.discoveryBackend,
      fileKv: config.fileKv ?? null,
      nc,
      otherwise: { tokenizer: { tiktoken: 'cl100k_base' } },
      log: io.log,
    });
    const requestPlane: RequestPlaneSpec =
      plan.requestPlane === 'nats'
        ? { kind: 'nats', nc: nc! }
        : { kind: 'tcp', ...(plan.tcpPort !== null ? { port: plan.tcpPort } : { port: 0 }) };
    const fleet = await SimFleet.start({
      numWorkers: plan.numWorkers,
      openDiscovery: async () => {
        const d = await createDiscovery({
          backend: plan.discoveryBackend,
          etcdEndpoints: [...config.etcdEndpoints],
          fileRoot: config.fileKv ?? undefined,
        });
        d.onLeaseLost((e) =>
          (io.onLeaseLost ?? ((id, err) => io.log(`lease of worker ${u64ToHex(id)} lost: ${errText(err)}`)))(
            d.leaseId,
            e,
          ),
        );
        return d;
      },
      namespace: plan.path.namespace,
      component: plan.path.component,
      endpoint: plan.path.endpoint,
      modelName: plan.modelName,
      engine: plan.engine,
      ...(timing ? { engineDeps: { timing } } : {}),
      requestPlane,
      eventPlane: (publisherId, discovery) =>
        mutable(
          createEventPlane({
            kind: plan.eventPlane,
            discoveryBackend: plan.discoveryBackend,
            discovery,
            nc,
            publisherId,
            onError: (e) => io.log(`event plane: ${errText(e)}`),
            zmq: { broker: brokerSetting({ url: config.zmqBrokerUrl, enabled: config.zmqBrokerEnabled }) },
          }),
          io.kvEventsMuted,
        ),
      kvEventSink: durable as RouterEventSink | null,
      kvEventRelayFor: plan.vllmZmq
        ? (i) =>
            VllmRelay.factory({
              host: config.httpHost,
              kvEventsPort: plan.vllmZmq!.kvEventsPorts[i],
              replayPort: plan.vllmZmq!.replayPorts?.[i] ?? null,
              onError: (e) => io.log(`kv events: ${errText(e)}`),
            })
        : null,
      startupDelayMs: plan.startupDelayMs,
      staggerMs: plan.staggerMs,
      card: {
        runtimeConfig: {
          ...runtimeConfig,
          // Published in the card like the worker adapter does: frontends parse the output with them.
          ...(config.dynToolCallParser ? { tool_call_parser: config.dynToolCallParser } : {}),
          ...(config.dynReasoningParser ? { reasoning_parser: config.dynReasoningParser } : {}),
        },
        extra: cardFiles,
      },
      disagg,
      media: plan.media,
      onEngineKvEvents: plan.kvCacheTrace ? (id, evs) => traceEvents(io, id, evs) : undefined,
      onSession: (id, e) => io.log(sessionLine(id, e)),
      onError: (e) => io.log(`kv events: ${errText(e)}`),
    });
    const ids = fleet.workers.map((w) => u64ToHex(w.instanceId)).join(', ');
    io.log(
      `mocker ready: ${plan.numWorkers} worker(s) of model ${JSON.stringify(plan.modelName)} on ` +
        `dyn://${plan.path.namespace}.${plan.path.component}.${plan.path.endpoint} ` +
        `(discovery ${plan.discoveryBackend}, request plane ${plan.requestPlane}, event plane ${plan.eventPlane}` +
        `${disagg ? `, ${disagg.mode} worker, KV transfer ${disagg.kvBytesPerToken} B/token at ${disagg.bandwidthGBps} GB/s` : ''}); instances ${ids}`,
    );
    let stopped: Promise<void> | null = null;
    return {
      config,
      plan,
      fleet,
      stop: (graceMs = 0) =>
        (stopped ??= (async () => {
          await fleet.stop({ graceMs });
          await durable?.flush();
          await nc?.close();
        })()),
    };
  } catch (e) {
    await nc?.close().catch(() => undefined);
    throw e;
  }
}

function traceEvents(
  io: MockerIo,
  id: bigint,
  evs: readonly { event_id: number; dp_rank: number; data: RouterEvent['event']['data'] }[],
): void {
  for (const ev of evs) {
    const d = ev.data;
    const kind = d === 'cleared' ? 'cleared' : 'stored' in d ? 'stored' : 'removed';
    const blocks =
      d === 'cleared' ? 0 : 'stored' in d ? d.stored.blocks.length : d.removed.block_hashes.length;
    io.log(
      `kv-cache-trace worker=${u64ToHex(id)} dp_rank=${ev.dp_rank} seq=${ev.event_id} ${kind} blocks=${blocks}`,
    );
  }
}

export function errText(e: unknown): string {
  if (e instanceof KvrError) return `${e.code}: ${e.message}`;
  return e instanceof Error ? e.message : String(e);
}

/** One log line per engine-side session change (`session_control`, docs/protocol.md §5.6). */
function sessionLine(workerId: bigint, e: SessionEvent): string {
  const w = `worker ${u64ToHex(workerId)}`;
  if (e.kind === 'opened')
    return `session ${e.sessionId} ${e.reopened ? 're-opened' : 'opened'} on ${w} (timeout ${e.timeoutS} s)`;
  if (e.kind === 'closed') return `session ${e.sessionId} closed on ${w}`;
  return `session ${e.sessionId} expired on ${w} after ${e.timeoutS} s`;
}
