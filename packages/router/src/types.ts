/**
 * Public shapes of the router: options, the request it routes, the decision it returns and the
 * per-decision explanation.
 */
import type {
  AdmissionControl,
  BusyThresholds,
  CostParams,
  QueuePolicy,
  RouterConfigOverride,
  RouterMode,
} from '@kvrouter/core-cost';
import type {
  ActiveLoad,
  ActiveSequenceEvent,
  BlockHashOptions,
  Clock,
  Nvext,
  RoutingConstraints,
  WorkerId,
  WorkerWithDpRank,
} from '@kvrouter/protocols';
import type { KvIndexer } from '@kvrouter/radix-indexer';
import type { SessionRpcPayload } from './sessions.js';
import type { TruthThresholds } from './truth.js';

/** Indexes that learn from this router's own decisions (approximate primary, side index; §7.5, §7.6). */
export interface RoutingRecorder {
  recordRouting(worker: WorkerWithDpRank, local: Uint32Array, seq: Uint32Array, n?: number): void;
}

/** AIC prefill-duration predictor (§9.4): ms for one request on `worker`, or null for no prediction. */
export type PrefillDurationPredictor = (q: {
  worker: WorkerWithDpRank;
  isl: number;
  /** Tokens already cached on that rank (`cached_tokens`). */
  prefixTokens: number;
}) => number | null;

/** One routing decision's phase timings in ms (metric names `dynamo_router_overhead_<key>_ms`, §16). */
export interface RouterOverhead {
  block_hashing: number;
  seq_hashing: number;
  indexer_find_matches: number;
  scheduling: number;
  total: number;
}

export interface DecisionLogOptions {
  /** Receives one JSON line per sampled decision (no prompt text, no token ids). */
  sink: (line: string) => void;
  /** Fraction of decisions logged, 0..1 (`--decision-log-sample`). */
  sampleRate: number;
  /** Sampling source; defaults to the router's `random`. */
  random?: () => number;
}

export type RouterPhase = 'aggregated' | 'prefill' | 'decode';

/**
 * Routing policy: plain data (no functions), what the configuration decides. `routerParamsFromConfig`
 * builds it; it is given to the router as is.
 */
export interface RouterPolicy {
  /** `--router-mode`; default `kv` (this is the KV router; other modes share its worker set). */
  mode?: RouterMode;
  /** Which pins of `nvext` apply (§15): aggregated/decode use `backend_instance_id`, prefill the prefill ids. */
  phase?: RouterPhase;
  /** Cost and booking parameters (§8.3, §8.4); defaults per `DEFAULT_COST_PARAMS`. */
  cost?: Partial<CostParams>;
  /** `--router-track-output-blocks`. */
  trackOutputBlocks?: boolean;
  /** `DYN_ROUTER_ACTIVE_REQUEST_EXPIRY_SECS` (300). */
  activeRequestExpirySecs?: number;
  /** `--router-queue-threshold` (16); null disables the queue. */
  queueThreshold?: number | null;
  /** `--router-queue-policy` (fcfs). */
  queuePolicy?: QueuePolicy;
  /** Use `agent_hints.strict_priority` as an outer queue tier (N, optional). */
  strictPriority?: boolean;
  /** `DYN_ROUTER_OVERLAP_REFRESH_AFTER_SECS` (10; 0 disables). */
  overlapRefreshAfterSecs?: number;
  /** `--admission-control` (none): `none` clears the busy thresholds. */
  admissionControl?: AdmissionControl;
  /** Busy thresholds (§11); missing fields take the defaults, null disables one. */
  busyThresholds?: Partial<BusyThresholds>;
  /** `DYN_ENCODER_CUDA_TO_CPU_RATIO` (8). */
  cudaToCpuRatio?: number;
  /** `--router-predicted-ttl-secs`: builds a local side index with this TTL when `deps.sideIndexer` is absent. */
  predictedTtlSecs?: number | null;
  /** Fill `explanation.candidates` for every decision (default false: only on request or when logged). */
  explain?: boolean;
}

/** Collaborators the router computes with (injected so the simulator drives the same code). */
export interface RouterDeps {
  clock: Clock;
  /** Uniform in [0, 1): tie-breaks, softmax, random mode, random block ids. */
  random: () => number;
  /** High-resolution timer in ms for overhead timings (e.g. `performance.now`); default `clock.now`. */
  hrtime?: () => number;
  /**
   * Primary index (event-driven, approximate, the pool, or a `RemoteIndexer`). Absent/null: every
   * overlap is 0 (§7.4). An index with `prefetch` (the remote one, §7.7) is asked before the gate.
   */
  indexer?: (KvIndexer & Partial<RoutingRecorder> & Partial<PrefetchingIndexer>) | null;
  /** Predict-on-route side index (§7.6); queries take the per-rank max with the primary. */
  sideIndexer?: (KvIndexer & RoutingRecorder) | null;
  /** `--router-prefill-load-model aic`: predicted prefill durations; the queue is re-checked every 100 ms. */
  prefillDurationPredictor?: PrefillDurationPredictor | null;
}

/** Transports to the rest of the deployment (§5.4–§5.6) and the decision log. */
export interface RouterPorts {
  /** This router's discovery instance id (replica sync `router_id`, decision log). */
  routerId?: bigint;
  /** Replica sync (§5.4): receives this router's own booking events. Needs `routerId`. */
  publishActiveSequenceEvent?: ((ev: ActiveSequenceEvent) => void) | null;
  /** `session_control` RPC to the bound worker (§5.6); rejects on an error reply. */
  sessionRpc?: ((worker: WorkerWithDpRank, payload: SessionRpcPayload) => Promise<unknown>) | null;
  /** Sampled JSON decision log (`--decision-log`). */
  decisionLog?: DecisionLogOptions | null;
}

/** Observers: nothing they return or throw changes a decision (a throw goes to `onError`). */
export interface RouterHooks {
  /** Receives this router's projected load of a rank after every change (§5.5 `ActiveLoad`, gauges). */
  publishLoad?: ((load: ActiveLoad) => void) | null;
  onOverhead?: ((o: RouterOverhead) => void) | null;
  /** Queue depth after every change (`dynamo_frontend_router_queue_pending_requests`). */
  onQueueChange?: ((pending: number) => void) | null;
  /** Failures in background work (close_session RPCs, overlap refresh, sinks). */
  onError?: ((err: unknown, context: string) => void) | null;
}

/** An index answered asynchronously (§7.7): `prefetch` parks the answer the synchronous lookup reads. */
export interface PrefetchingIndexer {
  /** Local block hashes as (lo, hi) pairs; never rejects (a failure leaves no answer). */
  prefetch(local: Uint32Array): Promise<void>;
}

export interface KvRouterOptions {
  /** KV block size in tokens (card `kv_cache_block_size` or `--kv-cache-block-size`). */
  blockSize: number;
  /** Eagle hashing windows (card `enable_eagle`, §2.1). */
  isEagle?: boolean;
  policy?: RouterPolicy;
  deps: RouterDeps;
  ports?: RouterPorts;
  hooks?: RouterHooks;
  /**
   * Truth check (`truth.ts`, issue 19) thresholds over `DEFAULT_TRUTH_THRESHOLDS`; `false` turns the
   * check off (no load-only override). On by default in kv mode with an index.
   */
  truth?: Partial<TruthThresholds> | false;
}

/**
 * Names of two prefixes of a prompt's tokens. A name (an integer >= 0) stands for one token
 * sequence for the life of the process: whoever hands out names never gives one to two different
 * sequences. -1: no name.
 */
export interface TokensPrefix {
  /** The earlier prompt's prefix this one extends: `tokens[0, reusedTokens)` is that sequence. */
  reused: number;
  reusedTokens: number;
  /** This prompt's own prefix `tokens[0, leafTokens)`, under which its hashes are kept. */
  leaf: number;
  leafTokens: number;
}

export interface RouteRequest {
  requestId: string;
  /** Prompt token ids; `nvext.token_data` is used when absent. */
  tokens?: Uint32Array;
  /** Prompt length in tokens (default `tokens.length`). */
  isl?: number;
  nvext?: Nvext;
  loraName?: string;
  /** Multimodal object hashes per block (§2.1). */
  mmHashes?: BlockHashOptions['mmHashes'];
  /**
   * What the tokenizer knows of `tokens`' prefixes (the frontend's prompt-prefix cache): the router
   * hashes only the blocks after the earlier turn's kept chain (`hash-chains.ts`). Used with
   * `tokens` only, for plain blocks (no LoRA, multimodal hashes or Eagle).
   */
  tokensPrefix?: TokensPrefix;
  /** Per-request overrides (§8.7); `agent_hints.kv_overlap_score_credit` fills `overlap_score_credit`. */
  overrides?: RouterConfigOverride;
  /** Header `x-worker-instance-id` (prefill phase: `x-prefill-instance-id`); wins over nvext. */
  pinHeader?: string;
  /** Routing hints: only these worker ids are candidates. */
  allowedWorkerIds?: Iterable<bigint>;
  /** §13 constraints (required taints filter, preferred taints multiply the cost). */
  constraints?: RoutingConstraints;
  /** Programmatic query-only (also set by the `query_instance_id:` annotation). */
  queryOnly?: boolean;
  /** Fill `explanation.candidates` for this decision. */
  explain?: boolean;
  /** Aborting removes the request from the queue while it is parked. */
  signal?: AbortSignal;
}

export type ReasonCode =
  | 'kv_argmin'
  | 'kv_softmax'
  | 'pinned'
  | 'session'
  | 'pinned_unbooked'
  | 'round_robin'
  | 'random'
  | 'least_loaded'
  | 'device_aware_weighted'
  | 'power_of_two'
  | 'direct';

/** Every §8.3 term of one candidate plus the load snapshot it was scored with. */
export interface CandidateTerms {
  worker_id: WorkerId;
  dp_rank: number;
  device_blocks: number;
  effective_overlap: number;
  cached_tokens: number;
  active_prefill_tokens: number;
  active_decode_blocks: number;
  active_requests: number;
  active_prefix_depth: number;
  raw_prefill: number;
  decay: number;
  credit_blocks: number;
  prefill_term: number;
  decode: number;
  additional: number;
  active_request_term: number;
  logit: number;
  taint_multiplier: number;
  cost: number;
}

export interface DecisionExplanation {
  reason: ReasonCode;
  mode: RouterMode;
  temperature: number;
  /** Candidates left after the filters of §8.1. */
  candidateCount: number;
  /** Compatible workers' ranks removed as busy (§11). */
  busyFiltered: number;
  /** The chosen candidate's terms (kv mode). */
  chosen: CandidateTerms | null;
  /** Every candidate's terms, in candidate order (when explaining). */
  candidates?: CandidateTerms[];
  /** ms spent parked in the queue. */
  queuedMs: number;
  /** Overlaps were re-queried at dequeue (§10). */
  overlapRefreshed: boolean;
  /** kv mode: which cost scored the candidates (`--router-policy`). */
  costPolicy?: 'dynamo' | 'ttft';
}

export interface RoutingDecision {
  requestId: string;
  worker: WorkerWithDpRank;
  workerId: WorkerId;
  dpRank: number;
  /** Device-overlap blocks of the chosen rank. */
  overlapBlocks: number;
  /**
   * kv mode: the index's device overlap of the chosen rank as the index answered it, before the
   * truth check's load-only override (equal to `overlapBlocks` unless the worker is load-only).
   */
  indexOverlapBlocks?: number;
  /**
   * kv mode: blocks of the prompt's prefix held by requests active on the chosen rank when it was
   * chosen (§9.1 `active_prefix_depth`): being prefilled or decoded there, possibly not reported
   * stored yet. The engine may already count them as cached; the truth check accepts that.
   */
  inflightPrefixBlocks?: number;
  cachedTokens: number;
  /** ceil(isl / bs). */
  requiredBlocks: number;
  /** overlapBlocks / requiredBlocks (0 when the prompt has no block). */
  kvHitRate: number;
  /** Load booked on the rank (false: query-only, non-kv modes, or a pin the router does not know). */
  booked: boolean;
  queryOnly: boolean;
  /** Query-only: the prompt token ids (§15). */
  tokenData?: Uint32Array;
  explanation: DecisionExplanation;
}
