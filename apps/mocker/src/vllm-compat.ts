/**
 * vLLM-compatible mode (`--http-ports`): every simulated engine is a stand-alone "vLLM server" — the
 * OpenAI HTTP API on its port and vLLM-format ZMQ KV events (`--zmq-kv-events-ports`, port + dp rank;
 * `--zmq-replay-ports` for the replay ROUTER sockets). Nothing is registered: a kvrouter worker
 * adapter (apps/worker) puts each one behind the router, exactly as it would a real vLLM.
 */
import { VllmSimEngine, defaultPassScheduler } from '@kvrouter/sim-worker';
import type { EngineConfig } from '@kvrouter/engine-sim';
import { OpenAiServer } from './openai-http.js';
import {
  MockerConfigError,
  planFromConfig,
  zmqPortsPlan,
  type MockerConfig,
  type MockerPlan,
} from './options.js';

export interface VllmCompatPlan {
  host: string;
  /** Per worker. */
  httpPorts: readonly number[];
  /** Per worker (base port, rank r uses base + r); null = KV events not published. */
  kvEventsPorts: readonly number[] | null;
  replayPorts: readonly number[] | null;
  /** `--lora-names`: adapters served as models. */
  loraNames: readonly string[];
}

/** Pure. Null when `--http-ports` is not given (the registered mode). */
export function vllmCompatPlan(c: MockerConfig): VllmCompatPlan | null {
  if (c.httpPorts === null) return null;
  const zmq = zmqPortsPlan(c);
  if (c.disaggregationMode !== 'agg')
    throw new MockerConfigError(
      '--disaggregation-mode prefill|decode cannot be used with --http-ports (aggregated engines only)',
      '--disaggregation-mode',
    );
  if (c.durableKvEvents)
    throw new MockerConfigError(
      '--durable-kv-events cannot be used with --http-ports (nothing is registered)',
      '--durable-kv-events',
    );
  if (c.mockerModelType === 'images' || c.mockerModelType === 'videos')
    throw new MockerConfigError(
      `--model-type ${c.mockerModelType} cannot be used with --http-ports (vLLM has no such HTTP API; chat and embedding engines only)`,
      '--model-type',
    );
  if (c.httpPorts.length !== c.numWorkers)
    throw new MockerConfigError(
      `--http-ports needs one port per worker (--num-workers ${c.numWorkers}), got ${c.httpPorts.length}`,
      '--http-ports',
    );
  return {
    host: c.httpHost,
    httpPorts: c.httpPorts,
    kvEventsPorts: zmq?.kvEventsPorts ?? null,
    replayPorts: zmq?.replayPorts ?? null,
    loraNames: (c.loraNames ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s.length > 0),
  };
}

export interface VllmCompatWorker {
  readonly engine: VllmSimEngine;
  readonly http: OpenAiServer;
}

export interface RunningVllmMocker {
  readonly plan: MockerPlan;
  readonly workers: readonly VllmCompatWorker[];
  /** What the process prints on stdout once ready: one entry per worker. */
  describe(): Array<{ http: string; kv_events: string[]; replay: string[] }>;
  /** Open streams get `graceMs`, then end with `engine_shutdown`; sockets close. */
  stop(graceMs?: number): Promise<void>;
}

export async function startVllmCompat(
  config: MockerConfig,
  vplan: VllmCompatPlan,
  io: { log: (line: string) => void },
): Promise<RunningVllmMocker> {
  const plan = planFromConfig(config);
  // Discovery, planes and registration play no part in this mode.
  for (const w of plan.warnings) if (!w.startsWith('discovery backend mem')) io.log(`warning: ${w}`);
  const scheduler = defaultPassScheduler();
  const workers: VllmCompatWorker[] = [];
  try {
    for (let i = 0; i < plan.numWorkers; i++) {
      if (i > 0 && plan.staggerMs > 0) await sleep(plan.staggerMs);
      else if (i === 0 && plan.startupDelayMs > 0) await sleep(plan.startupDelayMs);
      const engineCfg: Partial<EngineConfig> = { ...plan.engine, seed: i };
      const engine = await VllmSimEngine.start({
        engine: engineCfg,
        scheduler,
        zmqHost: vplan.host,
        kvEventsPort: vplan.kvEventsPorts?.[i] ?? null,
        replayPort: vplan.replayPorts?.[i] ?? null,
        onError: (e) => io.log(`kv events: ${e instanceof Error ? e.message : String(e)}`),
      });
      let http: OpenAiServer;
      try {
        const cfg = engine.engine.config;
        http = await OpenAiServer.start({
          engine,
          modelName: plan.modelName,
          host: vplan.host,
          port: vplan.httpPorts[i],
          maxModelLen: cfg.numGpuBlocks * cfg.blockSize,
          loraNames: vplan.loraNames,
          embeddingDim: plan.media?.kinds.includes('embedding') ? (plan.media.embeddingDim ?? null) : null,
        });
      } catch (e) {
        await engine.stop();
        throw e;
      }
      workers.push({ engine, http });
    }
  } catch (e) {
    await Promise.all(workers.map(async (w) => (await w.http.close(), await w.engine.stop())));
    throw e;
  }
  const describe = () =>
    workers.map((w) => ({
      http: w.http.url,
      kv_events: w.engine.kvEventsEndpoints,
      replay: w.engine.replayEndpoints,
    }));
  io.log(
    `mocker ready (vLLM-compatible): ${workers.length} engine(s) of model ${JSON.stringify(plan.modelName)}: ` +
      describe()
        .map((d) => `${d.http}${d.kv_events.length ? ` events ${d.kv_events.join(',')}` : ''}`)
        .join('; '),
  );
  let stopped: Promise<void> | null = null;
  return {
    plan,
    workers,
    describe,
    stop: (graceMs = 0) =>
      (stopped ??= (async () => {
        await waitIdle(workers, graceMs);
        await Promise.all(workers.map(async (w) => (await w.engine.stop(), await w.http.close())));
      })()),
  };
}

async function waitIdle(workers: readonly VllmCompatWorker[], graceMs: number): Promise<void> {
  const end = performance.now() + graceMs;
  while (performance.now() < end && workers.some((w) => w.engine.driver.activeRequests > 0)) await sleep(20);
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
