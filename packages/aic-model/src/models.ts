/**
 * Model shapes from Hugging Face `config.json` objects (parsing only; reading the file is the
 * app's), plus built-in configs for common ids so `--aic-model-path <hf id>` works offline.
 * Only what the roofline needs is kept: linear-layer parameter counts per layer, attention work per
 * (query, key) pair, KV bytes per token, the MoE layout and the weight precision.
 */
import { KvrError } from '@kvrouter/protocols';

export type WeightFormat = 'bf16' | 'fp8' | 'int4' | 'fp32';

export interface MoeShape {
  /** Layers whose MLP is a mixture of experts. */
  layers: number;
  experts: number;
  topK: number;
  /** Parameters of one routed expert (gate + up + down). */
  expertParams: number;
  /** Parameters of the always-on shared experts of one layer (0 when none). */
  sharedParams: number;
}

export interface ModelShape {
  id: string;
  layers: number;
  hidden: number;
  vocab: number;
  numHeads: number;
  numKvHeads: number;
  /** Linear parameters of one layer's attention block (projections in and out). */
  attnParams: number;
  /** Parameters of one dense MLP (gate + up + down); used by the layers that are not MoE. */
  mlpParams: number;
  /** FLOPs of one query token against one key, all heads (QK^T and PV, 2 FLOPs per MAC). */
  attnFlopsPerPair: number;
  /** KV-cache elements stored per token per layer. */
  kvElemsPerToken: number;
  /** Whether TP splits the KV cache (per-head KV) or replicates it (MLA's shared latent). */
  kvSplitsByTp: boolean;
  moe: MoeShape | null;
  weights: WeightFormat;
  /** Bytes per weight. */
  weightBytes: number;
}

const bad = (id: string, field: string, why: string): KvrError =>
  new KvrError('invalid_argument', `--aic-model-path: ${id}: config.json field '${field}' ${why}`, 400, {
    flag: '--aic-model-path',
    field,
  });

type Json = Record<string, unknown>;

function posInt(c: Json, id: string, field: string, fallback?: number): number {
  const v = c[field];
  if (v === undefined || v === null) {
    if (fallback !== undefined) return fallback;
    throw bad(id, field, 'is missing');
  }
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1)
    throw bad(id, field, `must be a positive integer, got ${JSON.stringify(v)}`);
  return v;
}

function optInt(c: Json, id: string, field: string): number | undefined {
  return c[field] === undefined || c[field] === null ? undefined : posInt(c, id, field);
}

function weightFormat(c: Json, id: string): WeightFormat {
  const q = c.quantization_config;
  if (q !== undefined && q !== null) {
    if (typeof q !== 'object') throw bad(id, 'quantization_config', 'must be an object');
    const qc = q as Json;
    const str = (v: unknown) => (typeof v === 'string' ? v.toLowerCase() : '');
    const method = str(qc.quant_method);
    const algo = str(qc.quant_algo);
    if (method === 'fp8' || (method === 'modelopt' && (algo === '' || algo.startsWith('fp8')))) return 'fp8';
    if (method === 'compressed-tensors') {
      // FP8 checkpoints in this format declare 8-bit float weights in their config groups.
      const text = JSON.stringify(qc.config_groups ?? {});
      if (/"num_bits":\s*8/.test(text) && /"type":\s*"float"/.test(text)) return 'fp8';
      if (/"num_bits":\s*4/.test(text)) return 'int4';
    }
    if (method === 'awq' || method === 'gptq') return 'int4';
    throw bad(
      id,
      'quantization_config',
      `has an unsupported quant_method '${method}'${algo ? ` / quant_algo '${algo}'` : ''} (supported: fp8, modelopt FP8, compressed-tensors FP8/INT4, awq, gptq)`,
    );
  }
  const dt = c.torch_dtype ?? c.dtype ?? 'bfloat16';
  if (dt === 'bfloat16' || dt === 'float16') return 'bf16';
  if (dt === 'float32') return 'fp32';
  throw bad(id, 'torch_dtype', `is not one of bfloat16, float16, float32 (got ${JSON.stringify(dt)})`);
}

const BYTES: Record<WeightFormat, number> = { bf16: 2, fp8: 1, int4: 0.5, fp32: 4 };

/**
 * Parses a Hugging Face `config.json` object. Dense (Llama, Qwen, Mistral), MoE (Qwen-MoE, Mixtral,
 * DeepSeek) and MLA attention (DeepSeek-V2/V3, `kv_lora_rank`) layouts are understood; a bad or
 * missing field is an error naming it.
 */
export function parseHfConfig(raw: unknown, id = 'config.json'): ModelShape {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new KvrError(
      'invalid_argument',
      `--aic-model-path: ${id}: config.json must be a JSON object`,
      400,
      { flag: '--aic-model-path' },
    );
  }
  const c = raw as Json;
  const hidden = posInt(c, id, 'hidden_size');
  const layers = posInt(c, id, 'num_hidden_layers');
  const numHeads = posInt(c, id, 'num_attention_heads');
  const vocab = posInt(c, id, 'vocab_size');
  const intermediate = posInt(c, id, 'intermediate_size');

  let numKvHeads: number;
  let attnParams: number;
  let attnFlopsPerPair: number;
  let kvElemsPerToken: number;
  let kvSplitsByTp: boolean;
  const kvLora = optInt(c, id, 'kv_lora_rank');
  if (kvLora !== undefined) {
    // MLA: queries/keys carry a no-rope and a rope part; K/V are rebuilt from one cached latent.
    const nope = posInt(c, id, 'qk_nope_head_dim');
    const rope = posInt(c, id, 'qk_rope_head_dim');
    const vDim = posInt(c, id, 'v_head_dim');
    const qLora = optInt(c, id, 'q_lora_rank');
    const qDim = numHeads * (nope + rope);
    const qParams = qLora === undefined ? hidden * qDim : hidden * qLora + qLora * qDim;
    attnParams =
      qParams + hidden * (kvLora + rope) + kvLora * numHeads * (nope + vDim) + numHeads * vDim * hidden;
    attnFlopsPerPair = 2 * numHeads * (nope + rope + vDim);
    kvElemsPerToken = kvLora + rope;
    kvSplitsByTp = false;
    numKvHeads = numHeads;
  } else {
    numKvHeads = posInt(c, id, 'num_key_value_heads', numHeads);
    const headDim = posInt(c, id, 'head_dim', Math.floor(hidden / numHeads));
    if (numHeads % numKvHeads !== 0)
      throw bad(id, 'num_key_value_heads', `(${numKvHeads}) must divide num_attention_heads (${numHeads})`);
    attnParams = hidden * numHeads * headDim * 2 + hidden * numKvHeads * headDim * 2;
    attnFlopsPerPair = 4 * numHeads * headDim;
    kvElemsPerToken = 2 * numKvHeads * headDim;
    kvSplitsByTp = true;
  }

  const experts =
    optInt(c, id, 'num_experts') ?? optInt(c, id, 'n_routed_experts') ?? optInt(c, id, 'num_local_experts');
  let moe: MoeShape | null = null;
  if (experts !== undefined && experts > 1) {
    const topK = posInt(c, id, 'num_experts_per_tok');
    if (topK > experts)
      throw bad(id, 'num_experts_per_tok', `(${topK}) exceeds the number of experts (${experts})`);
    const expertInter = optInt(c, id, 'moe_intermediate_size') ?? intermediate;
    const sharedInter =
      optInt(c, id, 'shared_expert_intermediate_size') ??
      (optInt(c, id, 'n_shared_experts') ?? 0) * expertInter;
    let moeLayers: number;
    const firstDense = c.first_k_dense_replace;
    if (firstDense !== undefined && firstDense !== null) {
      if (
        typeof firstDense !== 'number' ||
        !Number.isSafeInteger(firstDense) ||
        firstDense < 0 ||
        firstDense > layers
      )
        throw bad(id, 'first_k_dense_replace', `must be an integer in [0, ${layers}]`);
      moeLayers = layers - firstDense;
    } else {
      const step = optInt(c, id, 'decoder_sparse_step') ?? 1;
      const only = Array.isArray(c.mlp_only_layers) ? new Set(c.mlp_only_layers as unknown[]) : new Set();
      moeLayers = 0;
      // Qwen-MoE's rule: layer i is sparse when it is not MLP-only and (i + 1) % step == 0.
      for (let i = 0; i < layers; i++) if (!only.has(i) && (i + 1) % step === 0) moeLayers++;
    }
    moe = {
      layers: moeLayers,
      experts,
      topK,
      expertParams: 3 * hidden * expertInter,
      sharedParams: 3 * hidden * sharedInter,
    };
  }
  const weights = weightFormat(c, id);
  return {
    id,
    layers,
    hidden,
    vocab,
    numHeads,
    numKvHeads,
    attnParams,
    mlpParams: 3 * hidden * intermediate,
    attnFlopsPerPair,
    kvElemsPerToken,
    kvSplitsByTp,
    moe,
    weights,
    weightBytes: BYTES[weights],
  };
}

/** Total parameters of the linear layers plus embeddings (for sanity checks against model cards). */
export function totalParams(m: ModelShape, tiedEmbeddings = false): number {
  const dense = m.layers - (m.moe?.layers ?? 0);
  const moe = m.moe
    ? m.moe.layers * (m.moe.experts * m.moe.expertParams + m.moe.sharedParams + m.hidden * m.moe.experts)
    : 0;
  return m.layers * m.attnParams + dense * m.mlpParams + moe + m.vocab * m.hidden * (tiedEmbeddings ? 1 : 2);
}

// Built-in configs: the fields of each model's published config.json that the parser reads.
const LLAMA_8B = {
  hidden_size: 4096,
  num_hidden_layers: 32,
  num_attention_heads: 32,
  num_key_value_heads: 8,
  head_dim: 128,
  intermediate_size: 14336,
  vocab_size: 128256,
  torch_dtype: 'bfloat16',
};
const LLAMA_70B = {
  hidden_size: 8192,
  num_hidden_layers: 80,
  num_attention_heads: 64,
  num_key_value_heads: 8,
  head_dim: 128,
  intermediate_size: 28672,
  vocab_size: 128256,
  torch_dtype: 'bfloat16',
};
const FP8 = { quantization_config: { quant_method: 'modelopt', quant_algo: 'FP8' } };

const BUILTIN_CONFIGS: Readonly<Record<string, Json>> = {
  'meta-llama/Llama-3.1-8B-Instruct': LLAMA_8B,
  'meta-llama/Llama-3.1-8B': LLAMA_8B,
  'nvidia/Llama-3.1-8B-Instruct-FP8': { ...LLAMA_8B, ...FP8 },
  'meta-llama/Llama-3.1-70B-Instruct': LLAMA_70B,
  'meta-llama/Llama-3.3-70B-Instruct': LLAMA_70B,
  'nvidia/Llama-3.1-70B-Instruct-FP8': { ...LLAMA_70B, ...FP8 },
  'nvidia/Llama-3.3-70B-Instruct-FP8': { ...LLAMA_70B, ...FP8 },
  'Qwen/Qwen3-0.6B': {
    hidden_size: 1024,
    num_hidden_layers: 28,
    num_attention_heads: 16,
    num_key_value_heads: 8,
    head_dim: 128,
    intermediate_size: 3072,
    vocab_size: 151936,
    torch_dtype: 'bfloat16',
  },
  'Qwen/Qwen3-8B': {
    hidden_size: 4096,
    num_hidden_layers: 36,
    num_attention_heads: 32,
    num_key_value_heads: 8,
    head_dim: 128,
    intermediate_size: 12288,
    vocab_size: 151936,
    torch_dtype: 'bfloat16',
  },
  'Qwen/Qwen3-32B': {
    hidden_size: 5120,
    num_hidden_layers: 64,
    num_attention_heads: 64,
    num_key_value_heads: 8,
    head_dim: 128,
    intermediate_size: 25600,
    vocab_size: 151936,
    torch_dtype: 'bfloat16',
  },
  'Qwen/Qwen3-30B-A3B': {
    hidden_size: 2048,
    num_hidden_layers: 48,
    num_attention_heads: 32,
    num_key_value_heads: 4,
    head_dim: 128,
    intermediate_size: 6144,
    moe_intermediate_size: 768,
    num_experts: 128,
    num_experts_per_tok: 8,
    decoder_sparse_step: 1,
    mlp_only_layers: [],
    vocab_size: 151936,
    torch_dtype: 'bfloat16',
  },
  'deepseek-ai/DeepSeek-V3': {
    hidden_size: 7168,
    num_hidden_layers: 61,
    num_attention_heads: 128,
    num_key_value_heads: 128,
    intermediate_size: 18432,
    moe_intermediate_size: 2048,
    n_routed_experts: 256,
    n_shared_experts: 1,
    num_experts_per_tok: 8,
    first_k_dense_replace: 3,
    q_lora_rank: 1536,
    kv_lora_rank: 512,
    qk_nope_head_dim: 128,
    qk_rope_head_dim: 64,
    v_head_dim: 128,
    vocab_size: 129280,
    torch_dtype: 'bfloat16',
    quantization_config: { quant_method: 'fp8', fmt: 'e4m3', weight_block_size: [128, 128] },
  },
};

export const BUILTIN_MODEL_IDS: readonly string[] = Object.freeze(Object.keys(BUILTIN_CONFIGS));

/** A built-in model by Hugging Face id (case-insensitive, with or without the org), or null. */
export function builtinModel(id: string): ModelShape | null {
  const want = id.trim().replace(/\/+$/, '').toLowerCase();
  for (const k of BUILTIN_MODEL_IDS) {
    const lk = k.toLowerCase();
    if (lk === want || lk.slice(lk.indexOf('/') + 1) === want) return parseHfConfig(BUILTIN_CONFIGS[k], k);
  }
  return null;
}
