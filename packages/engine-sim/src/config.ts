import { KvrError } from '@kvrouter/protocols';

export type PreemptionMode = 'lifo' | 'fifo';
export type EngineType = 'vllm' | 'sglang';

/**
 * Upstream mocker `--reasoning` JSON (`{"start_thinking_token_id", "end_thinking_token_id",
 * "thinking_ratio"}`): the first `floor(thinking_ratio · max_tokens)` output tokens are a reasoning
 * span wrapped in the two marker tokens.
 */
export interface ReasoningConfig {
  startThinkingTokenId: number;
  endThinkingTokenId: number;
  /** Share of each request's `maxTokens` spent reasoning, markers included (0..1). */
  thinkingRatio: number;
}

/**
 * The engine-model knobs of docs/protocol.md §17 (mocker CLI in parentheses). Process-level mocker flags
 * (workers, startup time, ports, planes, disaggregation) belong to the mocker app, not to the model.
 */
export interface EngineConfig {
  /** KV capacity in blocks per dp rank, active + inactive (`--num-gpu-blocks-override`). */
  numGpuBlocks: number;
  /** Tokens per KV block (`--block-size`). */
  blockSize: number;
  /** Most requests running at once per rank (`--max-num-seqs`). */
  maxNumSeqs: number;
  /** Token budget of one scheduler pass (`--max-num-batched-tokens`). */
  maxNumBatchedTokens: number;
  /** Share full blocks between requests and keep freed ones cached; off = no KV events (`--enable-prefix-caching`). */
  enablePrefixCaching: boolean;
  /** Split long prompts across passes (`--enable-chunked-prefill`). */
  enableChunkedPrefill: boolean;
  /** Victim choice when a running request cannot get a block (`--preemption-mode`). */
  preemptionMode: PreemptionMode;
  /** Divides the whole pass time (`--speedup-ratio`). */
  speedupRatio: number;
  /** Further divides the decode part (`--decode-speedup-ratio`). */
  decodeSpeedupRatio: number;
  /** Independent block manager + scheduler per rank (`--data-parallel-size`). */
  dataParallelSize: number;
  /** Seed of the generated-token stream (implementation choice). */
  seed: number;
  /** Generated token ids are drawn from [1, vocabSize − 1] (§18 default vocabulary 32000). */
  vocabSize: number;
  /** Scheduler flavour (`--engine-type`): vLLM block manager + scheduler, or SGLang radix cache + scheduler. */
  engineType: EngineType;
  /** SGLang flavour: prefill token budget of one pass (`--sglang-max-prefill-tokens`). */
  sglangMaxPrefillTokens: number;
  /** Reasoning-token structure of the output (`--reasoning`); null = plain tokens. */
  reasoning: Readonly<ReasoningConfig> | null;
}

export const DEFAULT_ENGINE_CONFIG: Readonly<EngineConfig> = Object.freeze({
  numGpuBlocks: 16384,
  blockSize: 64,
  maxNumSeqs: 256,
  maxNumBatchedTokens: 8192,
  enablePrefixCaching: true,
  enableChunkedPrefill: true,
  preemptionMode: 'lifo',
  speedupRatio: 1.0,
  decodeSpeedupRatio: 1.0,
  dataParallelSize: 1,
  seed: 0,
  vocabSize: 32000,
  engineType: 'vllm',
  sglangMaxPrefillTokens: 16384,
  reasoning: null,
});

function bad(field: keyof EngineConfig, want: string, got: unknown): never {
  throw new KvrError(
    'invalid_engine_config',
    `engine config ${field}: expected ${want}, got ${String(got)}`,
    400,
    {
      field,
    },
  );
}

// Typed arrays indexed by slot/block make 2^31 a hard ceiling; the tighter limits keep memory sane.
function int(field: keyof EngineConfig, v: unknown, lo: number, hi: number): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < lo || v > hi)
    bad(field, `an integer in [${lo}, ${hi}]`, v);
  return v;
}

function positive(field: keyof EngineConfig, v: unknown): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) bad(field, 'a finite number > 0', v);
  return v;
}

function bool(field: keyof EngineConfig, v: unknown): boolean {
  if (typeof v !== 'boolean') bad(field, 'a boolean', v);
  return v;
}

/** Defaults filled in and every field checked; throws `invalid_engine_config` naming the field. */
export function resolveEngineConfig(partial: Partial<EngineConfig> = {}): Readonly<EngineConfig> {
  for (const k of Object.keys(partial)) {
    if (!(k in DEFAULT_ENGINE_CONFIG)) {
      throw new KvrError('invalid_engine_config', `engine config: unknown field ${k}`, 400, { field: k });
    }
  }
  const c = { ...DEFAULT_ENGINE_CONFIG, ...partial };
  if (c.preemptionMode !== 'lifo' && c.preemptionMode !== 'fifo') {
    bad('preemptionMode', "'lifo' or 'fifo'", c.preemptionMode);
  }
  if (c.engineType !== 'vllm' && c.engineType !== 'sglang')
    bad('engineType', "'vllm' or 'sglang'", c.engineType);
  return Object.freeze({
    numGpuBlocks: int('numGpuBlocks', c.numGpuBlocks, 1, 1 << 28),
    blockSize: int('blockSize', c.blockSize, 1, 1 << 16),
    maxNumSeqs: int('maxNumSeqs', c.maxNumSeqs, 1, 1 << 20),
    maxNumBatchedTokens: int('maxNumBatchedTokens', c.maxNumBatchedTokens, 1, 1 << 30),
    enablePrefixCaching: bool('enablePrefixCaching', c.enablePrefixCaching),
    enableChunkedPrefill: bool('enableChunkedPrefill', c.enableChunkedPrefill),
    preemptionMode: c.preemptionMode,
    speedupRatio: positive('speedupRatio', c.speedupRatio),
    decodeSpeedupRatio: positive('decodeSpeedupRatio', c.decodeSpeedupRatio),
    dataParallelSize: int('dataParallelSize', c.dataParallelSize, 1, 1024),
    seed: int('seed', c.seed, 0, 0xffffffff),
    vocabSize: int('vocabSize', c.vocabSize, 2, 0xffffffff),
    engineType: c.engineType,
    sglangMaxPrefillTokens: int('sglangMaxPrefillTokens', c.sglangMaxPrefillTokens, 1, 1 << 30),
    reasoning: reasoningOf(c.reasoning),
  });
}

function reasoningOf(v: unknown): Readonly<ReasoningConfig> | null {
  if (v === null) return null;
  if (typeof v !== 'object' || Array.isArray(v)) bad('reasoning', 'null or an object', JSON.stringify(v));
  const o = v as Record<string, unknown>;
  const id = (k: 'startThinkingTokenId' | 'endThinkingTokenId'): number => {
    const x = o[k];
    if (typeof x !== 'number' || !Number.isInteger(x) || x < 0 || x > 0xffffffff) {
      bad('reasoning', `${k} a u32`, x);
    }
    return x;
  };
  const r = o.thinkingRatio;
  if (typeof r !== 'number' || !(r >= 0 && r <= 1)) bad('reasoning', 'thinkingRatio in [0, 1]', r);
  const start = id('startThinkingTokenId');
  const end = id('endThinkingTokenId');
  if (start === end) bad('reasoning', 'different start and end thinking token ids', start);
  return Object.freeze({ startThinkingTokenId: start, endThinkingTokenId: end, thinkingRatio: r });
}
