/**
 * Routing presets that fill in defaults (issue 19): unlike `--load-aware` (§8.5, which overrides
 * what it conflicts with), a flag or variable given explicitly wins over these presets' values.
 * Applied after `--load-aware` (whose forced values stay), before the legacy weight mapping; where
 * two of these presets set one key, the first in `ROUTING_PRESETS` wins.
 */
type Value = unknown;

/** Dynamo's `--agentic`: overlap credit 2 (beyond the flag's own [0, 1] range), scale 4, 64 blocks per active request. */
const AGENTIC: ReadonlyArray<readonly [string, Value]> = [
  ['routerMode', 'kv'],
  ['routerKvOverlapScoreCredit', 2],
  ['routerPrefillLoadScale', 4],
  ['routerDecodeActiveRequestWeight', 64],
];

/** `--ttft-aware`: the TTFT-predicting cost in kv mode. */
const TTFT_AWARE: ReadonlyArray<readonly [string, Value]> = [
  ['routerMode', 'kv'],
  ['routerPolicy', 'ttft'],
];

const ROUTING_PRESETS: ReadonlyArray<readonly [string, ReadonlyArray<readonly [string, Value]>]> = [
  ['agentic', AGENTIC],
  ['ttftAware', TTFT_AWARE],
];

/** Fills the keys of every preset that is on, except keys given on the CLI or in the environment. */
export function applyRoutingPresets(cfg: Record<string, Value>, sources: Record<string, string>): void {
  for (const [flagKey, values] of ROUTING_PRESETS) {
    if (cfg[flagKey] !== true) continue;
    for (const [key, v] of values) {
      // Explicit values win, and so does what `--load-aware` (applied first) forced.
      const src = sources[key];
      if (!(key in cfg) || src === 'cli' || src === 'env' || src === 'preset') continue;
      cfg[key] = v;
      sources[key] = 'preset';
    }
  }
}
