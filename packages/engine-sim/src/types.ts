import type { ExternalSequenceBlockHash, LocalBlockHash } from '@kvrouter/protocols';

export interface EngineRequest {
  /** Unique among the engine's live requests. */
  id: string;
  /** Prompt token ids (copied on enqueue; the caller may reuse its buffer). */
  tokenIds: Uint32Array | readonly number[];
  /** Output length; the request finishes with reason `length` after this many tokens (EOS ignored). */
  maxTokens: number;
  /** Data-parallel rank that serves it; chosen by the caller (the router's pick). Default 0. */
  dpRank?: number;
  /** LoRA adapter: changes the block-hash seed (§2.1), so it shares cache only with the same adapter. */
  loraName?: string;
  /**
   * Disaggregated decode: the prompt's KV arrives from a prefill peer. At first admission every
   * prompt block is allocated as received (Stored events as usual) and only the last prompt token
   * is computed, as a decode step; no prefill time is paid. A recompute after preemption is a normal prefill.
   */
  kvTransferred?: boolean;
}

export interface EmittedToken {
  requestId: string;
  tokenIds: number[];
  /** Set on the request's last token. */
  finishReason?: 'length';
  /** Present on the first token only: prompt tokens served from the prefix cache at first admission. */
  cachedTokens?: number;
  /** On the last token, with `EngineConfig.reasoning`: the request's reasoning tokens, markers included. */
  reasoningTokens?: number;
}

// Shapes of docs/protocol.md §3.1 (`KvCacheEventData` minus `cleared`, which this engine never emits), so a
// record's `data` is assignable to the protocols type. `block_hash` is the engine's sequence hash (§17).
export interface EngineStoredBlock {
  block_hash: ExternalSequenceBlockHash;
  tokens_hash: LocalBlockHash;
  mm_extra_info: null;
  /** The block's tokens, only with `EngineDeps.blockTokenIds` (vLLM `BlockStored.token_ids` needs them). */
  token_ids?: Uint32Array;
}

export interface EngineStoreData {
  parent_hash: ExternalSequenceBlockHash | null;
  /** Index of `blocks[0]` in its request's block table. */
  start_position: number | null;
  blocks: EngineStoredBlock[];
}

export interface EngineRemoveData {
  block_hashes: ExternalSequenceBlockHash[];
}

export type EngineKvEventData = { stored: EngineStoreData } | { removed: EngineRemoveData };

export interface EngineKvEvent {
  /** The engine's raw sequence number per dp rank: 1, 2, 3, … without gaps (input to §3.4 gap detection). */
  event_id: number;
  dp_rank: number;
  data: EngineKvEventData;
}

/** What a worker publishes as `ActiveLoad` (§5.5, §17): both fields = active pool size in blocks. */
export interface EngineLoad {
  dp_rank: number;
  kv_used_blocks: number;
  active_decode_blocks: number;
}

export interface StepResult {
  dpRank: number;
  /** Time the pass takes; the driver makes its results visible at `now + durationMs`. 0 when idle. */
  durationMs: number;
  /** True when nothing was scheduled: the driver should wait for the next enqueue. */
  idle: boolean;
  /** New (non-cached) prompt tokens computed in this pass (`x` of the prefill polynomial). */
  prefillTokens: number;
  /** Requests that decoded one token in this pass. */
  decodeRequests: number;
  /** Requests preempted in this pass (their blocks were released; they wait to be recomputed). */
  preempted: number;
  emitted: EmittedToken[];
  kvEvents: EngineKvEvent[];
  load: EngineLoad;
  /** Whether `load` differs from the previous pass's (workers publish only on change). */
  loadChanged: boolean;
}

export interface EngineStats {
  passes: number;
  admitted: number;
  /** Prompt tokens of first admissions (recomputes after preemption are not counted again). */
  promptTokens: number;
  /** Of those, tokens served from the prefix cache: the KV hit rate is cachedTokens / promptTokens. */
  cachedTokens: number;
  prefillTokensComputed: number;
  decodeTokens: number;
  preemptions: number;
  storedBlocks: number;
  evictedBlocks: number;
  finished: number;
  cancelled: number;
  /** Reasoning tokens (markers included) of finished requests, with `EngineConfig.reasoning`. */
  reasoningTokens: number;
}
