/**
 * From the resolved mocker configuration (docs/protocol.md §17, `@kvrouter/config` rows for `mocker`) to
 * what the fleet needs, plus the flags that are accepted but not modelled. Pure: no I/O here, so
 * every mapping and refusal is unit-tested.
 */
import type { ResolvedConfig } from '@kvrouter/config';
import { KvrError, parseEndpoint, type EndpointPath } from '@kvrouter/protocols';
import { aicEngineTimingFromFlag } from '@kvrouter/aic-model';
import {
  profileTimingFromFlag,
  reasoningFromFlag,
  type EngineConfig,
  type InflateRaw,
  type TimingModel,
} from '@kvrouter/engine-sim';
import { autoStaggerMs, type SimMediaOptions } from '@kvrouter/sim-worker';
import { disaggPlan, type DisaggPlan } from './disagg.js';

export type MockerConfig = ResolvedConfig<'mocker'>;

export interface MockerPlan {
  path: EndpointPath;
  modelName: string;
  numWorkers: number;
  engine: Partial<EngineConfig>;
  startupDelayMs: number;
  staggerMs: number;
  discoveryBackend: MockerConfig['discoveryBackend'];
  requestPlane: 'tcp' | 'nats';
  eventPlane: 'nats' | 'zmq';
  durableKvEvents: boolean;
  /** Fixed tcp port of worker 0 (`DYN_TCP_RPC_PORT`); worker i listens on port + i. */
  tcpPort: number | null;
  kvCacheTrace: boolean;
  /**
   * `--zmq-kv-events-ports` (+ `--zmq-replay-ports`), one base port per worker: the engine's events
   * take the vLLM ZMQ path (sim-worker `VllmRelay`) before the publisher. Null = direct.
   */
  vllmZmq: ZmqPortsPlan | null;
  /** `--disaggregation-mode prefill|decode` (null = aggregated); see `disagg.ts`. */
  disagg: DisaggPlan | null;
  /** `--model-type embedding|images|videos` (null = chat: text generation only). */
  media: SimMediaOptions | null;
  /** Where pass times come from; `timingModelOf` builds the engine's model (it reads files). */
  timing: TimingPlan;
  /** Startup continues; the app logs each one. */
  warnings: string[];
}

/** Refusal of a configuration the mocker cannot run; the app prints it as `error: ...` and exits 2. */
export class MockerConfigError extends KvrError {
  constructor(message: string, flag: string) {
    super('config_error', message, 400, { flag });
    this.name = 'MockerConfigError';
  }
}

/** The model name served: `--model-name`, else the model path (as upstream). */
export function servedModelName(c: Pick<MockerConfig, 'modelName' | 'modelPath'>): string {
  return c.modelName ?? c.modelPath ?? '';
}

export function planFromConfig(c: MockerConfig): MockerPlan {
  const warnings: string[] = [];
  const vllmZmq = zmqPortsPlan(c);
  const eventPlane = c.eventPlane; // computed by the config table (--event-plane auto)
  if (c.durableKvEvents && eventPlane !== 'nats')
    throw new MockerConfigError('--durable-kv-events requires --event-plane=nats', '--durable-kv-events');
  const timing = timingPlan(c, warnings);
  const reasoning = reasoningFromFlag(c.reasoning, mockerFail);
  const disagg = disaggPlan(c, warnings, (m, flag) => {
    throw new MockerConfigError(m, flag);
  });
  if (c.discoveryBackend === 'mem')
    warnings.push(
      'discovery backend mem: workers are visible only inside this process; use --discovery-backend etcd or file for a separate frontend',
    );
  const startupDelayMs = (c.startupTime ?? 0) * 1000;
  const staggerMs = c.staggerDelay < 0 ? autoStaggerMs(c.numWorkers) : c.staggerDelay * 1000;
  return {
    path: parseEndpoint(c.endpoint, { fail: mockerFail }),
    modelName: servedModelName(c),
    numWorkers: c.numWorkers,
    engine: {
      numGpuBlocks: c.numGpuBlocksOverride,
      blockSize: c.blockSize,
      maxNumSeqs: c.maxNumSeqs,
      maxNumBatchedTokens: c.maxNumBatchedTokens,
      enablePrefixCaching: c.enablePrefixCaching,
      enableChunkedPrefill: c.enableChunkedPrefill,
      preemptionMode: c.preemptionMode,
      speedupRatio: c.speedupRatio,
      decodeSpeedupRatio: c.decodeSpeedupRatio,
      dataParallelSize: c.dataParallelSize,
      engineType: c.engineType,
      sglangMaxPrefillTokens: c.sglangMaxPrefillTokens,
      reasoning,
    },
    startupDelayMs,
    staggerMs,
    discoveryBackend: c.discoveryBackend,
    requestPlane: c.requestPlane,
    eventPlane,
    durableKvEvents: c.durableKvEvents,
    tcpPort: c.tcpRpcPort,
    vllmZmq,
    kvCacheTrace: c.mockerKvCacheTrace,
    disagg,
    media: mediaPlan(c),
    timing,
    warnings,
  };
}

function mediaPlan(c: MockerConfig): SimMediaOptions | null {
  if (c.mockerModelType === 'chat') return null;
  if (c.disaggregationMode !== 'agg')
    throw new MockerConfigError(
      `--model-type ${c.mockerModelType} cannot be combined with --disaggregation-mode ${c.disaggregationMode} (only text generation is disaggregated)`,
      '--model-type',
    );
  return { kinds: [c.mockerModelType], embeddingDim: c.embeddingDim };
}

export type TimingPlan =
  | { kind: 'polynomial' }
  /** `--planner-profile-data PATH`. */
  | { kind: 'profile'; path: string }
  /** `--aic-perf-model`: backend from `--engine-type`, system from `--aic-system`, model from `--model-path`. */
  | { kind: 'aic'; backend: 'vllm' | 'sglang'; system: string; model: string };

/** Upstream's default `--aic-system` for the mocker's AIC perf model. */
const DEFAULT_AIC_SYSTEM = 'h200_sxm';

function timingPlan(c: MockerConfig, warnings: string[]): TimingPlan {
  if (c.aicPerfModel && c.plannerProfileData !== null)
    throw new MockerConfigError(
      '--aic-perf-model and --planner-profile-data both set pass times; choose one',
      '--aic-perf-model',
    );
  if (c.plannerProfileData !== null) return { kind: 'profile', path: c.plannerProfileData };
  if (c.aicPerfModel) {
    if (c.aicSystem === null)
      warnings.push(`--aic-perf-model without --aic-system: modelling ${DEFAULT_AIC_SYSTEM}`);
    return {
      kind: 'aic',
      backend: c.engineType,
      system: c.aicSystem ?? DEFAULT_AIC_SYSTEM,
      model: c.modelPath ?? '',
    };
  }
  if (c.aicSystem !== null) warnings.push('--aic-system has no effect without --aic-perf-model');
  return { kind: 'polynomial' };
}

/** Binary reads for `.npz` profiles: the file's bytes (null when unreadable) and a raw-deflate inflater. */
export interface BinaryIo {
  readBytes: (path: string) => Uint8Array | null;
  inflateRaw: InflateRaw;
}

/**
 * The engine's pass-time model for a plan (undefined = the §17 polynomials). `readText` returns a
 * file's text or null when it cannot be read (`.npz` profiles go through `bin`); problems become
 * `MockerConfigError`s naming the flag.
 */
export function timingModelOf(
  t: TimingPlan,
  engine: Pick<EngineConfig, 'numGpuBlocks' | 'blockSize'>,
  readText: (path: string) => string | null,
  bin?: BinaryIo,
): TimingModel | undefined {
  const totalKvTokens = engine.numGpuBlocks * engine.blockSize;
  if (t.kind === 'polynomial') return undefined;
  if (t.kind === 'profile')
    return profileTimingFromFlag(
      t.path,
      (p, binary) => (binary ? (bin?.readBytes(p) ?? null) : readText(p)),
      totalKvTokens,
      mockerFail,
      bin?.inflateRaw,
    );
  return aicEngineTimingFromFlag(t, totalKvTokens, readText, mockerFail);
}

const mockerFail = (message: string, flag: string): never => {
  throw new MockerConfigError(message, flag);
};

/**
 * `--extra-engine-args` file content → CLI arguments appended after the real ones (last one wins,
 * so the file overrides flags). Keys are flag names without dashes, in snake_case or kebab-case
 * (`block_size`, `num-gpu-blocks-override`); booleans become `--x` / `--no-x`, arrays comma lists,
 * null `None`, objects JSON.
 */
export function extraArgsToArgv(json: string, path: string): string[] {
  let o: unknown;
  try {
    o = JSON.parse(json);
  } catch (e) {
    throw new MockerConfigError(
      `--extra-engine-args ${path}: not valid JSON (${e instanceof Error ? e.message : String(e)})`,
      '--extra-engine-args',
    );
  }
  if (typeof o !== 'object' || o === null || Array.isArray(o))
    throw new MockerConfigError(
      `--extra-engine-args ${path}: expected a JSON object of flag values`,
      '--extra-engine-args',
    );
  const argv: string[] = [];
  for (const [k, v] of Object.entries(o as Record<string, unknown>)) {
    const name = k.replace(/^-+/, '').replace(/_/g, '-');
    if (name === 'extra-engine-args')
      throw new MockerConfigError(
        `--extra-engine-args ${path}: must not name another file`,
        '--extra-engine-args',
      );
    if (v === true) argv.push(`--${name}`);
    else if (v === false) argv.push(`--no-${name}`);
    else if (v === null) argv.push(`--${name}`, 'None');
    else if (Array.isArray(v)) argv.push(`--${name}`, v.map(String).join(','));
    else if (typeof v === 'object') argv.push(`--${name}`, JSON.stringify(v));
    else argv.push(`--${name}`, String(v as string | number));
  }
  return argv;
}

export interface ZmqPortsPlan {
  /** Per worker: PUB base port (rank r uses base + r; 0 = OS-assigned). */
  kvEventsPorts: readonly number[];
  /** Per worker, or null. */
  replayPorts: readonly number[] | null;
}

/** `--zmq-kv-events-ports` / `--zmq-replay-ports`: one port per worker (as upstream), replay only with events. */
export function zmqPortsPlan(c: MockerConfig): ZmqPortsPlan | null {
  const perWorker = (v: readonly number[] | null, flag: string): readonly number[] | null => {
    if (v !== null && v.length !== c.numWorkers)
      throw new MockerConfigError(
        `${flag} needs one port per worker (--num-workers ${c.numWorkers}), got ${v.length}`,
        flag,
      );
    return v;
  };
  const kv = perWorker(c.zmqKvEventsPorts, '--zmq-kv-events-ports');
  const replay = perWorker(c.zmqReplayPorts, '--zmq-replay-ports');
  if (replay !== null && kv === null)
    throw new MockerConfigError('--zmq-replay-ports needs --zmq-kv-events-ports', '--zmq-replay-ports');
  return kv === null ? null : { kvEventsPorts: kv, replayPorts: replay };
}
