/**
 * Upstream's registered mocker with `--zmq-kv-events-ports`: the simulated engine publishes its KV
 * events the way vLLM does (ZMQ PUB per dp rank on port base + rank, optional replay ROUTER), and the
 * worker reads them back through the same `VllmZmqIngest` a real vLLM worker uses, into its
 * `KvEventPublisher` (ids, batching, dedup, local indexer). So one mocker process exercises the whole
 * vLLM event path (§4 → §3.4) while staying a normal registered worker.
 */
import type { EngineKvEvent, SimEngine } from '@kvrouter/engine-sim';
import { VllmZmqIngest, VllmZmqPublisher, type KvEventPublisher } from '@kvrouter/kv-events';
import { toVllmEvents } from './vllm-engine.js';

/** What a `SimWorker` hands its engine's KV events to instead of publishing them directly. */
export interface KvEventRelay {
  push(events: readonly EngineKvEvent[]): void;
  /** Flushes what was pushed through to the publisher as far as possible, then closes. */
  close(): Promise<void>;
}

export interface VllmRelayOptions {
  /** Interface of the PUB / ROUTER sockets; default `127.0.0.1`. */
  host?: string;
  /** Base port (rank r binds base + r); 0 = OS-assigned. */
  kvEventsPort: number;
  /** Replay ROUTER base port; null = none (engine gaps are only counted). */
  replayPort?: number | null;
  /** Wait after the ingest connects, before the first pass (PUB/SUB slow joiner). Default 200 ms. */
  joinDelayMs?: number;
  onError?: (err: unknown) => void;
}

export class VllmRelay implements KvEventRelay {
  private constructor(
    private readonly pubs: readonly VllmZmqPublisher[],
    private readonly ingests: readonly VllmZmqIngest[],
    private readonly blockSize: number,
  ) {}

  /** A factory for `SimWorkerOptions.kvEventRelay`. */
  static factory(
    o: VllmRelayOptions,
  ): (publisher: KvEventPublisher, engine: SimEngine) => Promise<VllmRelay> {
    return (publisher, engine) => VllmRelay.start(o, publisher, engine);
  }

  static async start(
    o: VllmRelayOptions,
    publisher: KvEventPublisher,
    engine: SimEngine,
  ): Promise<VllmRelay> {
    const host = o.host ?? '127.0.0.1';
    const cfg = engine.config;
    const pubs: VllmZmqPublisher[] = [];
    const ingests: VllmZmqIngest[] = [];
    try {
      for (let r = 0; r < cfg.dataParallelSize; r++) {
        const at = (base: number) => `tcp://${host}:${base === 0 ? 0 : base + r}`;
        const p = await VllmZmqPublisher.bind({
          endpoint: at(o.kvEventsPort),
          replayEndpoint: o.replayPort === undefined || o.replayPort === null ? null : at(o.replayPort),
          dataParallelRank: r,
          onError: o.onError,
        });
        pubs.push(p);
        // A wildcard bind is reached on loopback from inside the process.
        const local = (ep: string) => ep.replace(/^tcp:\/\/(0\.0\.0\.0|\*)/, 'tcp://127.0.0.1');
        ingests.push(
          new VllmZmqIngest({
            endpoint: local(p.endpoint),
            replayEndpoint: p.replayEndpoint === null ? null : local(p.replayEndpoint),
            publisher,
            kvBlockSize: cfg.blockSize,
            dpRank: r,
            onError: o.onError,
          }),
        );
      }
      await new Promise((res) => setTimeout(res, o.joinDelayMs ?? 200));
    } catch (e) {
      for (const g of ingests) await g.close();
      for (const p of pubs) await p.close();
      throw e;
    }
    return new VllmRelay(pubs, ingests, cfg.blockSize);
  }

  get kvEventsEndpoints(): string[] {
    return this.pubs.map((p) => p.endpoint);
  }

  get replayEndpoints(): string[] {
    return this.pubs.flatMap((p) => (p.replayEndpoint === null ? [] : [p.replayEndpoint]));
  }

  push(events: readonly EngineKvEvent[]): void {
    for (let r = 0; r < this.pubs.length; r++) {
      const mine = events.filter((e) => e.dp_rank === r);
      if (mine.length > 0) this.pubs[r].publish(toVllmEvents(mine, this.blockSize));
    }
  }

  async close(): Promise<void> {
    await Promise.all(this.pubs.map((p) => p.flush()));
    // Loopback delivery of the last batches.
    await new Promise((res) => setTimeout(res, 20));
    for (const g of this.ingests) await g.close();
    for (const p of this.pubs) await p.close();
  }
}
