/**
 * The engine side of docs/protocol.md §4: publishes KV events the way vLLM's `ZmqEventPublisher` does, so
 * anything that ingests a real vLLM (our `VllmZmqIngest`, upstream's listener) can ingest this too.
 * PUB socket, 3 frames `[topic, seq (8 B BE), msgpack KVEventBatch]`, seq from 0 per socket; the
 * batch in msgspec `array_like` form `[ts, [event, ...], data_parallel_rank]` with tagged-array events
 * (the vLLM 0.10/0.11 layout):
 *   `["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium, lora_name]`
 *   `["BlockRemoved", block_hashes, medium]`, `["AllBlocksCleared"]`.
 * Hashes are unsigned 64-bit ints. An optional ROUTER socket answers replay requests: 8-byte BE start
 * seq in, `['', seq, payload]` for every buffered batch from there, then `['', -1 (all ones), '']`.
 */
import { Dealer, Publisher, Router } from 'zeromq';
import {
  beU64,
  encodeMsgpack,
  encodeVllmReplayRequest,
  parseVllmReplayReply,
  invalidArgument,
  errorMessage,
  KvrError,
} from '@kvrouter/protocols';
import { checkU32, checkU64 } from '../errors.js';

export type VllmPublishEvent =
  | {
      type: 'BlockStored';
      block_hashes: readonly bigint[];
      parent_block_hash: bigint | null;
      /** Tokens of every stored block, block after block (`block_hashes.length × block_size`). */
      token_ids: ArrayLike<number>;
      block_size: number;
      /** `GPU` when absent. */
      medium?: string | null;
      lora_name?: string | null;
    }
  | { type: 'BlockRemoved'; block_hashes: readonly bigint[]; medium?: string | null }
  | { type: 'AllBlocksCleared' };

export interface VllmZmqPublisherOptions {
  /** PUB bind address, e.g. `tcp://*:5557` or `tcp://127.0.0.1:0` (OS-assigned port). */
  endpoint: string;
  /** ROUTER bind address for replays; null = none. */
  replayEndpoint?: string | null;
  /** Batches kept for replay (vLLM `buffer_steps`); default 10 000. */
  bufferSteps?: number;
  /** `data_parallel_rank` written into every batch; null (default) leaves it to the subscriber's config. */
  dataParallelRank?: number | null;
  /** Topic frame; default `""` (vLLM's default topic). */
  topic?: string;
  /** Batch timestamp in seconds; default wall clock (vLLM uses `time.time()`). */
  now?: () => number;
  onError?: (err: unknown) => void;
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const u64Out = (v: bigint): number | bigint => (v <= MAX_SAFE ? Number(v) : v);
const END = Buffer.alloc(8, 0xff);
const EMPTY = Buffer.alloc(0);

export class VllmZmqPublisher {
  private nextSeq = 0n;
  /** Replay buffer: a circular array of the last `bufferSteps` payloads; slot of seq = seq mod size. */
  private readonly ring: Array<Buffer | undefined>;
  private readonly queue: Buffer[][] = [];
  private draining: Promise<void> | null = null;
  private closed = false;
  private readonly topic: Buffer;
  private readonly rank: number | null;
  private readonly bufferSteps: number;
  private replayLoop: Promise<void> | null = null;

  private constructor(
    private readonly pub: Publisher,
    private readonly router: Router | null,
    readonly endpoint: string,
    readonly replayEndpoint: string | null,
    private readonly opts: VllmZmqPublisherOptions,
  ) {
    this.topic = Buffer.from(opts.topic ?? '', 'utf8');
    this.rank =
      opts.dataParallelRank === undefined || opts.dataParallelRank === null ? null : opts.dataParallelRank;
    this.bufferSteps = opts.bufferSteps ?? 10_000;
    this.ring = new Array<Buffer | undefined>(this.bufferSteps);
    if (router) this.replayLoop = this.serveReplays(router);
  }

  /** Binds both sockets; `endpoint` / `replayEndpoint` are then the bound addresses (real ports). */
  static async bind(opts: VllmZmqPublisherOptions): Promise<VllmZmqPublisher> {
    const ep = /^(tcp|ipc|inproc):\/\/.+/;
    if (typeof opts.endpoint !== 'string' || !ep.test(opts.endpoint))
      throw invalidArgument(
        'endpoint',
        `must be a ZMQ endpoint like tcp://*:5557, got ${JSON.stringify(opts.endpoint)}`,
      );
    const replay = opts.replayEndpoint ?? null;
    if (replay !== null && (typeof replay !== 'string' || !ep.test(replay)))
      throw invalidArgument(
        'replayEndpoint',
        `must be a ZMQ endpoint like tcp://*:5558, got ${JSON.stringify(replay)}`,
      );
    if (opts.dataParallelRank !== undefined && opts.dataParallelRank !== null)
      checkU32(opts.dataParallelRank, 'dataParallelRank');
    const steps = opts.bufferSteps ?? 10_000;
    if (!Number.isInteger(steps) || steps < 0)
      throw invalidArgument('bufferSteps', `must be an integer >= 0, got ${steps}`);
    const pub = new Publisher({ sendHighWaterMark: 100_000, linger: 0 });
    let router: Router | null = null;
    try {
      await pub.bind(opts.endpoint);
      if (replay !== null) {
        router = new Router({ linger: 0 });
        await router.bind(replay);
      }
    } catch (e) {
      pub.close();
      router?.close();
      throw invalidArgument(
        replay !== null && router !== null ? 'replayEndpoint' : 'endpoint',
        `cannot bind: ${errorMessage(e)}`,
      );
    }
    return new VllmZmqPublisher(pub, router, pub.lastEndpoint!, router?.lastEndpoint ?? null, opts);
  }

  /** Sequence number the next batch gets. */
  get sequence(): bigint {
    return this.nextSeq;
  }

  /** Encodes one batch, keeps it for replay and queues it on the PUB socket; returns its seq. */
  publish(events: readonly VllmPublishEvent[]): bigint {
    // Everything is checked before the batch takes a sequence number.
    const wire = events.map(toWire);
    const ts = (this.opts.now ?? (() => Date.now() / 1000))();
    const payload = Buffer.from(encodeMsgpack([ts, wire, this.rank]));
    const seq = this.nextSeq++;
    if (this.bufferSteps > 0) {
      this.ring[Number(seq % BigInt(this.bufferSteps))] = payload;
    }
    if (!this.closed) {
      this.queue.push([this.topic, Buffer.from(beU64(seq)), payload]);
      this.draining ??= this.drain();
    }
    return seq;
  }

  private async drain(): Promise<void> {
    try {
      while (this.queue.length > 0 && !this.closed) {
        const batch = this.queue.splice(0);
        for (const frames of batch) {
          if (this.closed) return;
          await this.pub.send(frames);
        }
      }
    } catch (e) {
      this.queue.length = 0;
      if (!this.closed)
        this.opts.onError?.(
          new KvrError(
            'kv_events_failed',
            `vllm zmq publish failed: ${errorMessage(e)}`,
            undefined,
            undefined,
            { cause: e },
          ),
        );
    } finally {
      this.draining = null;
      if (this.queue.length > 0 && !this.closed) this.draining = this.drain();
    }
  }

  async flush(): Promise<void> {
    while (this.draining) await this.draining;
  }

  private async serveReplays(router: Router): Promise<void> {
    try {
      for await (const frames of router) {
        // [identity, '', start] from a DEALER / REQ; [identity, start] from a bare DEALER.
        const id = frames[0];
        const start = frames[frames.length - 1];
        if (frames.length < 2 || start.length !== 8) {
          this.opts.onError?.(
            new KvrError('protocol_error', `vllm replay: malformed request of ${frames.length} frames`),
          );
          continue;
        }
        const from = start.readBigUInt64BE(0);
        // Snapshot the range first, so batches published while we send do not interleave with the replay.
        const next = this.nextSeq;
        const oldest = next - BigInt(Math.min(this.bufferSteps, Number(next)));
        const out: Array<[bigint, Buffer]> = [];
        for (let q = from > oldest ? from : oldest; q < next; q++)
          out.push([q, this.ring[Number(q % BigInt(this.bufferSteps))]!]);
        for (const [q, payload] of out) await router.send([id, EMPTY, Buffer.from(beU64(q)), payload]);
        await router.send([id, EMPTY, END, EMPTY]);
      }
    } catch (e) {
      if (!this.closed)
        this.opts.onError?.(
          new KvrError(
            'kv_events_failed',
            `vllm replay socket failed: ${errorMessage(e)}`,
            undefined,
            undefined,
            { cause: e },
          ),
        );
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await this.flush();
    this.closed = true;
    this.pub.close();
    this.router?.close();
    await this.replayLoop;
  }
}

function hashes(v: unknown, field: string): Array<number | bigint> {
  if (!Array.isArray(v)) throw invalidArgument(field, 'must be an array of u64 bigints');
  return v.map((h, i) => u64Out(checkU64(h, `${field}[${i}]`)));
}

function toWire(e: VllmPublishEvent, i: number): unknown[] {
  switch (e.type) {
    case 'BlockStored': {
      const bs = e.block_size;
      if (!Number.isInteger(bs) || bs < 1)
        throw invalidArgument(`events[${i}].block_size`, `must be an integer >= 1, got ${bs}`);
      // vLLM sends exactly the stored blocks' tokens; a consumer reads block k from [k·bs, (k+1)·bs).
      if (e.token_ids.length !== e.block_hashes.length * bs)
        throw invalidArgument(
          `events[${i}].token_ids`,
          `must hold block_hashes.length × block_size = ${e.block_hashes.length * bs} tokens, got ${e.token_ids.length}`,
        );
      return [
        'BlockStored',
        hashes(e.block_hashes, `events[${i}].block_hashes`),
        e.parent_block_hash === null
          ? null
          : u64Out(checkU64(e.parent_block_hash, `events[${i}].parent_block_hash`)),
        Array.from(e.token_ids),
        e.block_size,
        null,
        e.medium ?? 'GPU',
        e.lora_name ?? null,
      ];
    }
    case 'BlockRemoved':
      return ['BlockRemoved', hashes(e.block_hashes, `events[${i}].block_hashes`), e.medium ?? 'GPU'];
    case 'AllBlocksCleared':
      return ['AllBlocksCleared'];
    default:
      throw invalidArgument(
        `events[${i}].type`,
        `unknown event type ${JSON.stringify((e as { type?: unknown }).type)}`,
      );
  }
}

/**
 * Client side of the replay protocol (tools, tests, health checks): every batch the engine still
 * buffers from `from` on, as raw `(seq, payload)` pairs; rejects after `timeoutMs` of silence.
 */
export async function readVllmReplay(
  endpoint: string,
  from: bigint,
  timeoutMs = 2000,
): Promise<Array<{ seq: bigint; payload: Uint8Array }>> {
  const dealer = new Dealer({ linger: 0, receiveTimeout: timeoutMs });
  try {
    dealer.connect(endpoint);
    await dealer.send([EMPTY, Buffer.from(encodeVllmReplayRequest(from))]);
    const out: Array<{ seq: bigint; payload: Uint8Array }> = [];
    for (;;) {
      const r = parseVllmReplayReply(await dealer.receive());
      if (r === null) return out;
      out.push(r);
    }
  } finally {
    dealer.close();
  }
}
