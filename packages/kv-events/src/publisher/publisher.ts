/**
 * Worker-side KV event publisher (docs/protocol.md §3.3-§3.5): engine events in, numbered RouterEvents
 * out. One processing path: engine sequence gap detection -> dedup -> batching -> event id ->
 * local indexer + ring -> sink (an event plane or JetStream).
 *
 * Dedup runs as each event enters, batching merges what passes: a refcount decision depends only
 * on the order of events per hash, which batching keeps, so this is the same as deduplicating the
 * flushed batch and it lets a fully deduplicated Removed vanish without flushing anything.
 */
import {
  encodeRouterEvent,
  type DpRank,
  type EventId,
  type ExternalSequenceBlockHash,
  type KvCacheEventData,
  type KvCacheStoredBlockData,
  type LocalIndexerQueryRequest,
  type LocalIndexerQueryResponse,
  type RouterEvent,
  type StorageTier,
  type WorkerId,
  type Timers,
} from '@kvrouter/protocols';
import { realClock } from '@kvrouter/protocols/node';
import { checkPositive, checkU32, checkU64 } from '../errors.js';
import type { EventPlane, EventTopic } from '../plane/types.js';
import { checkInput, type EngineKvInput } from './input.js';
import { LocalIndexer } from './local-indexer.js';

/** Where numbered events go. */
export interface RouterEventSink {
  publishEvent(ev: RouterEvent): void;
  flush?(): Promise<void>;
}

/** msgpack RouterEvents on an event plane (§5.1 `kv-events`). */
export function planeSink(plane: EventPlane, topic: EventTopic): RouterEventSink {
  return {
    publishEvent: (ev) => plane.publish(topic, encodeRouterEvent(ev)),
    flush: () => plane.flush(),
  };
}

/** Ref'd real timers (a pending batch flush is work the process must finish). */
export const realTimers: Timers = realClock({ ref: true });

/** Pending blocks above this flush the batch (§3.4). */
export const MAX_BATCH_BLOCKS = 128;
/** Largest accepted `batching_timeout_ms` (§3.4). */
export const MAX_BATCHING_TIMEOUT_MS = 15_000;

export interface KvPublisherOptions {
  /** The worker's instance id (`RouterEvent.worker_id`). */
  workerId: bigint;
  sink?: RouterEventSink | null;
  /** Ranks served from the start (their query endpoints answer before any event). Default [0]. */
  dpRanks?: readonly number[];
  /** `enable_local_indexer` (§3.5); default true. */
  localIndexer?: boolean;
  /** Ring size of the local indexer; default 1024. */
  ringSize?: number;
  /** Unset/null = every event is flushed at once; else at most this long in a batch (≤ 15 000). */
  batchingTimeoutMs?: number | null;
  timers?: Timers;
  /** Engine sequence numbers skipped (counter `dynamo_component_kv_publisher_engines_dropped_events_total`). */
  onEngineDropped?: (dropped: number, dpRank: number) => void;
  /** Sink failures (the event is numbered and kept in the ring; the router recovers it). */
  onError?: (err: unknown) => void;
}

export interface PublisherStats {
  /** Numbered events emitted, all ranks. */
  events: number;
  /** Removed hashes suppressed by dedup (still referenced). */
  dedupSuppressed: number;
  /** Engine events lost before reaching the publisher (sequence gaps). */
  engineDropped: number;
}

interface Pending {
  rank: number;
  tier: StorageTier;
  kind: 'stored' | 'removed';
  parent: ExternalSequenceBlockHash | null;
  startPosition: number | null;
  blocks: KvCacheStoredBlockData[];
  hashes: ExternalSequenceBlockHash[];
}

interface RankState {
  lastId: bigint;
  local: LocalIndexer | null;
  /** tier -> external hash -> how many Stored events hold it. */
  refs: Map<StorageTier, Map<bigint, number>>;
  lastEngineSeq: bigint | null;
}

export class KvEventPublisher {
  readonly workerId: WorkerId;
  private readonly sink: RouterEventSink | null;
  private readonly local: boolean;
  private readonly ringSize: number | undefined;
  private readonly timeoutMs: number | null;
  private readonly timers: Timers;
  private readonly ranks = new Map<number, RankState>();
  private pending: Pending | null = null;
  private timer: unknown = null;
  private closed = false;
  private readonly counters: PublisherStats = { events: 0, dedupSuppressed: 0, engineDropped: 0 };

  constructor(private readonly opts: KvPublisherOptions) {
    this.workerId = checkU64(opts.workerId, 'workerId') as WorkerId;
    this.sink = opts.sink ?? null;
    this.local = opts.localIndexer ?? true;
    this.ringSize = opts.ringSize;
    const t = opts.batchingTimeoutMs ?? null;
    this.timeoutMs = t === null ? null : checkPositive(t, 'batching_timeout_ms', MAX_BATCHING_TIMEOUT_MS);
    this.timers = opts.timers ?? realTimers;
    const ranks = opts.dpRanks ?? [0];
    ranks.forEach((r, i) => checkU32(r, `dpRanks[${i}]`));
    for (const r of ranks) this.rank(r);
  }

  get stats(): PublisherStats {
    return { ...this.counters };
  }

  get dpRanks(): number[] {
    return [...this.ranks.keys()].sort((a, b) => a - b);
  }

  /** Newest id emitted for a rank (0 before the first). */
  lastEventId(dpRank = 0): bigint {
    return this.ranks.get(dpRank)?.lastId ?? 0n;
  }

  /** The rank's local indexer (null when disabled or the rank is unknown). */
  localIndexer(dpRank = 0): LocalIndexer | null {
    return this.ranks.get(dpRank)?.local ?? null;
  }

  /**
   * Input gap detection (§3.4 step 1) on the engine's own sequence numbers of one rank's stream.
   * A number at or below the previous one (engine restart, replay) restarts the count.
   */
  noteEngineSequence(dpRank: number, seq: bigint | number): void {
    checkU32(dpRank, 'dp_rank');
    const s = typeof seq === 'number' ? BigInt(checkU32(seq, 'seq')) : checkU64(seq, 'seq');
    const rs = this.rank(dpRank);
    const last = rs.lastEngineSeq;
    rs.lastEngineSeq = s;
    if (last === null || s <= last + 1n) return;
    const lost = Number(s - last - 1n);
    this.counters.engineDropped += lost;
    this.opts.onEngineDropped?.(lost, dpRank);
  }

  /**
   * One engine event. With `engineSeq` the rank's sequence is checked first (for engines that
   * number each event; vLLM numbers batches, so its listener calls `noteEngineSequence` itself).
   */
  engineEvent(input: EngineKvInput, engineSeq?: bigint | number): void {
    if (this.closed) return;
    const ev = checkInput(input);
    if (engineSeq !== undefined) this.noteEngineSequence(ev.rank, engineSeq);
    const rs = this.rank(ev.rank);
    const d = ev.data;
    if (d === 'cleared') {
      this.flush();
      rs.refs.clear();
      this.emit(ev.rank, ev.tier, 'cleared');
      return;
    }
    let refs = rs.refs.get(ev.tier);
    if (!refs) rs.refs.set(ev.tier, (refs = new Map<bigint, number>()));
    if ('stored' in d) {
      const s = d.stored;
      if (s.blocks.length === 0) return;
      for (const b of s.blocks) refs.set(b.block_hash, (refs.get(b.block_hash) ?? 0) + 1);
      const p = this.pending;
      if (
        p !== null &&
        p.kind === 'stored' &&
        p.rank === ev.rank &&
        p.tier === ev.tier &&
        s.parent_hash !== null &&
        s.parent_hash === p.blocks[p.blocks.length - 1].block_hash
      ) {
        for (const b of s.blocks) p.blocks.push(b);
      } else {
        this.flush();
        this.pending = {
          rank: ev.rank,
          tier: ev.tier,
          kind: 'stored',
          parent: s.parent_hash,
          startPosition: s.start_position ?? null,
          blocks: s.blocks.slice(),
          hashes: [],
        };
      }
    } else {
      const pass: ExternalSequenceBlockHash[] = [];
      for (const h of d.removed.block_hashes) {
        const c = refs.get(h);
        if (c === undefined) pass.push(h);
        else if (c <= 1) {
          refs.delete(h);
          pass.push(h);
        } else {
          refs.set(h, c - 1);
          this.counters.dedupSuppressed++;
        }
      }
      if (pass.length === 0) return;
      const p = this.pending;
      if (p !== null && p.kind === 'removed' && p.rank === ev.rank && p.tier === ev.tier) {
        for (const h of pass) p.hashes.push(h);
      } else {
        this.flush();
        this.pending = {
          rank: ev.rank,
          tier: ev.tier,
          kind: 'removed',
          parent: null,
          startPosition: null,
          blocks: [],
          hashes: pass,
        };
      }
    }
    const p = this.pending!;
    if (this.timeoutMs === null || p.blocks.length + p.hashes.length > MAX_BATCH_BLOCKS) this.flush();
    else if (this.timer === null) this.timer = this.timers.setTimeout(() => this.onTimer(), this.timeoutMs);
  }

  private onTimer(): void {
    this.timer = null;
    this.flush();
  }

  /** Emits the pending batch, if any. */
  flush(): void {
    if (this.timer !== null) {
      this.timers.clearTimeout(this.timer);
      this.timer = null;
    }
    const p = this.pending;
    if (p === null) return;
    this.pending = null;
    const data: KvCacheEventData =
      p.kind === 'stored'
        ? { stored: { parent_hash: p.parent, start_position: p.startPosition, blocks: p.blocks } }
        : { removed: { block_hashes: p.hashes } };
    this.emit(p.rank, p.tier, data);
  }

  private emit(rank: number, tier: StorageTier, data: KvCacheEventData): void {
    const rs = this.rank(rank);
    rs.lastId += 1n;
    const ev: RouterEvent = {
      worker_id: this.workerId,
      storage_tier: tier,
      event: { event_id: rs.lastId as EventId, data, dp_rank: rank as DpRank },
    };
    this.counters.events++;
    rs.local?.record(ev);
    if (this.sink) {
      try {
        this.sink.publishEvent(ev);
      } catch (e) {
        this.opts.onError?.(e);
      }
    }
  }

  /** §3.5 query of one rank's local indexer. */
  handleQuery(dpRank: number, req: LocalIndexerQueryRequest): LocalIndexerQueryResponse {
    const rs = this.ranks.get(dpRank);
    if (!rs) return { Error: `dp_rank ${dpRank} is not served by worker ${this.workerId}` };
    if (!rs.local)
      return { Error: `worker ${this.workerId} runs without a local indexer (enable_local_indexer=false)` };
    // What is still batched has no id yet; a query sees only numbered events.
    return rs.local.query(req);
  }

  /** Flushes the pending batch and waits for the sink. */
  async drain(): Promise<void> {
    this.flush();
    await this.sink?.flush?.();
  }

  async close(): Promise<void> {
    await this.drain();
    this.closed = true;
  }

  private rank(r: number): RankState {
    let rs = this.ranks.get(r);
    if (!rs) {
      rs = {
        lastId: 0n,
        local: this.local ? new LocalIndexer(this.workerId, r as DpRank, this.ringSize) : null,
        refs: new Map(),
        lastEngineSeq: null,
      };
      this.ranks.set(r, rs);
    }
    return rs;
  }
}
