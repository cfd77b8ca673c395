/**
 * A simulated engine that looks like a vLLM process from the outside (docs/protocol.md §4, §17
 * `--zmq-kv-events-ports` / `--zmq-replay-ports`): a `SimEngine` driven in real time whose KV events
 * leave as vLLM `KVEventBatch`es on one ZMQ PUB socket per dp rank (port base + rank), one batch per
 * scheduler pass, with an optional ROUTER replay socket per rank. No discovery, no request plane: the
 * caller serves requests (the mocker's OpenAI HTTP API) and a worker adapter relays the events.
 */
import { KvrError } from '@kvrouter/protocols';
import { SimEngine, type EngineConfig, type EngineDeps, type EngineKvEvent } from '@kvrouter/engine-sim';
import { VllmZmqPublisher, type VllmPublishEvent } from '@kvrouter/kv-events';
import { EngineDriver } from './driver.js';
import type { GenerateItem, ParsedGenerate } from '@kvrouter/protocols';
import { defaultPassScheduler, type PassScheduler } from './pass-scheduler.js';

export interface VllmSimEngineOptions {
  engine?: Partial<EngineConfig>;
  engineDeps?: Omit<EngineDeps, 'blockTokenIds'>;
  scheduler?: PassScheduler;
  defaultMaxTokens?: number;
  /** Interface the ZMQ sockets bind; default `127.0.0.1` (vLLM binds `*`). */
  zmqHost?: string;
  /** PUB base port: rank r binds base + r; 0 = OS-assigned for every rank; null = KV events not published. */
  kvEventsPort: number | null;
  /** ROUTER replay base port (same rule); null = no replay socket. */
  replayPort?: number | null;
  /** Batches kept for replay per rank (vLLM `buffer_steps`); default 10 000. */
  bufferSteps?: number;
  onError?: (err: unknown) => void;
}

function portArg(v: unknown, field: string, ranks: number): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || (v > 0 && v + ranks - 1 > 65535))
    throw new KvrError(
      'invalid_argument',
      `${field}: must be 0 or a port with room for ${ranks} rank(s), got ${String(v)}`,
      400,
      {
        field,
      },
    );
  return v;
}

/** One pass's engine events → one vLLM batch (Stored chains keep their order and parents). */
export function toVllmEvents(events: readonly EngineKvEvent[], blockSize: number): VllmPublishEvent[] {
  const out: VllmPublishEvent[] = [];
  for (const e of events) {
    const d = e.data;
    if ('removed' in d) {
      out.push({ type: 'BlockRemoved', block_hashes: d.removed.block_hashes });
      continue;
    }
    const blocks = d.stored.blocks;
    const tokens = new Array<number>(blocks.length * blockSize);
    for (let i = 0; i < blocks.length; i++) {
      const t = blocks[i].token_ids;
      if (t === undefined)
        throw new KvrError(
          'internal',
          'engine Stored block without token_ids (SimEngine needs blockTokenIds)',
          500,
        );
      for (let k = 0; k < blockSize; k++) tokens[i * blockSize + k] = t[k];
    }
    out.push({
      type: 'BlockStored',
      block_hashes: blocks.map((b) => b.block_hash),
      parent_block_hash: d.stored.parent_hash,
      token_ids: tokens,
      block_size: blockSize,
    });
  }
  return out;
}

export class VllmSimEngine {
  private stopped = false;

  private constructor(
    readonly engine: SimEngine,
    readonly driver: EngineDriver,
    /** Per dp rank; empty when KV events are not published. */
    readonly publishers: readonly VllmZmqPublisher[],
  ) {}

  static async start(o: VllmSimEngineOptions): Promise<VllmSimEngine> {
    const engine = new SimEngine(o.engine ?? {}, { ...o.engineDeps, blockTokenIds: true });
    const cfg = engine.config;
    const ranks = cfg.dataParallelSize;
    const host = o.zmqHost ?? '127.0.0.1';
    const pubs: VllmZmqPublisher[] = [];
    try {
      if (o.kvEventsPort !== null) {
        const base = portArg(o.kvEventsPort, 'kvEventsPort', ranks);
        const replay =
          o.replayPort === undefined || o.replayPort === null
            ? null
            : portArg(o.replayPort, 'replayPort', ranks);
        for (let r = 0; r < ranks; r++) {
          pubs.push(
            await VllmZmqPublisher.bind({
              endpoint: `tcp://${host}:${base === 0 ? 0 : base + r}`,
              replayEndpoint: replay === null ? null : `tcp://${host}:${replay === 0 ? 0 : replay + r}`,
              dataParallelRank: r,
              bufferSteps: o.bufferSteps,
              onError: o.onError,
            }),
          );
        }
      }
    } catch (e) {
      await Promise.all(pubs.map((p) => p.close()));
      throw e;
    }
    const bs = cfg.blockSize;
    const driver = new EngineDriver(engine, {
      scheduler: o.scheduler ?? defaultPassScheduler(),
      defaultMaxTokens: o.defaultMaxTokens,
      hooks: {
        onKvEvents: (evs) => {
          if (pubs.length === 0 || evs.length === 0) return;
          // A pass belongs to one rank, but group anyway: each rank has its own socket and numbering.
          const rank = evs[0].dp_rank;
          if (evs.every((e) => e.dp_rank === rank)) pubs[rank].publish(toVllmEvents(evs, bs));
          else
            for (let r = 0; r < pubs.length; r++) {
              const mine = evs.filter((e) => e.dp_rank === r);
              if (mine.length > 0) pubs[r].publish(toVllmEvents(mine, bs));
            }
        },
      },
    });
    return new VllmSimEngine(engine, driver, pubs);
  }

  get kvEventsEndpoints(): string[] {
    return this.publishers.map((p) => p.endpoint);
  }

  get replayEndpoints(): string[] {
    return this.publishers.flatMap((p) => (p.replayEndpoint === null ? [] : [p.replayEndpoint]));
  }

  submit(req: ParsedGenerate, signal?: AbortSignal): AsyncIterable<GenerateItem> {
    return this.driver.submit(req, signal);
  }

  /** Ends open streams with `engine_shutdown`, flushes and closes the sockets. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.driver.stop(new KvrError('engine_shutdown', 'engine shut down', 503));
    await Promise.all(this.publishers.map((p) => p.close()));
  }
}
