/**
 * Frontend request metrics of PROTOCOL §16 (prefix `--metrics-prefix`, default `dynamo_frontend`;
 * the prefix applies to this group only). Per-request updates go through `RequestTracker`
 * (lifecycle.ts); the methods here are the events that are not tied to one request's lifecycle.
 */
import type { Registry } from 'prom-client';
import { BUCKETS, type OverridableHistogram } from './buckets.js';
import {
  DEFAULT_FRONTEND_PREFIX,
  FRONTEND,
  MIGRATION_TYPES,
  PREFIX_RE,
  STAGES,
  TOKENIZER_OPERATIONS,
  type MigrationType,
  type Stage,
  type TokenizerOperation,
} from './names.js';
import { frontendBucketLists, resolveFrontendBuckets, type BucketOverrides } from './overrides.js';
import { counter, gauge, histogram } from './registry.js';
import { type CounterFamily, type GaugeFamily, type HistogramFamily, reserveNames } from './series.js';
import { checkCount, checkNonNeg, checkOneOf, checkString, invalid } from './validate.js';

export interface FrontendMetricsOptions {
  /** `--metrics-prefix` (default `dynamo_frontend`). */
  prefix?: string;
  /** `DYN_METRICS_*` overrides (see `bucketOverridesFromEnv` / `bucketOverridesFromConfig`). */
  buckets?: BucketOverrides;
}

/** The model gauges; absent fields leave the gauge as it was (upstream sets only known values). */
export interface ModelConfigGauges {
  total_kv_blocks?: number | null;
  max_num_seqs?: number | null;
  max_num_batched_tokens?: number | null;
  context_length?: number | null;
  kv_cache_block_size?: number | null;
  migration_limit?: number | null;
}

type M = 'model';

export class FrontendMetrics {
  readonly prefix: string;
  /** Bucket lists in use after the overrides (cached_tokens shares the input-sequence list). */
  readonly buckets: Readonly<Record<OverridableHistogram, readonly number[]>>;

  readonly requestsTotal: CounterFamily<'model' | 'endpoint' | 'request_type' | 'status' | 'error_type'>;
  readonly inflightRequests: GaugeFamily<M>;
  readonly queuedRequests: GaugeFamily<M>;
  readonly disconnectedClients: CounterFamily<never>;
  readonly requestDurationSeconds: HistogramFamily<M>;
  readonly inputSequenceTokens: HistogramFamily<M>;
  readonly outputSequenceTokens: HistogramFamily<M>;
  readonly timeToFirstTokenSeconds: HistogramFamily<M>;
  readonly interTokenLatencySeconds: HistogramFamily<M>;
  readonly outputTokensTotal: CounterFamily<M>;
  readonly cachedTokens: HistogramFamily<M>;
  readonly kvHitRate: HistogramFamily<M>;
  readonly tokenizerLatencyMs: HistogramFamily<'operation'>;
  readonly modelTotalKvBlocks: GaugeFamily<M>;
  readonly modelMaxNumSeqs: GaugeFamily<M>;
  readonly modelMaxNumBatchedTokens: GaugeFamily<M>;
  readonly modelContextLength: GaugeFamily<M>;
  readonly modelKvCacheBlockSize: GaugeFamily<M>;
  readonly modelMigrationLimit: GaugeFamily<M>;
  readonly modelMigrationTotal: CounterFamily<'model' | 'migration_type'>;
  readonly modelMigrationMaxSeqLenExceededTotal: CounterFamily<M>;
  readonly modelCancellationTotal: CounterFamily<M>;
  readonly modelRejectionTotal: CounterFamily<M>;
  readonly stageDurationSeconds: HistogramFamily<'stage'>;
  readonly internalErrorsTotal: CounterFamily<'route'>;

  constructor(registry: Registry, opts: FrontendMetricsOptions = {}) {
    const prefix = opts.prefix ?? DEFAULT_FRONTEND_PREFIX;
    if (typeof prefix !== 'string' || !PREFIX_RE.test(prefix))
      throw invalid('--metrics-prefix', 'must match [a-zA-Z_:][a-zA-Z0-9_:]*', prefix);
    // Resolved before anything is registered: a bad override leaves the registry untouched.
    const b = frontendBucketLists(resolveFrontendBuckets(opts.buckets));
    reserveNames(
      registry,
      Object.values(FRONTEND).map((suffix) => `${prefix}_${suffix}`),
    );
    this.prefix = prefix;
    this.buckets = b;
    const n = (suffix: string) => `${prefix}_${suffix}`;
    const m = ['model'] as const;

    this.requestsTotal = counter(
      registry,
      n(FRONTEND.requestsTotal),
      'Total number of LLM requests processed',
      ['model', 'endpoint', 'request_type', 'status', 'error_type'],
    );
    this.inflightRequests = gauge(registry, n(FRONTEND.inflightRequests), 'Number of inflight requests', m);
    this.queuedRequests = gauge(
      registry,
      n(FRONTEND.queuedRequests),
      'Number of requests in HTTP processing queue (handler entry to first token)',
      m,
    );
    this.disconnectedClients = counter(
      registry,
      n(FRONTEND.disconnectedClients),
      'Number of disconnected clients',
      [],
    );
    this.requestDurationSeconds = histogram(
      registry,
      n(FRONTEND.requestDurationSeconds),
      'Duration of LLM requests',
      m,
      b.requestDuration,
    );
    this.inputSequenceTokens = histogram(
      registry,
      n(FRONTEND.inputSequenceTokens),
      'Input sequence length in tokens',
      m,
      b.inputSequence,
    );
    this.outputSequenceTokens = histogram(
      registry,
      n(FRONTEND.outputSequenceTokens),
      'Output sequence length in tokens',
      m,
      b.outputSequence,
    );
    this.timeToFirstTokenSeconds = histogram(
      registry,
      n(FRONTEND.timeToFirstTokenSeconds),
      'Time to first token in seconds',
      m,
      b.ttft,
    );
    this.interTokenLatencySeconds = histogram(
      registry,
      n(FRONTEND.interTokenLatencySeconds),
      'Inter-token latency in seconds',
      m,
      b.itl,
    );
    this.outputTokensTotal = counter(
      registry,
      n(FRONTEND.outputTokensTotal),
      'Total number of output tokens generated (updates in real-time)',
      m,
    );
    this.cachedTokens = histogram(
      registry,
      n(FRONTEND.cachedTokens),
      'Number of cached tokens (prefix cache hits) per request',
      m,
      b.inputSequence,
    );
    this.kvHitRate = histogram(
      registry,
      n(FRONTEND.kvHitRate),
      'Predicted KV cache hit rate of the selected worker at routing time',
      m,
      BUCKETS.kvHitRate,
    );
    this.tokenizerLatencyMs = histogram(
      registry,
      n(FRONTEND.tokenizerLatencyMs),
      'Tokenizer latency in milliseconds',
      ['operation'],
      BUCKETS.tokenizerLatencyMs,
    );
    const g = (suffix: string, help: string) => gauge(registry, n(suffix), help, m);
    this.modelTotalKvBlocks = g(
      FRONTEND.modelTotalKvBlocks,
      'Total KV cache blocks available for a worker serving the model',
    );
    this.modelMaxNumSeqs = g(
      FRONTEND.modelMaxNumSeqs,
      'Maximum number of sequences for a worker serving the model',
    );
    this.modelMaxNumBatchedTokens = g(
      FRONTEND.modelMaxNumBatchedTokens,
      'Maximum number of batched tokens for a worker serving the model',
    );
    this.modelContextLength = g(
      FRONTEND.modelContextLength,
      'Maximum context length in tokens for a worker serving the model',
    );
    this.modelKvCacheBlockSize = g(
      FRONTEND.modelKvCacheBlockSize,
      'KV cache block size in tokens for a worker serving the model',
    );
    this.modelMigrationLimit = g(
      FRONTEND.modelMigrationLimit,
      'Maximum number of request migrations allowed for the model',
    );
    this.modelMigrationTotal = counter(
      registry,
      n(FRONTEND.modelMigrationTotal),
      'Total number of request migrations due to worker unavailability',
      ['model', 'migration_type'],
    );
    this.modelMigrationMaxSeqLenExceededTotal = counter(
      registry,
      n(FRONTEND.modelMigrationMaxSeqLenExceededTotal),
      'Total number of times migration was disabled by max_seq_len limit',
      m,
    );
    this.modelCancellationTotal = counter(
      registry,
      n(FRONTEND.modelCancellationTotal),
      'Total number of request cancellations',
      m,
    );
    this.modelRejectionTotal = counter(
      registry,
      n(FRONTEND.modelRejectionTotal),
      'Total number of requests rejected due to resource exhaustion',
      m,
    );
    this.stageDurationSeconds = histogram(
      registry,
      n(FRONTEND.stageDurationSeconds),
      'Frontend pipeline stage duration in seconds',
      ['stage'],
      BUCKETS.stageDuration,
    );
    this.internalErrorsTotal = counter(
      registry,
      n(FRONTEND.internalErrorsTotal),
      'Requests that failed with an internal error (HTTP 500; each one is logged with its request id, route and stack)',
      ['route'],
    );
  }

  /** Sets the model gauges from a card / runtime config (§6.4); null or absent fields are skipped. */
  setModelConfig(model: string, c: ModelConfigGauges): void {
    const label = modelLabel(model);
    const pairs: Array<[GaugeFamily<M>, number | null | undefined, string]> = [
      [this.modelTotalKvBlocks, c.total_kv_blocks, 'total_kv_blocks'],
      [this.modelMaxNumSeqs, c.max_num_seqs, 'max_num_seqs'],
      [this.modelMaxNumBatchedTokens, c.max_num_batched_tokens, 'max_num_batched_tokens'],
      [this.modelContextLength, c.context_length, 'context_length'],
      [this.modelKvCacheBlockSize, c.kv_cache_block_size, 'kv_cache_block_size'],
      [this.modelMigrationLimit, c.migration_limit, 'migration_limit'],
    ];
    for (const [, v, field] of pairs) if (v != null) checkCount(field, v);
    for (const [gg, v] of pairs) if (v != null) gg.set({ model: label }, v);
  }

  migration(model: string, type: MigrationType): void {
    const t = checkOneOf('migration_type', MIGRATION_TYPES, type);
    this.modelMigrationTotal.inc({ model: modelLabel(model), migration_type: t });
  }

  migrationMaxSeqLenExceeded(model: string): void {
    this.modelMigrationMaxSeqLenExceededTotal.inc({ model: modelLabel(model) });
  }

  observeStage(stage: Stage, seconds: number): void {
    const s = checkOneOf('stage', STAGES, stage);
    this.stageDurationSeconds.observe({ stage: s }, checkNonNeg('seconds', seconds));
  }

  /** One internal error (HTTP 500) on an HTTP route (the route pattern, not the raw URL). */
  internalError(route: string): void {
    this.internalErrorsTotal.inc({ route: checkString('route', route) });
  }

  observeTokenizer(operation: TokenizerOperation, ms: number): void {
    const op = checkOneOf('operation', TOKENIZER_OPERATIONS, operation);
    this.tokenizerLatencyMs.observe({ operation: op }, checkNonNeg('ms', ms));
  }
}

/** Upstream lowercases the model label, so `Llama-3` and `llama-3` are one series. */
export function modelLabel(model: string): string {
  return checkString('model', model).toLowerCase();
}
