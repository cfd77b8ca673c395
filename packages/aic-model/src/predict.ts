/**
 * The analytic prefill model: a per-layer roofline on one GPU of the tensor-parallel group.
 * Each piece of work takes max(FLOPs / (peak · efficiency), bytes / (bandwidth · efficiency));
 * collectives add bytes over the link plus a latency; the backend adds a fixed step overhead.
 * README "The model" states every term and assumption.
 */
import { KvrError, invalidArgument } from '@kvrouter/protocols';
import { backendSpec, type BackendSpec } from './backends.js';
import type { ModelShape } from './models.js';
import { systemSpec, type SystemSpec } from './systems.js';

export interface AicModelOptions {
  /** `--aic-backend`: vllm | sglang | trtllm. */
  backend: string;
  /** `--aic-system`: h100_sxm | h200_sxm | b200_sxm | a100_sxm | l40s. */
  system: string;
  model: ModelShape;
  /** `--aic-backend-version`; recorded only (one set of factors per backend). */
  backendVersion?: string | null;
  /** `--aic-tp-size` (1). */
  tpSize?: number;
  /** `--aic-moe-tp-size`, `--aic-moe-ep-size`, `--aic-attention-dp-size`; unset = TP-only MoE. */
  moeTpSize?: number | null;
  moeEpSize?: number | null;
  attentionDpSize?: number | null;
}

export interface PrefillQuery {
  /** Prompt length in tokens. */
  isl: number;
  /** Tokens of the prompt already in the KV cache (not recomputed, but attended to). */
  prefix?: number;
  /** Identical requests prefilled together. */
  batch?: number;
}

/** Milliseconds per component of one prediction. */
export interface PrefillBreakdown {
  /** Linear layers (attention projections, MLP / experts, LM head). */
  gemmMs: number;
  /** Attention core (QK^T, softmax, PV) incl. reading the cached prefix's KV. */
  attnMs: number;
  /** TP all-reduce and EP all-to-all. */
  commMs: number;
  overheadMs: number;
  totalMs: number;
}

/** Bytes per KV element: a BF16 KV cache (an FP8 cache is an engine option config.json does not carry). */
const KV_BYTES = 2;
/** Activation bytes per element on the wire (BF16). */
const ACT_BYTES = 2;

/** A flag error with upstream's exact message (the flag is `detail.field`, as for every invalid_argument). */
const invalid = (flag: string, message: string): KvrError =>
  new KvrError('invalid_argument', message, undefined, { field: flag });

function size(flag: string, v: number | null | undefined, dflt: number | null): number | null {
  if (v === undefined || v === null) return dflt;
  if (!Number.isSafeInteger(v) || v < 1) throw invalid(flag, `${flag} must be >= 1, got ${v}`);
  return v;
}

function checkCount(field: string, v: number, min: number): void {
  if (!Number.isSafeInteger(v) || v < min) {
    throw invalidArgument(field, `must be an integer >= ${min}`, v);
  }
}

export class AicModel {
  readonly backend: BackendSpec;
  readonly system: SystemSpec;
  readonly model: ModelShape;
  readonly backendVersion: string;
  readonly tp: number;
  readonly moeTp: number;
  readonly moeEp: number;
  readonly attentionDp: number;
  /** Tensor-core peak the GEMMs run at (FP8 when the weights are FP8 and the GPU has FP8), FLOP/ms. */
  private readonly gemmRate: number;
  private readonly attnRate: number;
  private readonly memRate: number;
  private readonly linkRate: number;
  private readonly linkLatencyMs: number;

  constructor(o: AicModelOptions) {
    // Every check before any field is set: a bad option leaves nothing half-built.
    const backend = backendSpec(o.backend);
    const system = systemSpec(o.system);
    const m = o.model;
    const tp = size('--aic-tp-size', o.tpSize, 1)!;
    const moeTpSet = size('--aic-moe-tp-size', o.moeTpSize, null);
    const moeEpSet = size('--aic-moe-ep-size', o.moeEpSize, null);
    const adpSet = size('--aic-attention-dp-size', o.attentionDpSize, null);
    let moeTp = tp;
    let moeEp = 1;
    let adp = 1;
    if (moeTpSet !== null || moeEpSet !== null || adpSet !== null) {
      // docs/configuration.md: unset ones count as 1 once any is given.
      moeTp = moeTpSet ?? 1;
      moeEp = moeEpSet ?? 1;
      adp = adpSet ?? 1;
      if (tp * adp !== moeTp * moeEp) {
        throw invalid(
          '--aic-moe-tp-size',
          `AIC MoE parallelism requires aic_tp_size * aic_attention_dp_size == aic_moe_tp_size * aic_moe_ep_size (got ${tp} * ${adp} != ${moeTp} * ${moeEp})`,
        );
      }
    }
    if (m.numHeads % tp !== 0) {
      throw invalid(
        '--aic-tp-size',
        `--aic-tp-size ${tp} must divide ${m.id}'s num_attention_heads (${m.numHeads})`,
      );
    }
    if (m.moe && m.moe.experts % moeEp !== 0) {
      throw invalid(
        '--aic-moe-ep-size',
        `--aic-moe-ep-size ${moeEp} must divide ${m.id}'s number of experts (${m.moe.experts})`,
      );
    }
    const perGpuGB = weightBytesPerGpu(m, tp, moeTp * moeEp) / 1e9;
    if (perGpuGB > system.memGB) {
      throw invalid(
        '--aic-tp-size',
        `${m.id} needs ${perGpuGB.toFixed(1)} GB of weights per GPU at --aic-tp-size ${tp}${m.moe ? ` / moe ${moeTp}x${moeEp}` : ''}, more than the ${system.memGB} GB of ${system.id}`,
      );
    }
    this.backend = backend;
    this.system = system;
    this.model = m;
    this.backendVersion = o.backendVersion ?? backend.defaultVersion;
    this.tp = tp;
    this.moeTp = moeTp;
    this.moeEp = moeEp;
    this.attentionDp = adp;
    const gemmPeak = m.weights === 'fp8' && system.fp8Tflops !== null ? system.fp8Tflops : system.bf16Tflops;
    // TFLOPS -> FLOP per ms: 1e12 / 1e3.
    this.gemmRate = gemmPeak * 1e9 * backend.gemmEff;
    this.attnRate = system.bf16Tflops * 1e9 * backend.attnEff;
    // GB/s -> bytes per ms: 1e9 / 1e3.
    this.memRate = system.memGBs * 1e6 * backend.memEff;
    this.linkRate = system.linkGBs * 1e6 * backend.linkEff;
    this.linkLatencyMs = system.linkLatencyUs / 1000;
  }

  /** Predicted prefill time in ms of `batch` requests of `isl` tokens with `prefix` of them cached. */
  prefillMs(isl: number, prefix = 0, batch = 1): number {
    return this.breakdown({ isl, prefix, batch }).totalMs;
  }

  breakdown(q: PrefillQuery): PrefillBreakdown {
    const isl = q.isl;
    const prefix = q.prefix ?? 0;
    const batch = q.batch ?? 1;
    checkCount('isl', isl, 0);
    checkCount('prefix', prefix, 0);
    checkCount('batch', batch, 1);
    if (prefix > isl)
      throw new KvrError('invalid_argument', `prefix (${prefix}) must not exceed isl (${isl})`, 400, {
        field: 'prefix',
      });
    if (isl === 0) return { gemmMs: 0, attnMs: 0, commMs: 0, overheadMs: 0, totalMs: 0 };
    // A fully cached prompt still runs its last token to produce logits (vLLM / SGLang behaviour).
    const n = Math.max(isl - prefix, 1);
    const c = isl - n;
    const m = this.model;
    const tp = this.tp;
    const tokens = batch * n;
    const wb = m.weightBytes;

    const roof = (flops: number, bytes: number, rate: number) => Math.max(flops / rate, bytes / this.memRate);
    const linear = (params: number, shards: number) =>
      roof((2 * tokens * params) / shards, (params * wb) / shards, this.gemmRate);

    const dense = m.layers - (m.moe?.layers ?? 0);
    let gemm = m.layers * linear(m.attnParams, tp) + dense * linear(m.mlpParams, tp);
    if (m.moe) {
      const e = m.moe;
      const gpus = this.moeTp * this.moeEp;
      // Expected distinct experts hit by tokens·topK uniform picks: weights of unused experts are not read.
      const touched = e.experts * (1 - Math.pow(1 - 1 / e.experts, tokens * e.topK));
      const routed = roof(
        (2 * tokens * e.topK * e.expertParams) / gpus,
        (touched * e.expertParams * wb) / gpus,
        this.gemmRate,
      );
      const shared = e.sharedParams > 0 ? linear(e.sharedParams, tp) : 0;
      const gate = linear(m.hidden * e.experts, tp);
      gemm += e.layers * (routed + shared + gate);
    }
    // LM head on the last token of each request only; its weights stay BF16 in FP8 checkpoints.
    gemm += roof((2 * batch * m.hidden * m.vocab) / tp, (m.hidden * m.vocab * 2) / tp, this.gemmRate);

    // Causal attention of new token p (c <= p < c + n) over p + 1 keys: sum = n·c + n(n+1)/2 pairs.
    const pairs = batch * (n * c + (n * (n + 1)) / 2);
    const kvShards = m.kvSplitsByTp ? Math.min(tp, m.numKvHeads) : 1;
    const kvBytes = (batch * (c + n) * m.kvElemsPerToken * KV_BYTES) / kvShards;
    const attn = m.layers * roof((pairs * m.attnFlopsPerPair) / tp, kvBytes, this.attnRate);

    let comm = 0;
    if (tp > 1) {
      // Two ring all-reduces per layer (after attention, after the MLP): 2(tp-1)/tp of the activations.
      const bytes = tokens * m.hidden * ACT_BYTES;
      comm += 2 * m.layers * ((2 * (tp - 1) * bytes) / tp / this.linkRate + this.linkLatencyMs);
    }
    if (m.moe && this.moeEp > 1 && this.attentionDp > 1) {
      // With attention DP a rank holds only its own tokens, so experts elsewhere need an all-to-all
      // dispatch and combine: each of the topK copies leaves the rank with probability (ep-1)/ep.
      // Under pure TP attention every rank already holds every token and the combine is the
      // all-reduce counted above.
      const bytes = (tokens * m.moe.topK * m.hidden * ACT_BYTES * (this.moeEp - 1)) / this.moeEp;
      comm += 2 * m.moe.layers * (bytes / this.linkRate + this.linkLatencyMs);
    }
    const overheadMs = this.backend.overheadMs;
    return { gemmMs: gemm, attnMs: attn, commMs: comm, overheadMs, totalMs: gemm + attn + comm + overheadMs };
  }

  /**
   * Pass timing for a simulated engine (engine-sim's `TimingModel` shape, the mocker's
   * `--aic-perf-model`), so an engine and the router's predictor can share one model.
   * `prefillMs(x)`: x new tokens with no prefix (the pass API carries no prefix). `decodeMs(u)`:
   * one memory-bound decode step: overhead + every weight once + the KV of `u · totalKvTokens`
   * tokens; the batch's GEMM FLOPs are not modelled (the pass API gives no batch size).
   */
  engineTiming(totalKvTokens: number): { prefillMs(x: number): number; decodeMs(u: number): number } {
    checkCount('totalKvTokens', totalKvTokens, 1);
    const m = this.model;
    const kvShards = m.kvSplitsByTp ? Math.min(this.tp, m.numKvHeads) : 1;
    const weightMs = weightBytesPerGpu(m, this.tp, this.moeTp * this.moeEp) / this.memRate;
    const kvMsFull = (totalKvTokens * m.kvElemsPerToken * KV_BYTES * m.layers) / kvShards / this.memRate;
    const overhead = this.backend.overheadMs;
    return {
      prefillMs: (x) => this.prefillMs(x, 0, 1),
      decodeMs: (u) => overhead + weightMs + Math.min(Math.max(u, 0), 1) * kvMsFull,
    };
  }

  /**
   * The router's `PrefillDurationPredictor` (§9.4: batch 1, the selected rank's cached prefix).
   * Structurally typed so this package needs no router dependency.
   */
  predictor(): (q: { isl: number; prefixTokens: number }) => number {
    return (q) => this.prefillMs(q.isl, Math.min(q.prefixTokens, q.isl), 1);
  }
}

/** Weight bytes one GPU holds: dense parts split by TP, routed experts by moe_tp·moe_ep. */
export function weightBytesPerGpu(m: ModelShape, tp: number, expertGpus: number): number {
  const dense = m.layers - (m.moe?.layers ?? 0);
  let shared = m.layers * m.attnParams + dense * m.mlpParams;
  let experts = 0;
  if (m.moe) {
    shared += m.moe.layers * (m.moe.sharedParams + m.hidden * m.moe.experts);
    experts = m.moe.layers * m.moe.experts * m.moe.expertParams;
  }
  // Embedding and LM head: BF16, split by TP.
  return (
    (shared * m.weightBytes) / tp + (experts * m.weightBytes) / expertGpus + (2 * m.vocab * m.hidden * 2) / tp
  );
}
