/**
 * KV event model and the other event-plane / indexer wire messages (docs/protocol.md §3, §5, §7.1, §7.7).
 * Field names are the wire names (snake_case) so a decoded value is the message itself. Identifiers and
 * hashes are branded bigints (§1); counts that can never approach 2^53 (block and token counts, ms
 * timestamps) are plain numbers.
 */
import type {
  DpRank,
  EventId,
  ExternalSequenceBlockHash,
  LocalBlockHash,
  RouterId,
  SequenceHash,
  WorkerId,
  WorkerWithDpRank,
} from '../ids.js';

// ---------------------------------------------------------------------------------------------------
// §3.1 KV events

export type StorageTier = 'device' | 'host_pinned' | 'disk' | 'external';
export const STORAGE_TIERS: readonly StorageTier[] = ['device', 'host_pinned', 'disk', 'external'];

/** One multimodal object referenced by a block; offsets are block-relative `[start, end)` token ranges. */
export interface BlockMmObjectInfo {
  mm_hash: bigint;
  offsets: Array<[number, number]>;
}

export interface BlockExtraInfo {
  mm_objects: BlockMmObjectInfo[];
}

export interface KvCacheStoredBlockData {
  /** Engine-reported key, opaque and scoped per (worker, dp_rank). */
  block_hash: ExternalSequenceBlockHash;
  tokens_hash: LocalBlockHash;
  mm_extra_info: BlockExtraInfo | null;
}

export interface KvCacheStoreData {
  /** External hash of the parent of `blocks[0]`; null = root. */
  parent_hash: ExternalSequenceBlockHash | null;
  /** Absolute block index of `blocks[0]`; informational. */
  start_position: number | null;
  blocks: KvCacheStoredBlockData[];
}

export interface KvCacheRemoveData {
  block_hashes: ExternalSequenceBlockHash[];
}

export type KvCacheEventData = { stored: KvCacheStoreData } | { removed: KvCacheRemoveData } | 'cleared';

export interface KvCacheEvent {
  event_id: EventId;
  data: KvCacheEventData;
  dp_rank: DpRank;
}

export interface RouterEvent {
  worker_id: WorkerId;
  storage_tier: StorageTier;
  event: KvCacheEvent;
}

export const isStored = (d: KvCacheEventData): d is { stored: KvCacheStoreData } =>
  typeof d === 'object' && 'stored' in d;
export const isRemoved = (d: KvCacheEventData): d is { removed: KvCacheRemoveData } =>
  typeof d === 'object' && 'removed' in d;
export const isCleared = (d: KvCacheEventData): d is 'cleared' => d === 'cleared';

/** `event_type` label value of `dynamo_component_kv_cache_events_applied` (§16). */
export function eventKind(d: KvCacheEventData): 'stored' | 'removed' | 'cleared' {
  return d === 'cleared' ? 'cleared' : 'stored' in d ? 'stored' : 'removed';
}

// ---------------------------------------------------------------------------------------------------
// §3.5 Worker local indexer query (endpoint `worker_kv_indexer_query_dp{rank}`)

export interface LocalIndexerQueryRequest {
  worker_id: WorkerId;
  /** Inclusive; null = full dump requested. */
  start_event_id: EventId | null;
  /** Inclusive; null = newest. */
  end_event_id: EventId | null;
}

export type LocalIndexerQueryResponse =
  | { Events: { events: RouterEvent[]; last_event_id: EventId } }
  | { TreeDump: { events: RouterEvent[]; last_event_id: EventId } }
  | { TooNew: { requested_start: EventId | null; requested_end: EventId | null; newest_available: EventId } }
  | { InvalidRange: { start_id: EventId; end_id: EventId } }
  | { Error: string };

// ---------------------------------------------------------------------------------------------------
// §5.2 Event-plane envelope

export interface EventEnvelope {
  publisher_id: bigint;
  /** Per-publisher counter. */
  sequence: bigint;
  /** ms since the Unix epoch. */
  published_at: number;
  topic: string;
  /** msgpack of the carried message (RouterEvent, ActiveSequenceEvent, ActiveLoad). */
  payload: Uint8Array;
}

// ---------------------------------------------------------------------------------------------------
// §5.4 Replica sync

export interface PrefillDuration {
  secs: number;
  nanos: number;
}

export interface PrefillLoadHint {
  initial_effective_prefill_tokens: number;
  expected_prefill_duration: PrefillDuration | null;
}

export interface AddRequestData {
  /** Sequence hashes of the prompt (or fresh random ones when KV reuse is not assumed); null = untracked. */
  token_sequence: SequenceHash[] | null;
  track_prefill_tokens: boolean;
  expected_output_tokens: number | null;
  prefill_load_hint: PrefillLoadHint | null;
}

export type ActiveSequenceEventData = { AddRequest: AddRequestData } | 'Free' | 'MarkPrefillCompleted';

export interface ActiveSequenceEvent {
  request_id: string;
  worker: WorkerWithDpRank;
  data: ActiveSequenceEventData;
  router_id: RouterId;
  lora_name?: string;
}

// ---------------------------------------------------------------------------------------------------
// §5.5 Load metrics

export interface ActiveLoad {
  worker_id: WorkerId;
  dp_rank: DpRank;
  active_decode_blocks: number | null;
  active_prefill_tokens: number | null;
  kv_used_blocks: number | null;
}

// ---------------------------------------------------------------------------------------------------
// §7.1 / §7.7 Overlap scores on the wire and the remote (served) indexer

/** `OverlapScores` with its maps flattened to `[WorkerWithDpRank, value]` pairs. */
export interface WireOverlapScores {
  scores: Array<[WorkerWithDpRank, number]>;
  frequencies: number[];
  tree_sizes: Array<[WorkerWithDpRank, number]>;
}

export interface RemoteIndexerQuery {
  model_name: string;
  /** Local block hashes of the query. */
  block_hashes: LocalBlockHash[];
}

export type RemoteIndexerQueryResponse = { Scores: WireOverlapScores } | { Error: string };

export interface RemoteIndexerRecordRequest {
  model_name: string;
  worker: WorkerWithDpRank;
  local_hashes: LocalBlockHash[];
  sequence_hashes: SequenceHash[];
}

export type RemoteIndexerRecordResponse = 'Recorded' | { Error: string };
