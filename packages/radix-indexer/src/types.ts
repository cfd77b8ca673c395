import type { RouterEvent, WorkerWithDpRank } from '@kvrouter/protocols';

/** Outcome of applying one event (label `status` of dynamo_component_kv_cache_events_applied). */
export type ApplyStatus = 'ok' | 'parent_block_not_found' | 'block_not_found' | 'invalid_block';
export type EventKind = 'stored' | 'removed' | 'cleared';

/**
 * PROTOCOL §7.1. Maps are keyed by `workerKey(w)` (`"<worker_id>:<dp_rank>"`); `workers` resolves
 * a key back to its WorkerWithDpRank. Workers with score 0 are absent from `scores`.
 */
export interface OverlapScores {
  scores: Map<string, number>;
  treeSizes: Map<string, number>;
  frequencies: number[];
  workers: Map<string, WorkerWithDpRank>;
}

export interface ApplyCounters {
  /** `${status}/${event_type}` -> count */
  counts: Map<string, number>;
}

export interface FindOptions {
  /** Stop as soon as a single worker remains (the router never asks for this). */
  earlyExitSingle?: boolean;
}

/**
 * The index interface every implementation (single-threaded, approximate, side, shared-memory pool)
 * satisfies and the conformance suite (./testing) checks. Mutations may be applied asynchronously;
 * `flush()` resolves once every mutation submitted before it is visible to `findMatches`.
 */
export interface KvIndexer {
  applyEvent(event: RouterEvent): void;
  removeWorker(workerId: bigint): void;
  removeWorkerDpRank(workerId: bigint, dpRank: number): void;
  flush(): Promise<void>;
  /** Query by local block hashes (bigints, or (lo, hi) pairs); the index derives sequence hashes. */
  findMatches(local: readonly bigint[] | Uint32Array, opts?: FindOptions): OverlapScores;
  /** Query by the router's sequence hashes ((lo, hi) pairs), the hot path. */
  findMatchesBySeq(seq: Uint32Array, opts?: FindOptions): OverlapScores;
  /** All held blocks as single-block Stored events, parents first (PROTOCOL §3.7). */
  dump(): Promise<RouterEvent[]>;
  treeSizes(): Map<string, number>;
  /** Events applied per (status, event_type), for metrics and tests. */
  appliedCounts(): Map<string, number>;
  close(): Promise<void>;
}

export type AppliedHook = (status: ApplyStatus, kind: EventKind) => void;
