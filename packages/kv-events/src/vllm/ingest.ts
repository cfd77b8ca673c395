/**
 * vLLM KV event ingestion (docs/protocol.md §4): a SUB socket on the engine's ZMQ PUB (topic ""),
 * 3-frame messages decoded and converted by `VllmKvEventDecoder`, engine sequence gaps counted
 * and, when the engine runs a replay endpoint, filled from it; the converted events go through the
 * publisher, which numbers, batches, deduplicates and republishes them (§3.4).
 */
import { Dealer, Subscriber } from 'zeromq';
import {
  DecodeError,
  VllmKvEventDecoder,
  encodeVllmReplayRequest,
  parseVllmReplayReply,
  type DecodeLimits,
  type VllmDecoderStats,
  invalidArgument,
  errorMessage,
  KvrError,
} from '@kvrouter/protocols';
import { checkPositive, checkU32 } from '../errors.js';
import type { KvEventPublisher } from '../publisher/publisher.js';

export interface VllmIngestOptions {
  /** The engine's PUB endpoint, e.g. `tcp://127.0.0.1:5557` (port offset by dp rank). */
  endpoint: string;
  publisher: KvEventPublisher;
  /** The worker's `kv_cache_block_size`. */
  kvBlockSize: number;
  /** Rank of this socket when batches do not name one; default 0. */
  dpRank?: number;
  /** The engine's ROUTER replay endpoint; gaps are then re-read from it. */
  replayEndpoint?: string | null;
  /** Wait for a replay before giving up on it; default 2000 ms. */
  replayTimeoutMs?: number;
  limits?: DecodeLimits;
  onWarning?: (message: string) => void;
  onDecodeFailure?: (err: DecodeError) => void;
  onError?: (err: unknown) => void;
}

export interface VllmIngestStats {
  messages: number;
  events: number;
  decodeFailures: number;
  replayed: number;
  replayFailures: number;
}

export class VllmZmqIngest {
  private readonly sub: Subscriber;
  private readonly decoder: VllmKvEventDecoder;
  private readonly rank: number;
  private lastSeq: bigint | null = null;
  private closed = false;
  private readonly loop: Promise<void>;
  private readonly counters: VllmIngestStats = {
    messages: 0,
    events: 0,
    decodeFailures: 0,
    replayed: 0,
    replayFailures: 0,
  };

  constructor(private readonly opts: VllmIngestOptions) {
    if (typeof opts.endpoint !== 'string' || !/^(tcp|ipc|inproc):\/\/.+/.test(opts.endpoint))
      throw invalidArgument(
        'endpoint',
        `must be a ZMQ endpoint like tcp://host:port, got ${JSON.stringify(opts.endpoint)}`,
      );
    this.rank = checkU32(opts.dpRank ?? 0, 'dpRank');
    checkPositive(opts.kvBlockSize, 'kvBlockSize');
    this.decoder = new VllmKvEventDecoder({
      kvBlockSize: opts.kvBlockSize,
      dpRank: this.rank,
      limits: opts.limits,
      onWarning: opts.onWarning,
    });
    this.sub = new Subscriber({ receiveHighWaterMark: 100_000, linger: 0 });
    this.sub.connect(opts.endpoint);
    this.sub.subscribe('');
    this.loop = this.receive();
  }

  get stats(): VllmIngestStats & VllmDecoderStats {
    return { ...this.counters, ...this.decoder.stats };
  }

  private async receive(): Promise<void> {
    while (!this.closed) {
      let frames: Buffer[];
      try {
        frames = await this.sub.receive();
      } catch (e) {
        if (!this.closed)
          this.opts.onError?.(
            new KvrError(
              'kv_events_failed',
              `vllm zmq receive failed: ${errorMessage(e)}`,
              undefined,
              undefined,
              { cause: e },
            ),
          );
        return;
      }
      try {
        await this.onMessage(frames);
      } catch (e) {
        this.opts.onError?.(e);
      }
    }
  }

  private async onMessage(frames: Buffer[]): Promise<void> {
    let decoded: ReturnType<VllmKvEventDecoder['decodeMultipart']>;
    try {
      decoded = this.decoder.decodeMultipart(frames);
    } catch (e) {
      this.decodeFailure(e);
      return;
    }
    const seq = decoded.seq;
    const last = this.lastSeq;
    // Replays stop below the message that triggered them, so a number at or below the last one
    // means the engine restarted its count: taken as is (the publisher restarts gap counting).
    if (last !== null && seq > last + 1n && this.opts.replayEndpoint) await this.replay(last + 1n, seq);
    this.publish(seq, decoded.events);
  }

  private publish(seq: bigint, events: ReturnType<VllmKvEventDecoder['decodePayload']>): void {
    this.counters.messages++;
    // Gap counting sees the sequence after any replay, so only what stayed lost is counted.
    this.opts.publisher.noteEngineSequence(this.rank, seq);
    this.lastSeq = seq;
    for (const c of events) {
      this.counters.events++;
      this.opts.publisher.engineEvent({ dp_rank: c.dp_rank, storage_tier: c.storage_tier, data: c.data });
    }
  }

  /** Re-reads `from..until-1` from the engine's replay socket; what it cannot get stays a counted gap. */
  private async replay(from: bigint, until: bigint): Promise<void> {
    const dealer = new Dealer({ linger: 0, receiveTimeout: this.opts.replayTimeoutMs ?? 2000 });
    try {
      dealer.connect(this.opts.replayEndpoint!);
      await dealer.send([Buffer.alloc(0), Buffer.from(encodeVllmReplayRequest(from))]);
      for (;;) {
        const reply = parseVllmReplayReply(await dealer.receive());
        if (reply === null) break;
        if (reply.seq >= until) continue;
        if (this.lastSeq !== null && reply.seq <= this.lastSeq) continue;
        let events;
        try {
          events = this.decoder.decodePayload(reply.payload);
        } catch (e) {
          this.decodeFailure(e);
          continue;
        }
        this.counters.replayed++;
        this.publish(reply.seq, events);
      }
    } catch (e) {
      this.counters.replayFailures++;
      this.opts.onError?.(
        new KvrError(
          'kv_events_failed',
          `vllm replay from ${from} failed: ${errorMessage(e)}`,
          undefined,
          undefined,
          { cause: e },
        ),
      );
    } finally {
      dealer.close();
    }
  }

  private decodeFailure(e: unknown): void {
    this.counters.decodeFailures++;
    const err = e instanceof DecodeError ? e : new DecodeError(errorMessage(e), { field: 'frames' });
    this.opts.onWarning?.(`vLLM message dropped: ${err.message}`);
    this.opts.onDecodeFailure?.(err);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.sub.close();
    await this.loop.catch(() => undefined);
    this.opts.publisher.flush();
  }
}
