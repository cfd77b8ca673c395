/**
 * The engine's KV occupancy for `ActiveLoad` (docs/protocol.md §5.5): vLLM publishes no load over ZMQ,
 * but its Prometheus `/metrics` has the KV cache usage fraction per engine (dp rank). The adapter
 * polls it and publishes `kv_used_blocks` = round(fraction × total_kv_blocks) when it changes.
 */

/** `vllm:kv_cache_usage_perc` (vLLM ≥ 0.10) or the older `vllm:gpu_cache_usage_perc`, by `engine` label (dp rank; absent = 0). */
export function parseKvUsage(metrics: string): Map<number, number> {
  const out = new Map<number, number>();
  const re = /^vllm:(?:kv|gpu)_cache_usage_perc(?:\{([^}]*)\})?\s+(\S+)/gm;
  for (let m = re.exec(metrics); m !== null; m = re.exec(metrics)) {
    const v = Number(m[2]);
    if (!Number.isFinite(v) || v < 0) continue;
    const rank = /(?:^|,)\s*engine="(\d+)"/.exec(m[1] ?? '')?.[1];
    out.set(rank === undefined ? 0 : Number(rank), Math.min(1, v));
  }
  return out;
}

export const usedBlocks = (fraction: number, totalKvBlocks: number): number =>
  Math.round(fraction * totalKvBlocks);
