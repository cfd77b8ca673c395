/**
 * Metric names and label values of PROTOCOL §16, in one place so dashboards, tests and the README
 * can be checked against a single list.
 */

export const DEFAULT_FRONTEND_PREFIX = 'dynamo_frontend';
/** docs/configuration.md `--metrics-prefix` range. */
export const PREFIX_RE = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;

/** Frontend request metrics: full name = `${prefix}_${suffix}`. */
export const FRONTEND = Object.freeze({
  requestsTotal: 'requests_total',
  inflightRequests: 'inflight_requests',
  queuedRequests: 'queued_requests',
  disconnectedClients: 'disconnected_clients',
  requestDurationSeconds: 'request_duration_seconds',
  inputSequenceTokens: 'input_sequence_tokens',
  outputSequenceTokens: 'output_sequence_tokens',
  timeToFirstTokenSeconds: 'time_to_first_token_seconds',
  interTokenLatencySeconds: 'inter_token_latency_seconds',
  outputTokensTotal: 'output_tokens_total',
  cachedTokens: 'cached_tokens',
  kvHitRate: 'kv_hit_rate',
  tokenizerLatencyMs: 'tokenizer_latency_ms',
  modelTotalKvBlocks: 'model_total_kv_blocks',
  modelMaxNumSeqs: 'model_max_num_seqs',
  modelMaxNumBatchedTokens: 'model_max_num_batched_tokens',
  modelContextLength: 'model_context_length',
  modelKvCacheBlockSize: 'model_kv_cache_block_size',
  modelMigrationLimit: 'model_migration_limit',
  modelMigrationTotal: 'model_migration_total',
  modelMigrationMaxSeqLenExceededTotal: 'model_migration_max_seq_len_exceeded_total',
  modelCancellationTotal: 'model_cancellation_total',
  modelRejectionTotal: 'model_rejection_total',
  stageDurationSeconds: 'stage_duration_seconds',
  internalErrorsTotal: 'internal_errors_total',
});

/** Router request metrics (labels `dynamo_namespace`, `dynamo_component`, `dynamo_endpoint`). */
export const ROUTER = Object.freeze({
  requestsTotal: 'dynamo_component_router_requests_total',
  timeToFirstTokenSeconds: 'dynamo_component_router_time_to_first_token_seconds',
  interTokenLatencySeconds: 'dynamo_component_router_inter_token_latency_seconds',
  inputSequenceTokens: 'dynamo_component_router_input_sequence_tokens',
  outputSequenceTokens: 'dynamo_component_router_output_sequence_tokens',
  kvHitRate: 'dynamo_component_router_kv_hit_rate',
  kvTransferEstimatedLatencySeconds: 'dynamo_component_router_kv_transfer_estimated_latency_seconds',
  remoteIndexerQueryFailuresTotal: 'dynamo_component_router_remote_indexer_query_failures_total',
  remoteIndexerWriteFailuresTotal: 'dynamo_component_router_remote_indexer_write_failures_total',
});
export const ROUTER_LABELS = ['dynamo_namespace', 'dynamo_component', 'dynamo_endpoint'] as const;

/** Phases of one routing decision, the `<phase>` of `dynamo_router_overhead_<phase>_ms`. */
export const OVERHEAD_PHASES = [
  'block_hashing',
  'seq_hashing',
  'indexer_find_matches',
  'scheduling',
  'total',
] as const;
export type OverheadPhase = (typeof OVERHEAD_PHASES)[number];
export const overheadName = (p: OverheadPhase): string => `dynamo_router_overhead_${p}_ms`;

export const WORKER = Object.freeze({
  activeDecodeBlocks: 'dynamo_frontend_worker_active_decode_blocks',
  activePrefillTokens: 'dynamo_frontend_worker_active_prefill_tokens',
  lastTimeToFirstTokenSeconds: 'dynamo_frontend_worker_last_time_to_first_token_seconds',
  lastInputSequenceTokens: 'dynamo_frontend_worker_last_input_sequence_tokens',
  lastInterTokenLatencySeconds: 'dynamo_frontend_worker_last_inter_token_latency_seconds',
});
export const WORKER_LABELS = ['worker_id', 'dp_rank', 'worker_type'] as const;
export const QUEUE_PENDING = 'dynamo_frontend_router_queue_pending_requests';

export const KV_EVENTS_APPLIED = 'dynamo_component_kv_cache_events_applied';
export const PUBLISHER_DROPPED = 'dynamo_component_kv_publisher_engines_dropped_events_total';

// ---- label values

export const REQUEST_TYPES = ['stream', 'unary'] as const;
export type RequestType = (typeof REQUEST_TYPES)[number];
export const STATUSES = ['success', 'error'] as const;
export type RequestStatus = (typeof STATUSES)[number];
/** `""` is the value of successful requests. */
export const ERROR_TYPES = [
  '',
  'validation',
  'not_found',
  'overload',
  'cancelled',
  'response_timeout',
  'internal',
  'not_implemented',
] as const;
export type ErrorType = (typeof ERROR_TYPES)[number];
export const MIGRATION_TYPES = ['new_request', 'ongoing_request'] as const;
export type MigrationType = (typeof MIGRATION_TYPES)[number];
export const STAGES = ['preprocess', 'route', 'dispatch'] as const;
export type Stage = (typeof STAGES)[number];
/** Implementation choice (§16 leaves `operation` open): upstream's two values. */
export const TOKENIZER_OPERATIONS = ['tokenize', 'detokenize'] as const;
export type TokenizerOperation = (typeof TOKENIZER_OPERATIONS)[number];
export const WORKER_TYPES = ['prefill', 'decode'] as const;
export type WorkerType = (typeof WORKER_TYPES)[number];
export const APPLY_STATUSES = ['ok', 'parent_block_not_found', 'block_not_found', 'invalid_block'] as const;
export const EVENT_TYPES = ['stored', 'removed', 'cleared'] as const;

/**
 * Truth-checked routing (issue 19; kvrouter's names, not in §16): per model the mode (one series
 * per mode, 1 for the current one), per worker the drift score and whether it is routed on load
 * alone, and the number of requests whose engine-reported cached tokens were compared.
 */
export const TRUTH = Object.freeze({
  mode: 'dynamo_frontend_router_truth_mode',
  drift: 'dynamo_frontend_router_truth_drift',
  loadOnly: 'dynamo_frontend_router_truth_load_only',
  checksTotal: 'dynamo_frontend_router_truth_checks_total',
});
export const TRUTH_MODE_VALUES = ['exact', 'degraded', 'fallback'] as const;
export type TruthModeValue = (typeof TRUTH_MODE_VALUES)[number];

/**
 * Bounded memory (issue 17; kvrouter's names): every cache and table of a long-running process
 * reports its size and its limit under `table` (docs/memory.md lists them), and the entries it
 * dropped to stay within the limit.
 */
export const MEMORY = Object.freeze({
  entries: 'dynamo_frontend_table_entries',
  limit: 'dynamo_frontend_table_limit',
  evictedTotal: 'dynamo_frontend_table_evicted_total',
});
