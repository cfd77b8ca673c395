/**
 * `--disaggregation-mode prefill|decode` and the KV transfer flags (docs/protocol.md §17) → the
 * sim-worker's `SimDisaggOptions`. Pure: the model's `config.json` is read by the caller.
 *
 * kv_bytes_per_token, first that applies: `--kv-bytes-per-token`; `layers · 2 · kv_heads · head_dim ·
 * dtype_bytes` from `{--model-path}/config.json` (`num_hidden_layers`, `num_key_value_heads` else
 * `num_attention_heads`, `head_dim` else `hidden_size / num_attention_heads`; dtype from
 * `--kv-cache-dtype`, `auto` = the model's `torch_dtype`); else Qwen3-0.6B's 114 688 with a warning.
 */
import {
  DEFAULT_KV_BYTES_PER_TOKEN,
  kvBytesPerToken,
  kvDtypeBytes,
  type SimDisaggOptions,
} from '@kvrouter/sim-worker';
import type { ResolvedConfig } from '@kvrouter/config';

/** The mocker's resolved flags (options.ts's `MockerConfig`; named here so options.ts -> disagg.ts is one-way). */
type MockerConfig = ResolvedConfig<'mocker'>;

export interface DisaggPlan {
  mode: 'prefill' | 'decode';
  bandwidthGBps: number;
  kvCacheDtype: string;
  /** `--kv-bytes-per-token`; null = derive from the model config (`resolveDisagg`). */
  kvBytesPerToken: number | null;
  bootstrapPorts: readonly number[] | null;
}

/** Null in aggregated mode (the transfer flags are then unused; `--bootstrap-ports` gets a warning). */
export function disaggPlan(
  c: MockerConfig,
  warnings: string[],
  /** Throws the app's configuration error (exit 2). */
  fail: (message: string, flag: string) => never,
): DisaggPlan | null {
  if (c.disaggregationMode === 'agg') {
    if (c.bootstrapPorts !== null)
      warnings.push('--bootstrap-ports has no effect in aggregated mode (ignored)');
    return null;
  }
  try {
    kvDtypeBytes(c.kvCacheDtype);
  } catch (e) {
    fail((e as Error).message, '--kv-cache-dtype');
  }
  if (c.bootstrapPorts !== null && c.disaggregationMode === 'decode')
    warnings.push('--bootstrap-ports is advertised by prefill workers; a decode worker ignores it');
  if (c.bootstrapPorts !== null && c.bootstrapPorts.length !== 1 && c.bootstrapPorts.length !== c.numWorkers)
    fail(
      `--bootstrap-ports: give one base port or one port per worker (${c.numWorkers}), got ${c.bootstrapPorts.length}`,
      '--bootstrap-ports',
    );
  return {
    mode: c.disaggregationMode,
    bandwidthGBps: c.kvTransferBandwidth,
    kvCacheDtype: c.kvCacheDtype,
    kvBytesPerToken: c.kvBytesPerToken === null ? null : Number(c.kvBytesPerToken),
    bootstrapPorts: c.bootstrapPorts,
  };
}

/** KV bytes per token from a Hugging Face `config.json` text; null when it lacks the fields. */
export function kvBytesFromModelConfig(json: string, kvCacheDtype: string): number | null {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return null;
  }
  const src = (typeof o.text_config === 'object' && o.text_config !== null ? o.text_config : o) as Record<
    string,
    unknown
  >;
  const n = (k: string): number | null =>
    typeof src[k] === 'number' && Number.isInteger(src[k]) && (src[k] as number) > 0
      ? (src[k] as number)
      : null;
  const layers = n('num_hidden_layers');
  const heads = n('num_attention_heads');
  const kvHeads = n('num_key_value_heads') ?? heads;
  const hidden = n('hidden_size');
  const headDim =
    n('head_dim') ?? (hidden !== null && heads !== null && hidden % heads === 0 ? hidden / heads : null);
  if (layers === null || kvHeads === null || headDim === null) return null;
  const torch =
    typeof src.torch_dtype === 'string'
      ? src.torch_dtype
      : typeof o.torch_dtype === 'string'
        ? o.torch_dtype
        : null;
  return kvBytesPerToken({ layers, kvHeads, headDim, dtypeBytes: kvDtypeBytes(kvCacheDtype, torch) });
}

/**
 * The sim-worker options for a plan. `readModelConfig` returns `{model-path}/config.json`'s text
 * or null; `log` gets the fallback warning.
 */
export function resolveDisagg(
  p: DisaggPlan,
  modelPath: string | null,
  readModelConfig: (modelPath: string) => string | null,
  log: (line: string) => void,
): SimDisaggOptions {
  let bytes = p.kvBytesPerToken;
  if (bytes === null && modelPath !== null) {
    const text = readModelConfig(modelPath);
    if (text !== null) bytes = kvBytesFromModelConfig(text, p.kvCacheDtype);
  }
  if (bytes === null) {
    bytes = DEFAULT_KV_BYTES_PER_TOKEN;
    log(
      `warning: no --kv-bytes-per-token and no usable config.json under --model-path; KV transfer uses ${bytes} bytes per token (Qwen3-0.6B)`,
    );
  }
  return {
    mode: p.mode,
    kvBytesPerToken: bytes,
    bandwidthGBps: p.bandwidthGBps,
    bootstrapPorts: p.bootstrapPorts,
  };
}
