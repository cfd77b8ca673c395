/**
 * THE table: every flag and environment variable of every kvrouter app (docs/configuration.md, PROTOCOL §17).
 * Nothing else in the repo defines a flag; CLI parsing, env resolution, help, docs and the config
 * dump are all generated from these rows. Keep it data: behaviour that spans rows lives in resolve.ts.
 *
 * Message templates: `{flag}` = the option's display name (CLI flag, else its env var), `{v}` = the
 * offending value, `{reason}` = parser detail.
 */

export type App = 'frontend' | 'router' | 'mocker' | 'indexer' | 'worker';
export const APPS: readonly App[] = ['frontend', 'router', 'mocker', 'indexer', 'worker'];

export type FlagType =
  | 'bool'
  | 'u16'
  | 'u32'
  | 'u64'
  | 'float'
  | 'enum'
  | 'string'
  | 'path'
  | 'dir'
  | 'url'
  | 'urlList'
  | 'u16List'
  | 'json';

/** Groups in help and docs order; the names are docs/configuration.md's section headings. */
export const GROUPS = [
  'HTTP and network',
  'HTTP server environment',
  'Routing',
  'Routing — further router options',
  'Routing — environment only',
  'AIC prefill load model',
  'Fault tolerance',
  'Model discovery',
  'Infrastructure',
  'KServe gRPC',
  'Monitoring',
  'Tokenizer',
  'Experimental',
  'Deprecated',
  'kvrouter additions',
  'Endpoint path overrides',
  'Topology-aware KV transfer (worker environment)',
  'Standalone indexer service',
  'Mocker engine',
] as const;
export type Group = (typeof GROUPS)[number];

/** Single-value range; bounds are inclusive unless the matching `*Open` is set. */
export interface RangeSpec {
  readonly min?: number;
  readonly max?: number;
  readonly minOpen?: boolean;
  readonly maxOpen?: boolean;
  readonly msg: string;
  /** The message also covers inf/nan (floats); otherwise non-finite gets the generic finite message. */
  readonly finite?: boolean;
}

export type DefaultValue = boolean | number | bigint | string | readonly string[] | readonly number[] | null;

export interface FlagSpec {
  /** camelCase key in ResolvedConfig; unique per app (two rows may share it for disjoint apps). */
  readonly key: string;
  /** Long CLI flag; booleans also get the derived `--no-` form. Absent = environment only. */
  readonly flag?: string;
  readonly short?: string;
  /** Environment variables in priority order (first set and non-empty wins). */
  readonly env?: readonly string[];
  /** Obsolete CLI spellings: same meaning, a warning; booleans also accept their `--no-` form. */
  readonly aliases?: readonly string[];
  readonly type: FlagType;
  readonly choices?: readonly string[];
  /** The literal `None` unsets the option (for the busy and queue thresholds: disabled). */
  readonly nullable?: boolean;
  /** null = unset. */
  readonly default: DefaultValue;
  /** Default derived from other options or the environment after resolution (resolve.ts). */
  readonly computed?: boolean;
  /** Help/docs text for defaults that are descriptive or computed. */
  readonly defaultText?: string;
  readonly required?: boolean;
  readonly group: Group;
  readonly help: string;
  /** Replacement named in the deprecation warning. */
  readonly deprecated?: string;
  readonly apps: readonly App[];
  readonly range?: RangeSpec;
  /** Whole-value regex (string form, so the row stays serialisable) and its message. */
  readonly pattern?: { readonly re: string; readonly msg: string };
  /** Message for a value that does not parse or is not among the choices (else the argparse-style default). */
  readonly invalidMsg?: string;
  /** For `dir`: message when the injected directory check fails. */
  readonly existsMsg?: string;
  /** Bool env with unknown values warned about and read as false (topology contract) instead of an error. */
  readonly lenient?: boolean;
}

const F = ['frontend'] as const;
const FR = ['frontend', 'router'] as const;
const INFRA = ['frontend', 'router', 'mocker', 'worker'] as const;
const WORKERS = ['worker', 'mocker'] as const;
const M = ['mocker'] as const;
const IDX = ['indexer'] as const;

const U32_MAX = 4294967295;
const GE0_FINITE = { min: 0, msg: '{flag} must be a finite number >= 0, got {v}', finite: true } as const;
const UNIT = { min: 0, max: 1, msg: '{flag} must be between 0.0 and 1.0, got {v}', finite: true } as const;
const GE1 = { min: 1, msg: '{flag} must be >= 1, got {v}' } as const;
const GE0 = { min: 0, msg: '{flag} must be >= 0, got {v}' } as const;
const GT0 = { min: 0, minOpen: true, msg: '{flag} must be > 0, got {v}' } as const;
const ROUTE_PATH = { re: '^/.*$', msg: "{flag} must start with '/', got {v}" } as const;

// One row per line on purpose: the table is read and diffed row by row.
// prettier-ignore
export const FLAGS = [
  // ---- HTTP and network
  { key: 'httpHost', flag: '--http-host', env: ['DYN_HTTP_HOST'], type: 'string', default: '0.0.0.0', group: 'HTTP and network', apps: ['frontend', 'mocker'], help: 'HTTP listen address (mocker: of --http-ports and the ZMQ sockets).' },
  { key: 'httpPort', flag: '--http-port', env: ['DYN_HTTP_PORT'], type: 'u16', default: 8000, group: 'HTTP and network', apps: F, help: 'HTTP listen port (also serves /metrics and /busy_threshold).' },
  { key: 'tlsCertPath', flag: '--tls-cert-path', env: ['DYN_TLS_CERT_PATH'], type: 'path', default: null, group: 'HTTP and network', apps: F, help: 'TLS certificate (PEM); only together with --tls-key-path.' },
  { key: 'tlsKeyPath', flag: '--tls-key-path', env: ['DYN_TLS_KEY_PATH'], type: 'path', default: null, group: 'HTTP and network', apps: F, help: 'TLS private key (PEM); only together with --tls-cert-path.' },

  // ---- HTTP server environment
  { key: 'httpBodyLimitMb', env: ['DYN_HTTP_BODY_LIMIT_MB'], type: 'u32', default: 192, range: GE1, group: 'HTTP server environment', apps: F, help: 'Maximum request body in MB; larger bodies get 413.' },
  { key: 'httpGracefulShutdownTimeoutSecs', env: ['DYN_HTTP_GRACEFUL_SHUTDOWN_TIMEOUT_SECS'], type: 'u32', default: 5, group: 'HTTP server environment', apps: F, help: 'On SIGTERM stop accepting, let in-flight requests finish for this many seconds, then close.' },
  { key: 'httpMaxHeaderBytes', flag: '--http-max-header-bytes', env: ['DYN_HTTP_MAX_HEADER_BYTES'], type: 'u32', default: 16384, range: GE1, group: 'HTTP server environment', apps: F, help: 'Largest request head (request line + headers) in bytes; larger heads get 431 and the connection is closed.' },
  { key: 'httpMaxHeaders', flag: '--http-max-headers', env: ['DYN_HTTP_MAX_HEADERS'], type: 'u32', default: 100, range: GE1, group: 'HTTP server environment', apps: F, help: 'Most header fields in one request; more get 431.' },
  { key: 'httpHeadersTimeoutSecs', flag: '--http-headers-timeout-secs', env: ['DYN_HTTP_HEADERS_TIMEOUT_SECS'], type: 'u32', default: 20, range: GE1, group: 'HTTP server environment', apps: F, help: 'A client must send the whole request head within this many seconds (slow-header clients get 408 and are disconnected).' },
  { key: 'httpRequestTimeoutSecs', flag: '--http-request-timeout-secs', env: ['DYN_HTTP_REQUEST_TIMEOUT_SECS'], type: 'u32', default: 300, group: 'HTTP server environment', apps: F, help: 'A client must send the whole request (head and body) within this many seconds (408 otherwise); the response may take any time. 0 = no limit.' },
  { key: 'httpMaxStreams', flag: '--http-max-streams', env: ['DYN_HTTP_MAX_STREAMS'], type: 'u32', default: 0, group: 'HTTP server environment', apps: F, help: 'Most streaming (SSE) responses open at once; a stream past it gets 503 too_many_streams with Retry-After. 0 = no limit.' },

  // ---- Routing
  { key: 'routerMode', flag: '--router-mode', env: ['DYN_ROUTER_MODE'], type: 'enum', choices: ['round-robin', 'random', 'kv', 'direct', 'least-loaded', 'device-aware-weighted', 'power-of-two'], default: 'round-robin', group: 'Routing', apps: FR, help: 'Worker selection strategy (PROTOCOL §8.8).' },
  { key: 'routerPolicy', flag: '--router-policy', env: ['KVR_ROUTER_POLICY'], type: 'enum', choices: ['dynamo', 'ttft'], default: 'dynamo', group: 'Routing', apps: FR, help: "kv mode cost: dynamo = Dynamo's cost (§8.3); ttft = each worker's predicted time to first token (queued prefill + uncached tokens over its learned prefill rate, decode pressure), ties to the longer overlap." },
  { key: 'ttftAware', flag: '--ttft-aware', env: ['KVR_TTFT_AWARE'], type: 'bool', default: false, group: 'Routing', apps: FR, help: 'Preset: --router-mode kv --router-policy ttft (flags given explicitly win).' },
  { key: 'agentic', flag: '--agentic', env: ['DYN_ROUTER_AGENTIC'], type: 'bool', default: false, group: 'Routing', apps: FR, help: "Preset (Dynamo's): --router-mode kv, overlap credit 2, --router-prefill-load-scale 4, --router-decode-active-request-weight 64 (flags given explicitly win)." },
  { key: 'routerPolicyConfig', flag: '--router-policy-config', env: ['DYN_ROUTER_POLICY_CONFIG'], type: 'path', default: null, group: 'Routing', apps: FR, help: 'YAML or JSON file of routing knobs (flag names without --, e.g. router-prefill-load-scale: 4); its values win over flags.' },
  { key: 'loadAware', flag: '--load-aware', env: ['DYN_ROUTER_LOAD_AWARE'], type: 'bool', default: false, group: 'Routing', apps: FR, help: 'Preset: KV load routing without cache-reuse signals; implies --router-mode kv (§8.5).' },
  { key: 'routerKvOverlapScoreCredit', flag: '--router-kv-overlap-score-credit', env: ['DYN_ROUTER_KV_OVERLAP_SCORE_CREDIT'], type: 'float', default: 1.0, range: UNIT, group: 'Routing', apps: FR, help: 'Credit for device-local prefix overlap against prefill load; 0 = no index, no KV subscription.' },
  { key: 'routerPrefillLoadScale', flag: '--router-prefill-load-scale', env: ['DYN_ROUTER_PREFILL_LOAD_SCALE'], type: 'float', default: 1.0, range: GE0_FINITE, group: 'Routing', apps: FR, help: 'Multiplies the credit-adjusted prompt-side load before decode blocks are added.' },
  { key: 'routerTemperature', flag: '--router-temperature', env: ['DYN_ROUTER_TEMPERATURE'], type: 'float', default: 0.0, range: { min: 0, msg: '--router-temperature must be >= 0, got {v}' }, group: 'Routing', apps: FR, help: 'Softmax temperature over range-normalised costs; 0 = deterministic minimum (§8.6).' },
  { key: 'routerKvEvents', flag: '--router-kv-events', env: ['DYN_ROUTER_USE_KV_EVENTS'], aliases: ['--kv-events'], type: 'bool', default: true, group: 'Routing', apps: FR, help: 'Consume worker KV events; off = approximate mode predicting cache from own decisions (§7.5).' },
  { key: 'routerTtlSecs', flag: '--router-ttl-secs', env: ['DYN_ROUTER_TTL_SECS'], aliases: ['--router-ttl'], type: 'float', default: 120.0, range: GT0, group: 'Routing', apps: FR, help: 'Block TTL in approximate mode (only with --no-router-kv-events).' },
  { key: 'routerReplicaSync', flag: '--router-replica-sync', env: ['DYN_ROUTER_REPLICA_SYNC'], type: 'bool', default: false, group: 'Routing', apps: FR, help: 'Share active-sequence bookings between router replicas (§5.4).' },
  { key: 'routerSnapshotThreshold', flag: '--router-snapshot-threshold', env: ['DYN_ROUTER_SNAPSHOT_THRESHOLD'], type: 'u64', default: 1000000n, range: GE1, group: 'Routing', apps: FR, help: 'JetStream message count that triggers a radix snapshot + purge (durable mode only, §5.3).' },
  { key: 'routerResetStates', flag: '--router-reset-states', env: ['DYN_ROUTER_RESET_STATES'], type: 'bool', default: false, group: 'Routing', apps: FR, help: 'At startup purge the JetStream stream and snapshot bucket (durable mode only; affects other replicas).' },
  { key: 'routerTrackActiveBlocks', flag: '--router-track-active-blocks', env: ['DYN_ROUTER_TRACK_ACTIVE_BLOCKS'], aliases: ['--track-active-blocks'], type: 'bool', default: true, group: 'Routing', apps: FR, help: 'Track blocks held by in-flight requests as decode load; disable for prefill-only workers.' },
  { key: 'routerAssumeKvReuse', flag: '--router-assume-kv-reuse', env: ['DYN_ROUTER_ASSUME_KV_REUSE'], aliases: ['--assume-kv-reuse'], type: 'bool', default: true, group: 'Routing', apps: FR, help: 'Dedupe shared prompt blocks in active tracking; off = random hashes (disaggregated decode).' },
  { key: 'routerTrackOutputBlocks', flag: '--router-track-output-blocks', env: ['DYN_ROUTER_TRACK_OUTPUT_BLOCKS'], aliases: ['--track-output-blocks'], type: 'bool', default: false, group: 'Routing', apps: FR, help: 'Experimental: add output blocks as tokens stream, decayed by agent_hints.osl progress (§9.3).' },
  { key: 'routerTrackPrefillTokens', flag: '--router-track-prefill-tokens', env: ['DYN_ROUTER_TRACK_PREFILL_TOKENS'], type: 'bool', default: true, group: 'Routing', apps: FR, help: 'Count prompt tokens as prefill load (cost, queue, busy, metrics); disable for decode-only routing.' },
  { key: 'routerPrefillLoadModel', flag: '--router-prefill-load-model', env: ['DYN_ROUTER_PREFILL_LOAD_MODEL'], type: 'enum', choices: ['none', 'aic'], default: 'none', group: 'Routing', apps: FR, help: 'none = static prompt load until first token; aic = oldest-prefill decay by predicted duration (§9.4).' },
  { key: 'routerEventThreads', flag: '--router-event-threads', env: ['DYN_ROUTER_EVENT_THREADS'], type: 'u32', default: 4, range: { min: 1, msg: '--router-event-threads must be >= 1, got {v}' }, group: 'Routing', apps: FR, help: 'Index writer lanes; > 1 = concurrent index (also for approximate and side indexes); 1 = single-threaded.' },
  { key: 'routerQueueThreshold', flag: '--router-queue-threshold', env: ['DYN_ROUTER_QUEUE_THRESHOLD'], type: 'float', nullable: true, default: 16.0, range: { min: 0, minOpen: true, msg: '--router-queue-threshold must be greater than 0 (use None to disable queueing), got {v}' }, group: 'Routing', apps: FR, help: "Park requests while every worker's active prefill > value x max_num_batched_tokens; None = no queue (§10)." },
  { key: 'routerQueuePolicy', flag: '--router-queue-policy', env: ['DYN_ROUTER_QUEUE_POLICY'], type: 'enum', choices: ['fcfs', 'wspt', 'lcfs'], default: 'fcfs', group: 'Routing', apps: FR, help: 'Queue order: fcfs (tail TTFT), wspt (mean TTFT), lcfs (comparison experiments only).' },
  { key: 'decodeFallback', flag: '--decode-fallback', env: ['DYN_DECODE_FALLBACK'], type: 'bool', default: false, group: 'Routing', apps: FR, help: 'Serve aggregated on decode workers when prefill workers have gone (§14).' },

  // ---- Routing — further router options
  { key: 'routerKvOverlapScoreCreditDecay', flag: '--router-kv-overlap-score-credit-decay', env: ['DYN_ROUTER_KV_OVERLAP_SCORE_CREDIT_DECAY'], type: 'float', default: 0.0, range: GE0_FINITE, group: 'Routing — further router options', apps: FR, help: "Shrinks device credit as a worker's prefill load exceeds the least-loaded candidate's; 1 halves it at one request of excess." },
  { key: 'routerHostCacheHitWeight', flag: '--router-host-cache-hit-weight', env: ['DYN_ROUTER_HOST_CACHE_HIT_WEIGHT'], type: 'float', default: 0.75, range: UNIT, group: 'Routing — further router options', apps: FR, help: 'Credit per prefix block found in the host-pinned tier beyond the device prefix.' },
  { key: 'routerDiskCacheHitWeight', flag: '--router-disk-cache-hit-weight', env: ['DYN_ROUTER_DISK_CACHE_HIT_WEIGHT'], type: 'float', default: 0.25, range: UNIT, group: 'Routing — further router options', apps: FR, help: 'Credit per prefix block found in disk/external tiers beyond host.' },
  { key: 'routerDecodeActiveRequestWeight', flag: '--router-decode-active-request-weight', env: ['DYN_ROUTER_DECODE_ACTIVE_REQUEST_WEIGHT'], type: 'float', default: 0.0, range: GE0_FINITE, group: 'Routing — further router options', apps: FR, help: 'Experimental: block-equivalent cost per active request on a candidate.' },
  { key: 'routerTtftDecodePressure', flag: '--router-ttft-decode-pressure', env: ['KVR_ROUTER_TTFT_DECODE_PRESSURE'], type: 'float', default: 0.25, range: GE0_FINITE, group: 'Routing — further router options', apps: FR, help: '--router-policy ttft: prefill slows by 1 + value x (active decode blocks / total KV blocks).' },
  { key: 'routerTtftWorkWeight', flag: '--router-ttft-work-weight', env: ['KVR_ROUTER_TTFT_WORK_WEIGHT'], type: 'float', default: 1, range: GE0_FINITE, group: 'Routing — further router options', apps: FR, help: "--router-policy ttft: weight λ of the prefill time a choice adds to the fleet, added to the request's own predicted TTFT and scaled by the share b of candidates with queued prefill (λ·b/(1−b+1/n))." },
  { key: 'routerTtftDecodeStep', flag: '--router-ttft-decode-step', env: ['KVR_ROUTER_TTFT_DECODE_STEP'], type: 'float', default: 1, range: GE0_FINITE, group: 'Routing — further router options', apps: FR, help: '--router-policy ttft: scale of the decode step every pass of a rank with running requests carries (the default engine model\'s, 5.7 ms at an empty KV cache to 34 ms full) in the predicted TTFT; 0 = none.' },
  { key: 'routerTtftDuplicateWeight', flag: '--router-ttft-duplicate-weight', env: ['KVR_ROUTER_TTFT_DUPLICATE_WEIGHT'], type: 'float', default: 3, range: GE0_FINITE, group: 'Routing — further router options', apps: FR, help: '--router-policy ttft: extra weight (times the scaled work weight) of recomputing a cached prefix that another rank holds and no request in flight shares (a copy only this request\'s lineage would read).' },
  { key: 'routerMaxTreeSize', flag: '--router-max-tree-size', env: ['DYN_ROUTER_MAX_TREE_SIZE'], type: 'u64', default: 1048576n, range: { min: 1, msg: '{flag} must be > 0, got {v}' }, group: 'Routing — further router options', apps: FR, help: 'Approximate mode: total blocks before size pruning.' },
  { key: 'routerPruneTargetRatio', flag: '--router-prune-target-ratio', env: ['DYN_ROUTER_PRUNE_TARGET_RATIO'], type: 'float', default: 0.8, range: { min: 0, minOpen: true, max: 1, msg: '--router-prune-target-ratio must be in (0, 1], got {v}', finite: true }, group: 'Routing — further router options', apps: FR, help: 'Approximate mode: prune down to this fraction of the maximum.' },
  { key: 'routerApproximateCachePolicy', flag: '--router-approximate-cache-policy', env: ['DYN_ROUTER_APPROXIMATE_CACHE_POLICY'], type: 'enum', choices: ['ttl', 'lru'], default: 'ttl', group: 'Routing — further router options', apps: FR, help: "Experimental: approximate-mode retention; lru uses each rank's total_kv_blocks." },
  { key: 'routerPredictedTtlSecs', flag: '--router-predicted-ttl-secs', env: ['DYN_ROUTER_PREDICTED_TTL_SECS'], type: 'float', nullable: true, default: null, defaultText: 'unset (off)', range: { min: 0, minOpen: true, msg: '--router-predicted-ttl-secs must be > 0, got {v}' }, group: 'Routing — further router options', apps: FR, help: 'Predict-on-route side index with this TTL; needs KV events; suggested 5 (§7.6).' },
  { key: 'useRemoteIndexer', flag: '--use-remote-indexer', env: ['DYN_USE_REMOTE_INDEXER'], type: 'bool', default: false, group: 'Routing — further router options', apps: FR, help: 'Experimental: query an index served on the worker component instead of keeping one (§7.7).' },
  { key: 'serveIndexer', flag: '--serve-indexer', env: ['DYN_SERVE_INDEXER'], type: 'bool', default: false, group: 'Routing — further router options', apps: FR, help: "Serve this router's index to other routers over the request plane (§7.7)." },
  { key: 'routerMinInitialWorkers', flag: '--router-min-initial-workers', env: ['DYN_ROUTER_MIN_INITIAL_WORKERS'], type: 'u32', default: 0, range: { min: 0, msg: '--router-min-initial-workers must be >= 0' }, group: 'Routing — further router options', apps: FR, help: "Workers (with runtime config) required before a model's router is ready; 0 = no wait." },
  { key: 'enforceDisagg', flag: '--enforce-disagg', env: ['DYN_ENFORCE_DISAGG'], type: 'bool', default: false, group: 'Routing — further router options', apps: FR, help: 'Fail (503) requests that arrive before any prefill worker was seen instead of serving aggregated (§14).' },
  { key: 'sharedCacheType', flag: '--shared-cache-type', env: ['DYN_SHARED_CACHE_TYPE'], type: 'enum', choices: ['none', 'hicache'], default: 'none', group: 'Routing — further router options', apps: FR, help: 'Experimental external shared KV cache to query; kvrouter v1 supports none only.' },
  { key: 'sharedCacheMultiplier', flag: '--shared-cache-multiplier', env: ['DYN_SHARED_CACHE_MULTIPLIER'], type: 'float', nullable: true, default: null, computed: true, defaultText: 'unset (0.5 when a shared cache is on, else 0)', range: UNIT, group: 'Routing — further router options', apps: FR, help: 'Credit per shared-cache hit beyond the device prefix.' },

  // ---- Routing — environment only
  { key: 'encoderCudaToCpuRatio', env: ['DYN_ENCODER_CUDA_TO_CPU_RATIO'], type: 'u32', default: 8, range: { min: 1, max: U32_MAX, msg: 'DYN_ENCODER_CUDA_TO_CPU_RATIO must be an integer >= 1, got {v}' }, invalidMsg: 'DYN_ENCODER_CUDA_TO_CPU_RATIO must be an integer >= 1, got {v}', group: 'Routing — environment only', apps: FR, help: 'device-aware-weighted: throughput of one non-CPU worker relative to one CPU worker (§8.8).' },
  { key: 'routerOverlapRefreshAfterSecs', env: ['DYN_ROUTER_OVERLAP_REFRESH_AFTER_SECS'], type: 'float', default: 10, range: { min: 0, msg: 'DYN_ROUTER_OVERLAP_REFRESH_AFTER_SECS must be >= 0, got {v}' }, group: 'Routing — environment only', apps: FR, help: 'Re-query overlap for requests queued longer than this before dispatch; 0 disables (§10).' },
  { key: 'routerActiveRequestExpirySecs', env: ['DYN_ROUTER_ACTIVE_REQUEST_EXPIRY_SECS'], type: 'float', default: 300, range: GT0, group: 'Routing — environment only', apps: FR, help: 'Force-free a tracked request older than this (§9.2).' },

  // ---- AIC prefill load model (required-ness is cross-field: only with --router-prefill-load-model aic)
  { key: 'aicBackend', flag: '--aic-backend', env: ['DYN_AIC_BACKEND'], type: 'string', default: null, defaultText: '— (required with aic)', group: 'AIC prefill load model', apps: FR, help: 'Backend family to model, e.g. vllm, sglang.' },
  { key: 'aicSystem', flag: '--aic-system', env: ['DYN_AIC_SYSTEM'], type: 'string', default: null, group: 'AIC prefill load model', apps: ['frontend', 'router', 'mocker'], help: 'Hardware/system identifier, e.g. h200_sxm; required with --router-prefill-load-model aic (the mocker uses it with --aic-perf-model).' },
  { key: 'aicModelPath', flag: '--aic-model-path', env: ['DYN_AIC_MODEL_PATH'], type: 'string', default: null, defaultText: '— (required with aic)', group: 'AIC prefill load model', apps: FR, help: 'Model path or id for the performance lookup.' },
  { key: 'aicBackendVersion', flag: '--aic-backend-version', env: ['DYN_AIC_BACKEND_VERSION'], type: 'string', default: null, defaultText: 'backend-specific', group: 'AIC prefill load model', apps: FR, help: 'Pinned version of the performance database.' },
  { key: 'aicTpSize', flag: '--aic-tp-size', env: ['DYN_AIC_TP_SIZE'], type: 'u32', default: 1, range: GE1, group: 'AIC prefill load model', apps: FR, help: 'Tensor-parallel size modelled.' },
  { key: 'aicMoeTpSize', flag: '--aic-moe-tp-size', env: ['DYN_AIC_MOE_TP_SIZE'], type: 'u32', nullable: true, default: null, range: GE1, group: 'AIC prefill load model', apps: FR, help: 'MoE tensor-parallel size (MoE models).' },
  { key: 'aicMoeEpSize', flag: '--aic-moe-ep-size', env: ['DYN_AIC_MOE_EP_SIZE'], type: 'u32', nullable: true, default: null, range: GE1, group: 'AIC prefill load model', apps: FR, help: 'MoE expert-parallel size (MoE models).' },
  { key: 'aicAttentionDpSize', flag: '--aic-attention-dp-size', env: ['DYN_AIC_ATTENTION_DP_SIZE'], type: 'u32', nullable: true, default: null, range: GE1, group: 'AIC prefill load model', apps: FR, help: 'Attention data-parallel size (MoE models).' },

  // ---- Fault tolerance
  { key: 'migrationLimit', flag: '--migration-limit', env: ['DYN_MIGRATION_LIMIT'], type: 'u32', default: 0, range: { min: 0, max: U32_MAX, msg: '--migration-limit must be between 0 and 4294967295 (0=disabled)' }, group: 'Fault tolerance', apps: F, help: 'Maximum migrations of one request when its worker fails; 0 = off (§14).' },
  { key: 'migrationMaxSeqLen', flag: '--migration-max-seq-len', env: ['DYN_MIGRATION_MAX_SEQ_LEN'], type: 'u32', nullable: true, default: null, defaultText: 'unset (no limit)', range: { min: 1, max: U32_MAX, msg: '--migration-max-seq-len must be between 1 and 4294967295' }, group: 'Fault tolerance', apps: F, help: 'Prompt + generated tokens above this make a request non-migratable.' },
  { key: 'activeDecodeBlocksThreshold', flag: '--active-decode-blocks-threshold', env: ['DYN_ACTIVE_DECODE_BLOCKS_THRESHOLD'], type: 'float', nullable: true, default: 1.0, range: { min: 0, max: 1, msg: '--active-decode-blocks-threshold must be between 0.0 and 1.0, got {v}', finite: true }, group: 'Fault tolerance', apps: FR, help: 'KV-block usage fraction above which a rank is busy (latched, §11); None = disabled.' },
  { key: 'activePrefillTokensThreshold', flag: '--active-prefill-tokens-threshold', env: ['DYN_ACTIVE_PREFILL_TOKENS_THRESHOLD'], type: 'u64', nullable: true, default: 10000000n, range: GE0, group: 'Fault tolerance', apps: FR, help: 'Absolute active prefill tokens above which a rank is busy; None = disabled.' },
  { key: 'activePrefillTokensThresholdFrac', flag: '--active-prefill-tokens-threshold-frac', env: ['DYN_ACTIVE_PREFILL_TOKENS_THRESHOLD_FRAC'], type: 'float', nullable: true, default: 64.0, range: GE0, group: 'Fault tolerance', apps: FR, help: 'Busy when active prefill > value x max_num_batched_tokens; OR-ed with the absolute threshold; None = disabled.' },
  { key: 'admissionControl', flag: '--admission-control', env: ['DYN_ADMISSION_CONTROL'], type: 'enum', choices: ['none', 'token-capacity'], default: 'none', invalidMsg: "--admission-control must be one of ('token-capacity', 'none'), got '{v}'", group: 'Fault tolerance', apps: FR, help: 'token-capacity applies the busy thresholds; none clears them (auto-promoted if a threshold is set explicitly). Queueing stays under --router-queue-threshold.' },

  // ---- Model discovery
  { key: 'namespace', flag: '--namespace', env: ['DYN_NAMESPACE'], type: 'string', default: null, defaultText: '— (all)', group: 'Model discovery', apps: F, help: 'Exact namespace to discover models in.' },
  { key: 'namespacePrefix', flag: '--namespace-prefix', env: ['DYN_NAMESPACE_PREFIX'], type: 'string', default: null, group: 'Model discovery', apps: F, help: 'Namespace prefix (ns matches ns, ns-abc123); wins over --namespace.' },
  { key: 'modelName', flag: '--model-name', env: ['DYN_MODEL_NAME'], type: 'string', default: null, pattern: { re: '^[\\s\\S]*\\S[\\s\\S]*$', msg: 'model-name must be a non-empty string, got: {v}' }, group: 'Model discovery', apps: ['frontend', 'mocker', 'worker'], help: 'Override the model name string served (worker: default the engine\'s first /v1/models id).' },
  { key: 'modelPath', flag: '--model-path', env: ['DYN_MODEL_PATH'], type: 'dir', default: null, existsMsg: 'model-path must be a valid directory on disk, got: {v}', group: 'Model discovery', apps: ['frontend', 'worker'], help: 'Local model directory (tokenizer, config) for private/custom models (worker: its tokenizer.json, tokenizer_config.json and chat_template.jinja travel with the card).' },
  { key: 'kvCacheBlockSize', flag: '--kv-cache-block-size', env: ['DYN_KV_CACHE_BLOCK_SIZE'], type: 'u32', nullable: true, default: null, defaultText: '— (from card)', range: GE1, group: 'Model discovery', apps: FR, help: 'Override the KV block size from the model card.' },

  // ---- Infrastructure
  { key: 'discoveryBackend', flag: '--discovery-backend', env: ['DYN_DISCOVERY_BACKEND'], type: 'enum', choices: ['kubernetes', 'etcd', 'file', 'mem'], default: 'mem', group: 'Infrastructure', apps: INFRA, help: "Service discovery store (§6.2). kvrouter defaults to the embedded mem store so that a bare start works (Dynamo's default is etcd)." },
  { key: 'requestPlane', flag: '--request-plane', env: ['DYN_REQUEST_PLANE'], type: 'enum', choices: ['tcp', 'nats'], default: 'tcp', group: 'Infrastructure', apps: INFRA, help: 'Router -> worker request transport; tcp is fastest (§5.7).' },
  { key: 'eventPlane', flag: '--event-plane', env: ['DYN_EVENT_PLANE'], type: 'enum', choices: ['nats', 'zmq'], default: null, computed: true, defaultText: 'auto (zmq for file/mem discovery, nats for etcd/kubernetes)', group: 'Infrastructure', apps: INFRA, help: 'Event transport (§5.2).' },
  { key: 'etcdEndpoints', env: ['ETCD_ENDPOINTS'], type: 'urlList', default: ['http://localhost:2379'], group: 'Infrastructure', apps: INFRA, help: 'etcd servers (comma-separated URLs).' },
  { key: 'natsServer', env: ['NATS_SERVER'], type: 'url', default: 'nats://localhost:4222', group: 'Infrastructure', apps: INFRA, help: 'NATS server.' },
  { key: 'fileKv', env: ['DYN_FILE_KV'], type: 'path', default: null, computed: true, defaultText: '$TMPDIR/dynamo_store_kv', group: 'Infrastructure', apps: INFRA, help: 'Root directory of the file discovery backend.' },
  { key: 'tcpRpcPort', env: ['DYN_TCP_RPC_PORT'], type: 'u16', nullable: true, default: null, defaultText: 'OS-assigned', group: 'Infrastructure', apps: INFRA, help: "Fixed port for a worker's tcp request-plane listener." },
  { key: 'tcpRpcHost', env: ['DYN_TCP_RPC_HOST'], type: 'string', default: null, defaultText: "this machine's first non-loopback IPv4", group: 'Infrastructure', apps: INFRA, help: 'Address published for the tcp request plane (and its bind address unless KVR_TCP_RPC_BIND_HOST is set), as Dynamo (issue 18).' },
  { key: 'tcpRpcBindHost', env: ['KVR_TCP_RPC_BIND_HOST'], type: 'string', default: null, defaultText: '0.0.0.0 (or DYN_TCP_RPC_HOST when set)', group: 'Infrastructure', apps: INFRA, help: 'Bind address of the tcp request-plane listener, e.g. 0.0.0.0 behind a NAT whose address DYN_TCP_RPC_HOST publishes.' },
  { key: 'zmqBrokerUrl', env: ['DYN_ZMQ_BROKER_URL'], type: 'string', default: null, group: 'Infrastructure', apps: INFRA, help: 'Use ZMQ XSUB/XPUB brokers for the event plane: "xsub=tcp://h:5555[;…] , xpub=tcp://h:5556[;…]" (upstream format).' },
  { key: 'zmqBrokerEnabled', env: ['DYN_ZMQ_BROKER_ENABLED'], type: 'bool', default: false, group: 'Infrastructure', apps: INFRA, help: 'Enable ZMQ broker mode (address from discovery or DYN_ZMQ_BROKER_URL).' },
  { key: 'natsStreamMaxAge', env: ['DYN_NATS_STREAM_MAX_AGE'], type: 'u64', default: 3600n, group: 'Infrastructure', apps: INFRA, help: 'JetStream stream max_age in seconds (durable mode).' },
  { key: 'systemPort', env: ['DYN_SYSTEM_PORT'], type: 'u16', nullable: true, default: null, defaultText: 'unset (off)', group: 'Infrastructure', apps: ['router'], help: 'Metrics/health port of the standalone router.' },

  // ---- KServe gRPC
  { key: 'kserveGrpcServer', flag: '--kserve-grpc-server', env: ['DYN_KSERVE_GRPC_SERVER'], type: 'bool', default: false, group: 'KServe gRPC', apps: F, help: 'Start a KServe v2 inference gRPC server (text generation over the same router) beside HTTP, on --kserve-grpc-port.' },
  { key: 'grpcMetricsPort', flag: '--grpc-metrics-port', env: ['DYN_GRPC_METRICS_PORT'], type: 'u16', default: 8788, group: 'KServe gRPC', apps: F, help: 'HTTP port of the gRPC service serving /metrics (the same registry as the HTTP port), /health, /live and /v1/models; used only with --kserve-grpc-server.' },
  { key: 'kserveGrpcPort', flag: '--kserve-grpc-port', env: ['KVR_KSERVE_GRPC_PORT'], type: 'u16', default: 8787, group: 'KServe gRPC', apps: F, help: 'kvrouter addition: gRPC listen port of --kserve-grpc-server (on --http-host; 0 = OS-assigned). Dynamo serves gRPC on --http-port instead of HTTP; kvrouter keeps both.' },

  // ---- Monitoring
  { key: 'metricsPrefix', flag: '--metrics-prefix', env: ['DYN_METRICS_PREFIX'], type: 'string', default: 'dynamo_frontend', pattern: { re: '^[a-zA-Z_:][a-zA-Z0-9_:]*$', msg: '{flag} must match [a-zA-Z_:][a-zA-Z0-9_:]*, got {v}' }, group: 'Monitoring', apps: F, help: 'Prefix of the frontend request metrics (PROTOCOL §16).' },
  { key: 'dumpConfigTo', flag: '--dump-config-to', env: ['DYN_DUMP_CONFIG_TO'], type: 'path', default: null, group: 'Monitoring', apps: INFRA, help: 'Write the resolved configuration (JSON) to this file at startup.' },
  // Histogram bucket overrides: log(MIN, MAX, COUNT) per PROTOCOL §16.
  { key: 'metricsRequestDurationMin', env: ['DYN_METRICS_REQUEST_DURATION_MIN'], type: 'float', default: 1, range: GT0, group: 'Monitoring', apps: F, help: 'request_duration_seconds buckets: lowest point.' },
  { key: 'metricsRequestDurationMax', env: ['DYN_METRICS_REQUEST_DURATION_MAX'], type: 'float', default: 256, range: GT0, group: 'Monitoring', apps: F, help: 'request_duration_seconds buckets: highest point.' },
  { key: 'metricsRequestDurationCount', env: ['DYN_METRICS_REQUEST_DURATION_COUNT'], type: 'u32', default: 10, range: GE1, group: 'Monitoring', apps: F, help: 'request_duration_seconds buckets: number of points.' },
  { key: 'metricsInputSequenceMin', env: ['DYN_METRICS_INPUT_SEQUENCE_MIN'], type: 'float', default: 50, range: GT0, group: 'Monitoring', apps: F, help: 'input_sequence_tokens buckets: lowest point.' },
  { key: 'metricsInputSequenceMax', env: ['DYN_METRICS_INPUT_SEQUENCE_MAX'], type: 'float', default: 128000, range: GT0, group: 'Monitoring', apps: F, help: 'input_sequence_tokens buckets: highest point.' },
  { key: 'metricsInputSequenceCount', env: ['DYN_METRICS_INPUT_SEQUENCE_COUNT'], type: 'u32', default: 12, range: GE1, group: 'Monitoring', apps: F, help: 'input_sequence_tokens buckets: number of points.' },
  { key: 'metricsOutputSequenceMin', env: ['DYN_METRICS_OUTPUT_SEQUENCE_MIN'], type: 'float', default: 50, range: GT0, group: 'Monitoring', apps: F, help: 'output_sequence_tokens buckets: lowest point.' },
  { key: 'metricsOutputSequenceMax', env: ['DYN_METRICS_OUTPUT_SEQUENCE_MAX'], type: 'float', default: 32000, range: GT0, group: 'Monitoring', apps: F, help: 'output_sequence_tokens buckets: highest point.' },
  { key: 'metricsOutputSequenceCount', env: ['DYN_METRICS_OUTPUT_SEQUENCE_COUNT'], type: 'u32', default: 10, range: GE1, group: 'Monitoring', apps: F, help: 'output_sequence_tokens buckets: number of points.' },
  { key: 'metricsTtftMin', env: ['DYN_METRICS_TTFT_MIN'], type: 'float', default: 0.001, range: GT0, group: 'Monitoring', apps: F, help: 'time_to_first_token_seconds buckets: lowest point.' },
  { key: 'metricsTtftMax', env: ['DYN_METRICS_TTFT_MAX'], type: 'float', default: 480, range: GT0, group: 'Monitoring', apps: F, help: 'time_to_first_token_seconds buckets: highest point.' },
  { key: 'metricsTtftCount', env: ['DYN_METRICS_TTFT_COUNT'], type: 'u32', default: 18, range: GE1, group: 'Monitoring', apps: F, help: 'time_to_first_token_seconds buckets: number of points.' },
  { key: 'metricsItlMin', env: ['DYN_METRICS_ITL_MIN'], type: 'float', default: 0.001, range: GT0, group: 'Monitoring', apps: F, help: 'inter_token_latency_seconds buckets: lowest point.' },
  { key: 'metricsItlMax', env: ['DYN_METRICS_ITL_MAX'], type: 'float', default: 2, range: GT0, group: 'Monitoring', apps: F, help: 'inter_token_latency_seconds buckets: highest point.' },
  { key: 'metricsItlCount', env: ['DYN_METRICS_ITL_COUNT'], type: 'u32', default: 13, range: GE1, group: 'Monitoring', apps: F, help: 'inter_token_latency_seconds buckets: number of points.' },

  // ---- Tokenizer
  { key: 'tokenizer', flag: '--tokenizer', env: ['DYN_TOKENIZER'], type: 'enum', choices: ['default', 'fastokens'], default: 'default', invalidMsg: "--tokenizer: invalid value '{v}' (choose from ['default', 'fastokens'])", group: 'Tokenizer', apps: F, help: 'default = each prompt tokenized whole; fastokens = incremental across turns (prefixes ending after an added/special token are cached, see --tokenizer-prefix-cache-tokens); both produce identical ids. A --model-path tokenizer.json is encoded by the exact fast tokenizer either way (unsupported features fall back to @huggingface/tokenizers).' },

  // ---- Experimental
  { key: 'enableAnthropicApi', flag: '--enable-anthropic-api', env: ['DYN_ENABLE_ANTHROPIC_API'], type: 'bool', default: false, group: 'Experimental', apps: F, help: 'Serve /v1/messages and /v1/messages/count_tokens (Anthropic Messages API).' },
  { key: 'dynChatProcessor', flag: '--dyn-chat-processor', env: ['DYN_CHAT_PROCESSOR'], type: 'enum', choices: ['dynamo', 'vllm'], default: 'dynamo', group: 'Experimental', apps: F, help: "Chat pre/post-processing: dynamo = the built-in processor (the model's own Jinja chat template and tokenizer.json). vllm (vLLM's Python processor in Dynamo) is refused at startup: kvrouter has no Python runtime." },
  { key: 'dynDebugPerf', flag: '--dyn-debug-perf', env: ['DYN_DEBUG_PERF'], type: 'bool', default: false, group: 'Experimental', apps: F, help: 'Log one line per request with its stage times from arrival: tokenized, routed, first token, done (plus route time, tokens, overlap, worker, outcome).' },
  { key: 'dynPreprocessWorkers', flag: '--dyn-preprocess-workers', env: ['DYN_PREPROCESS_WORKERS'], type: 'u32', default: 0, group: 'Experimental', apps: F, help: 'Tokenizer threads per tokenizer for long prompts (idle thread or FIFO queue; a large prompt never holds every thread); 0 = one thread.' },
  { key: 'dynPreprocessBudgetMs', flag: '--dyn-preprocess-budget-ms', env: ['DYN_PREPROCESS_BUDGET_MS'], type: 'u32', default: 10000, group: 'Experimental', apps: F, help: 'Time budget of tokenizing one prompt on a tokenizer thread; past it the thread is replaced and the request gets 413 tokenize_budget_exceeded. 0 = none.' },
  { key: 'dynToolCallParser', flag: '--dyn-tool-call-parser', env: ['DYN_TOOL_CALL_PARSER'], type: 'enum', choices: ['hermes', 'llama3_json', 'mistral', 'deepseek_v3', 'deepseek_v3_1', 'harmony'], default: null, defaultText: "the card's runtime_config.tool_call_parser, else none", group: 'Experimental', apps: ['frontend', 'mocker', 'worker'], help: 'Tool-call output format to parse into tool_calls (workers publish it in their card; on the frontend it overrides every card).' },
  { key: 'dynReasoningParser', flag: '--dyn-reasoning-parser', env: ['DYN_REASONING_PARSER'], type: 'enum', choices: ['basic', 'deepseek_r1', 'qwen3', 'gpt_oss'], default: null, defaultText: "the card's runtime_config.reasoning_parser, else none", group: 'Experimental', apps: ['frontend', 'mocker', 'worker'], help: 'Reasoning output format to split into reasoning_content (workers publish it in their card; on the frontend it overrides every card).' },
  { key: 'interactive', flag: '--interactive', short: '-i', env: ['DYN_INTERACTIVE'], type: 'bool', default: false, group: 'Experimental', apps: F, help: 'Interactive text chat on the terminal instead of serving HTTP.' },

  // ---- Deprecated
  { key: 'routerDurableKvEvents', flag: '--router-durable-kv-events', env: ['DYN_ROUTER_DURABLE_KV_EVENTS'], type: 'bool', default: false, deprecated: 'the event-plane local-indexer path (drop the flag)', group: 'Deprecated', apps: ['frontend', 'router', 'worker'], help: 'JetStream transport for KV events (§5.3), on routers and workers.' },
  { key: 'routerKvOverlapScoreWeight', flag: '--router-kv-overlap-score-weight', aliases: ['--kv-overlap-score-weight'], env: ['DYN_ROUTER_KV_OVERLAP_SCORE_WEIGHT', 'DYN_OVERLAP_SCORE_WEIGHT'], type: 'float', nullable: true, default: null, range: GE0_FINITE, deprecated: '--router-prefill-load-scale (weight 0: --router-kv-overlap-score-credit 0)', group: 'Deprecated', apps: FR, help: 'Legacy weight: != 0 -> prefill_load_scale; 0 -> scale 0 and credit 0; wins over the new fields (§8.4).' },

  // ---- kvrouter additions
  { key: 'mockerWorkers', flag: '--mocker-workers', env: ['KVR_MOCKER_WORKERS'], type: 'u32', default: 4, group: 'kvrouter additions', apps: F, help: 'With mem discovery and no registered workers, start this many simulated engines in-process (0 = none).' },
  { key: 'responsesStoreSize', flag: '--responses-store-size', env: ['KVR_RESPONSES_STORE_SIZE'], type: 'u32', default: 1000, group: 'kvrouter additions', apps: F, help: 'Responses API: responses kept in memory for previous_response_id (least recently used evicted first; 0 = none kept, every previous_response_id gets 404).' },
  { key: 'responsesStoreTtlSecs', flag: '--responses-store-ttl-secs', env: ['KVR_RESPONSES_STORE_TTL_SECS'], type: 'u32', default: 3600, range: GE1, group: 'kvrouter additions', apps: F, help: 'Responses API: seconds a stored response can be continued with previous_response_id.' },
  { key: 'decisionLog', flag: '--decision-log', env: ['KVR_DECISION_LOG'], type: 'path', default: null, defaultText: 'unset (off)', group: 'kvrouter additions', apps: F, help: 'Append sampled routing decisions as JSON lines to this file (- = stdout); never prompt text.' },
  { key: 'decisionLogSample', flag: '--decision-log-sample', env: ['KVR_DECISION_LOG_SAMPLE'], type: 'float', default: 0.01, range: UNIT, group: 'kvrouter additions', apps: F, help: 'Fraction of decisions written to the decision log.' },
  { key: 'tokenizerPrefixCacheTokens', flag: '--tokenizer-prefix-cache-tokens', env: ['KVR_TOKENIZER_PREFIX_CACHE_TOKENS'], type: 'u32', default: 16777216, group: 'kvrouter additions', apps: F, help: 'With --tokenizer fastokens: token ids kept by the prompt-prefix cache (4 bytes each; 0 = no cache).' },
  { key: 'tokenizerThreadChatChars', flag: '--tokenizer-thread-chat-chars', env: ['KVR_TOKENIZER_THREAD_CHAT_CHARS'], type: 'u32', default: null, defaultText: 'unset (65536 with --tokenizer default; 0 with fastokens)', group: 'kvrouter additions', apps: F, help: 'Chat prompts whose messages hold at least this many characters are rendered and tokenized on a tokenizer thread (its own chat template and prefix cache; every turn of a conversation on the same thread), not on the event loop. 0 = always on the event loop. Unset: 65536 with --tokenizer default (a long prompt is BPE-encoded whole); 0 with fastokens, where a 150k-token turn costs ~3 ms of CPU inline, about what it costs through a thread (uncached text over 16 384 characters still goes to a thread).' },
  { key: 'httpBodyThreadBytes', flag: '--http-body-thread-bytes', env: ['KVR_HTTP_BODY_THREAD_BYTES'], type: 'u32', default: 0, group: 'kvrouter additions', apps: F, help: 'Chat/completions request bodies of at least this many bytes are JSON-parsed on a body thread, the event loop receiving the parsed object by structured clone (same values and errors). 0 = never: bodies of 64 KiB and more are parsed on the event loop straight from their bytes (no whole-body string; ~2.3 ms of CPU for a 584 kB agent body vs ~5.4 ms of process CPU, 0.7 ms of it on the loop, through the thread).' },
  { key: 'httpBodyStringCacheMb', flag: '--http-body-string-cache-mb', env: ['KVR_HTTP_BODY_STRING_CACHE_MB'], type: 'u32', default: 64, group: 'kvrouter additions', apps: F, help: 'Request bodies of 2 KiB and more are JSON-parsed from their bytes, and their strings of 128 bytes and more are kept in a cache of this many MiB (bytes and decoded strings, least recently used out): a later body that sends the same bytes (a conversation resending its system prompt and history) gets the kept string after one byte compare instead of decoding it again. Values are exactly what decoding gives. 0 = no cache (bodies under 64 KiB are decoded whole).' },
  { key: 'dashboard', flag: '--dashboard', env: ['KVR_DASHBOARD'], type: 'enum', choices: ['auto', 'on', 'off'], default: 'auto', group: 'kvrouter additions', apps: FR, help: 'Live fleet page at /dashboard (SSE snapshots at /dashboard/events): auto = served to loopback clients only, on = to every client, off = not served. Router: on DYN_SYSTEM_PORT.' },
  { key: 'httpPorts', flag: '--http-ports', type: 'u16List', nullable: true, default: null, group: 'kvrouter additions', apps: M, help: 'vLLM-compatible mode: worker i serves the OpenAI HTTP API on port i of this list (0 = OS-assigned) instead of registering; KV events only through --zmq-kv-events-ports.' },
  { key: 'engineUrl', flag: '--engine-url', type: 'url', default: 'http://127.0.0.1:8000', group: 'kvrouter additions', apps: ['worker'], help: "Base URL of the engine's OpenAI HTTP API (vLLM / SGLang server), e.g. http://127.0.0.1:8000." },
  { key: 'blockSize', flag: '--block-size', type: 'u32', default: 16, range: GE1, group: 'kvrouter additions', apps: ['worker'], help: "The engine's KV block size in tokens (card kv_cache_block_size; vLLM's default is 16); must match the engine." },
  { key: 'workerModelType', flag: '--model-type', type: 'enum', choices: ['chat', 'embedding'], default: 'chat', group: 'kvrouter additions', apps: ['worker'], help: "What the engine serves (card model_type): chat (completions and chat through /v1/completions) or embedding (a pooling model: the request-plane embed endpoint is forwarded to the engine's /v1/embeddings with token-id inputs)." },
  { key: 'totalKvBlocks', flag: '--total-kv-blocks', type: 'u32', nullable: true, default: null, range: GE1, group: 'kvrouter additions', apps: ['worker'], help: "The engine's KV cache capacity in blocks (runtime_config total_kv_blocks)." },
  { key: 'maxNumBatchedTokens', flag: '--max-num-batched-tokens', type: 'u32', nullable: true, default: null, range: GE1, group: 'kvrouter additions', apps: ['worker'], help: "The engine's token budget per pass (runtime_config max_num_batched_tokens)." },
  { key: 'maxNumSeqs', flag: '--max-num-seqs', type: 'u32', nullable: true, default: null, range: GE1, group: 'kvrouter additions', apps: ['worker'], help: "The engine's maximum running requests (runtime_config max_num_seqs)." },
  { key: 'dataParallelSize', flag: '--data-parallel-size', type: 'u32', default: 1, range: GE1, group: 'kvrouter additions', apps: ['worker'], help: 'Data-parallel ranks of the engine; rank r publishes KV events on the endpoint port + r.' },
  { key: 'contextLength', flag: '--context-length', type: 'u32', nullable: true, default: null, defaultText: "the engine's max_model_len", range: GE1, group: 'kvrouter additions', apps: ['worker'], help: 'Card context_length.' },
  { key: 'kvEventsEndpoint', flag: '--kv-events-endpoint', type: 'string', default: null, pattern: { re: '^tcp://.+:[0-9]+$', msg: '{flag} must look like tcp://host:port, got {v}' }, group: 'kvrouter additions', apps: ['worker'], help: "The engine's ZMQ KV event PUB socket of rank 0 (vLLM --kv-events-config endpoint); unset = no KV events." },
  { key: 'kvEventsReplayEndpoint', flag: '--kv-events-replay-endpoint', type: 'string', default: null, pattern: { re: '^tcp://.+:[0-9]+$', msg: '{flag} must look like tcp://host:port, got {v}' }, group: 'kvrouter additions', apps: ['worker'], help: "The engine's ZMQ replay ROUTER socket of rank 0 (vLLM replay_endpoint); engine sequence gaps are re-read from it." },

  // ---- Endpoint path overrides
  { key: 'httpSvcChatPath', env: ['DYN_HTTP_SVC_CHAT_PATH_ENV'], type: 'string', default: '/v1/chat/completions', pattern: ROUTE_PATH, group: 'Endpoint path overrides', apps: F, help: 'Route of chat completions.' },
  { key: 'httpSvcCmpPath', env: ['DYN_HTTP_SVC_CMP_PATH_ENV'], type: 'string', default: '/v1/completions', pattern: ROUTE_PATH, group: 'Endpoint path overrides', apps: F, help: 'Route of text completions.' },
  { key: 'httpSvcEmbPath', env: ['DYN_HTTP_SVC_EMB_PATH_ENV'], type: 'string', default: '/v1/embeddings', pattern: ROUTE_PATH, group: 'Endpoint path overrides', apps: F, help: 'Route of embeddings.' },
  { key: 'httpSvcResponsesPath', env: ['DYN_HTTP_SVC_RESPONSES_PATH_ENV'], type: 'string', default: '/v1/responses', pattern: ROUTE_PATH, group: 'Endpoint path overrides', apps: F, help: 'Route of the Responses API.' },
  { key: 'httpSvcModelsPath', env: ['DYN_HTTP_SVC_MODELS_PATH_ENV'], type: 'string', default: '/v1/models', pattern: ROUTE_PATH, group: 'Endpoint path overrides', apps: F, help: 'Route of the model list.' },
  { key: 'httpSvcAnthropicPath', env: ['DYN_HTTP_SVC_ANTHROPIC_PATH_ENV'], type: 'string', default: '/v1/messages', pattern: ROUTE_PATH, group: 'Endpoint path overrides', apps: F, help: 'Route of Anthropic Messages (count_tokens stays under it: {path}/count_tokens).' },
  { key: 'httpSvcHealthPath', env: ['DYN_HTTP_SVC_HEALTH_PATH_ENV'], type: 'string', default: '/health', pattern: ROUTE_PATH, group: 'Endpoint path overrides', apps: F, help: 'Route of the health check.' },
  { key: 'httpSvcLivePath', env: ['DYN_HTTP_SVC_LIVE_PATH_ENV'], type: 'string', default: '/live', pattern: ROUTE_PATH, group: 'Endpoint path overrides', apps: F, help: 'Route of the liveness check.' },
  { key: 'httpSvcMetricsPath', env: ['DYN_HTTP_SVC_METRICS_PATH_ENV'], type: 'string', default: '/metrics', pattern: ROUTE_PATH, group: 'Endpoint path overrides', apps: F, help: 'Route of Prometheus metrics.' },

  // ---- Topology-aware KV transfer (worker environment; PROTOCOL §13)
  { key: 'topologyEnabled', env: ['DYN_TOPOLOGY_ENABLED'], type: 'bool', lenient: true, default: false, group: 'Topology-aware KV transfer (worker environment)', apps: WORKERS, help: 'Read topology files at worker startup (true/1/on/yes enable; unknown values warn and disable).' },
  { key: 'topologyMountPath', env: ['DYN_TOPOLOGY_MOUNT_PATH'], type: 'dir', default: '/etc/dynamo/topology', group: 'Topology-aware KV transfer (worker environment)', apps: WORKERS, help: 'One file per domain: name = domain, trimmed content = value; hidden/empty files ignored.' },
  { key: 'kvTransferDomain', env: ['DYN_KV_TRANSFER_DOMAIN'], type: 'string', default: null, defaultText: '— (required when enabled)', group: 'Topology-aware KV transfer (worker environment)', apps: WORKERS, help: 'Domain (file name) used for prefill -> decode constraints; the worker waits up to 30 s for it.' },
  { key: 'kvTransferEnforcement', env: ['DYN_KV_TRANSFER_ENFORCEMENT'], type: 'enum', choices: ['required', 'preferred'], default: 'required', defaultText: 'required (when a domain is set)', invalidMsg: 'DYN_KV_TRANSFER_ENFORCEMENT must be required or preferred, got "{v}"', group: 'Topology-aware KV transfer (worker environment)', apps: WORKERS, help: 'Hard filter on decode workers, or cost preference.' },
  { key: 'kvTransferPreferredWeight', env: ['DYN_KV_TRANSFER_PREFERRED_WEIGHT'], type: 'float', nullable: true, default: null, defaultText: '— (required for preferred)', invalidMsg: 'invalid DYN_KV_TRANSFER_PREFERRED_WEIGHT: {reason}', range: { min: 0, max: 1, msg: 'DYN_KV_TRANSFER_PREFERRED_WEIGHT must be between 0 and 1, got {v}', finite: true }, group: 'Topology-aware KV transfer (worker environment)', apps: WORKERS, help: 'Preferred-taint weight; multiplier exp(-tanh(weight)) on matching decode workers.' },

  // ---- Standalone indexer service (flags only; PROTOCOL §7.8)
  { key: 'blockSize', flag: '--block-size', type: 'u32', required: true, default: null, range: GE1, group: 'Standalone indexer service', apps: IDX, help: 'KV block size of the indexed workers.' },
  { key: 'port', flag: '--port', type: 'u16', default: 8090, group: 'Standalone indexer service', apps: IDX, help: 'HTTP port (PROTOCOL §7.8).' },
  { key: 'threads', flag: '--threads', type: 'u32', default: 4, range: GE1, group: 'Standalone indexer service', apps: IDX, help: 'Index writer lanes.' },
  { key: 'peers', flag: '--peers', type: 'urlList', default: [], group: 'Standalone indexer service', apps: IDX, help: 'Peer indexers to recover state from at startup (comma-separated URLs).' },

  // ---- Mocker engine (PROTOCOL §17)
  { key: 'modelPath', flag: '--model-path', type: 'path', required: true, default: null, group: 'Mocker engine', apps: M, help: 'Model directory or id (tokenizer).' },
  { key: 'endpoint', flag: '--endpoint', type: 'string', default: 'dyn://dynamo.backend.generate', group: 'Mocker engine', apps: WORKERS, help: 'Endpoint to serve, dyn://{namespace}.{component}.{endpoint}.' },
  { key: 'numGpuBlocksOverride', flag: '--num-gpu-blocks-override', type: 'u32', default: 16384, range: GE1, group: 'Mocker engine', apps: M, help: 'KV cache capacity in blocks (total_kv_blocks).' },
  { key: 'blockSize', flag: '--block-size', type: 'u32', default: 64, range: GE1, group: 'Mocker engine', apps: M, help: 'KV block size in tokens (card kv_cache_block_size).' },
  { key: 'maxNumSeqs', flag: '--max-num-seqs', type: 'u32', default: 256, range: GE1, group: 'Mocker engine', apps: M, help: 'Maximum running requests.' },
  { key: 'maxNumBatchedTokens', flag: '--max-num-batched-tokens', type: 'u32', default: 8192, range: GE1, group: 'Mocker engine', apps: M, help: 'Token budget per scheduler pass.' },
  { key: 'enablePrefixCaching', flag: '--enable-prefix-caching', type: 'bool', default: true, group: 'Mocker engine', apps: M, help: 'Prefix cache (and KV events).' },
  { key: 'enableChunkedPrefill', flag: '--enable-chunked-prefill', type: 'bool', default: true, group: 'Mocker engine', apps: M, help: 'Split long prompts across passes.' },
  { key: 'preemptionMode', flag: '--preemption-mode', type: 'enum', choices: ['lifo', 'fifo'], default: 'lifo', group: 'Mocker engine', apps: M, help: 'Which running request is preempted: most recently admitted (lifo) or oldest (fifo).' },
  { key: 'speedupRatio', flag: '--speedup-ratio', type: 'float', default: 1.0, range: GT0, group: 'Mocker engine', apps: M, help: 'Divides every pass time.' },
  { key: 'decodeSpeedupRatio', flag: '--decode-speedup-ratio', type: 'float', default: 1.0, range: GT0, group: 'Mocker engine', apps: M, help: 'Further divides the decode part of a pass.' },
  { key: 'dataParallelSize', flag: '--data-parallel-size', type: 'u32', default: 1, range: GE1, group: 'Mocker engine', apps: M, help: 'Data-parallel ranks per worker.' },
  { key: 'numWorkers', flag: '--num-workers', type: 'u32', default: 1, range: GE1, group: 'Mocker engine', apps: M, help: 'Simulated workers in this process.' },
  { key: 'startupTime', flag: '--startup-time', type: 'float', nullable: true, default: null, defaultText: 'none', range: GE0, group: 'Mocker engine', apps: M, help: 'Seconds to wait before registering.' },
  { key: 'staggerDelay', flag: '--stagger-delay', type: 'float', default: -1, defaultText: '-1 (auto)', group: 'Mocker engine', apps: M, help: 'Seconds between worker starts; negative = auto.' },
  { key: 'loraNames', flag: '--lora-names', env: ['DYN_MOCKER_LORA_NAMES'], type: 'string', default: null, group: 'Mocker engine', apps: ['mocker'], help: 'vLLM-compatible mode (--http-ports): comma-separated LoRA adapters each engine serves as models of their own (/v1/models entries with parent = the base model; a request names one in model).' },
  { key: 'engineType', flag: '--engine-type', type: 'enum', choices: ['vllm', 'sglang'], default: 'vllm', group: 'Mocker engine', apps: M, help: 'Scheduler flavour.' },
  { key: 'sglangMaxPrefillTokens', flag: '--sglang-max-prefill-tokens', type: 'u32', default: 16384, range: GE1, group: 'Mocker engine', apps: M, help: 'SGLang flavour: prefill token budget per pass.' },
  { key: 'mockerModelType', flag: '--model-type', env: ['KVR_MOCKER_MODEL_TYPE'], type: 'enum', choices: ['chat', 'embedding', 'images', 'videos'], default: 'chat', group: 'Mocker engine', apps: M, help: 'What the workers serve (card model_type): chat (and completions), embedding (deterministic unit vectors of --embedding-dim floats), images (small PNGs) or videos (MP4-like files); the last three on the request-plane endpoints embed / images / videos (docs/protocol.md §5.7).' },
  { key: 'embeddingDim', flag: '--embedding-dim', env: ['KVR_MOCKER_EMBEDDING_DIM'], type: 'u32', default: 384, range: { min: 1, max: 65536, msg: '{flag} must be in [1, 65536], got {v}' }, group: 'Mocker engine', apps: M, help: '--model-type embedding: length of every vector (card embedding_dim).' },
  { key: 'disaggregationMode', flag: '--disaggregation-mode', type: 'enum', choices: ['agg', 'prefill', 'decode'], default: 'agg', group: 'Mocker engine', apps: M, help: 'Aggregated, prefill-only or decode-only worker.' },
  { key: 'kvTransferBandwidth', flag: '--kv-transfer-bandwidth', type: 'float', default: 64, range: GT0, group: 'Mocker engine', apps: M, help: 'KV transfer bandwidth in GB/s (prefill worker delay).' },
  { key: 'kvCacheDtype', flag: '--kv-cache-dtype', type: 'string', default: 'auto', group: 'Mocker engine', apps: M, help: 'KV cache dtype (sizes kv_bytes_per_token).' },
  { key: 'kvBytesPerToken', flag: '--kv-bytes-per-token', type: 'u64', nullable: true, default: null, range: GE1, group: 'Mocker engine', apps: M, help: 'KV bytes per token; overrides the model-derived value.' },
  { key: 'bootstrapPorts', flag: '--bootstrap-ports', type: 'u16List', nullable: true, default: null, group: 'Mocker engine', apps: M, help: 'Comma-separated ports where decode workers meet their prefill peer.' },
  { key: 'zmqKvEventsPorts', flag: '--zmq-kv-events-ports', type: 'u16List', nullable: true, default: null, group: 'Mocker engine', apps: M, help: 'Publish KV events as vLLM ZMQ batches on these ports (base + dp rank).' },
  { key: 'zmqReplayPorts', flag: '--zmq-replay-ports', type: 'u16List', nullable: true, default: null, group: 'Mocker engine', apps: M, help: 'ROUTER sockets answering replay requests.' },
  { key: 'durableKvEvents', flag: '--durable-kv-events', type: 'bool', default: false, deprecated: 'the event-plane local-indexer path (drop the flag)', group: 'Mocker engine', apps: M, help: 'Publish KV events to JetStream (§5.3).' },
  { key: 'plannerProfileData', flag: '--planner-profile-data', type: 'path', default: null, group: 'Mocker engine', apps: M, help: 'Profiler data to interpolate pass times from.' },
  { key: 'aicPerfModel', flag: '--aic-perf-model', type: 'bool', default: false, group: 'Mocker engine', apps: M, help: 'Use the AIC performance model for pass times (with --aic-system).' },
  { key: 'reasoning', flag: '--reasoning', type: 'json', default: null, group: 'Mocker engine', apps: M, help: 'Reasoning output simulation settings (JSON).' },
  { key: 'extraEngineArgs', flag: '--extra-engine-args', type: 'path', default: null, group: 'Mocker engine', apps: M, help: 'JSON file overriding flags (read by the mocker app).' },
  { key: 'mockerKvCacheTrace', env: ['DYN_MOCKER_KV_CACHE_TRACE'], type: 'bool', default: false, group: 'Mocker engine', apps: M, help: 'Log block-manager activity.' },
] as const satisfies readonly FlagSpec[];

export type FlagRow = (typeof FLAGS)[number];

type BaseValue<E> = E extends { type: 'bool' }
  ? boolean
  : E extends { type: 'u16' | 'u32' | 'float' }
    ? number
    : E extends { type: 'u64' }
      ? bigint
      : E extends { type: 'enum'; choices: readonly (infer C)[] }
        ? C
        : E extends { type: 'urlList' }
          ? readonly string[]
          : E extends { type: 'u16List' }
            ? readonly number[]
            : E extends { type: 'json' }
              ? unknown
              : string;

/** Required and computed rows always resolve to a value; unset-by-default and nullable rows may be null. */
export type ValueOf<E> = E extends { required: true } | { computed: true }
  ? BaseValue<E>
  : E extends { default: null } | { nullable: true }
    ? BaseValue<E> | null
    : BaseValue<E>;

/** The resolved, frozen configuration of app A (all apps' keys when A is the union). */
export type ResolvedConfig<A extends App = App> = {
  readonly [E in FlagRow as A extends E['apps'][number] ? E['key'] : never]: ValueOf<E>;
};

export type ConfigKey<A extends App = App> = keyof ResolvedConfig<A> & string;

const byApp = new Map<App, readonly FlagSpec[]>();

/** The rows an app uses, in table order. */
export function flagsFor(app: App): readonly FlagSpec[] {
  let rows = byApp.get(app);
  if (!rows) {
    rows = (FLAGS as readonly FlagSpec[]).filter((f) => f.apps.includes(app));
    byApp.set(app, rows);
  }
  return rows;
}

/** `--no-x` for a boolean `--x`. */
export function negationOf(flag: string): string {
  return `--no-${flag.slice(2)}`;
}

/** The name used in messages: the CLI flag, else the first env var. */
export function displayName(f: FlagSpec): string {
  return f.flag ?? f.env?.[0] ?? f.key;
}
