/**
 * `ResolvedConfig` (frontend or standalone router) → the router's `policy` plus what the host
 * builds around it. The resolver has already applied the `--load-aware` preset, the legacy
 * overlap weight and admission promotion (docs/configuration.md resolution rules), so this is a field-by-field
 * mapping. `policy` goes to `new KvRouter({ policy, ... })` as is; what the router cannot build
 * itself (the index, transports, sinks) is described in `index`, `replicaSync` and `aic`.
 */
import {
  ConfigError,
  checkValue,
  displayName,
  flagsFor,
  type FlagSpec,
  type ResolvedConfig,
} from '@kvrouter/config';
import { parse as parseYaml } from 'yaml';
import type { RouterPolicy } from './types.js';

type Keys =
  | 'routerMode'
  | 'routerKvOverlapScoreCredit'
  | 'routerPrefillLoadScale'
  | 'routerTemperature'
  | 'routerKvEvents'
  | 'routerTtlSecs'
  | 'routerReplicaSync'
  | 'routerTrackActiveBlocks'
  | 'routerAssumeKvReuse'
  | 'routerTrackOutputBlocks'
  | 'routerTrackPrefillTokens'
  | 'routerPrefillLoadModel'
  | 'routerEventThreads'
  | 'routerQueueThreshold'
  | 'routerQueuePolicy'
  | 'routerKvOverlapScoreCreditDecay'
  | 'routerHostCacheHitWeight'
  | 'routerDiskCacheHitWeight'
  | 'routerDecodeActiveRequestWeight'
  | 'routerMaxTreeSize'
  | 'routerPruneTargetRatio'
  | 'routerApproximateCachePolicy'
  | 'routerPredictedTtlSecs'
  | 'useRemoteIndexer'
  | 'sharedCacheMultiplier'
  | 'encoderCudaToCpuRatio'
  | 'routerOverlapRefreshAfterSecs'
  | 'routerActiveRequestExpirySecs'
  | 'activeDecodeBlocksThreshold'
  | 'activePrefillTokensThreshold'
  | 'activePrefillTokensThresholdFrac'
  | 'admissionControl'
  | 'kvCacheBlockSize';

/** Issue-19 fields; optional so configs built before them still map (absent = default). */
type NewKeys =
  | 'routerPolicy'
  | 'routerTtftDecodePressure'
  | 'routerTtftWorkWeight'
  | 'routerTtftDecodeStep'
  | 'routerTtftDuplicateWeight'
  | 'routerPolicyConfig';

/** The config fields the router reads (frontend and standalone router share them). */
export type RouterConfigFields = Pick<ResolvedConfig<'router'>, Keys> &
  Partial<Pick<ResolvedConfig<'router'>, NewKeys>>;

/** Reads a file's text (the app's I/O, injected; this package is pure). */
export type ReadPolicyFile = (path: string) => string | null;

const POLICY_FILE_FLAG = '--router-policy-config';

/** Keys a policy file may set: every routing knob the router reads, by flag name. */
function policyFileSpecs(): Map<string, FlagSpec> {
  const keys = new Set<string>([
    'routerMode',
    'routerKvOverlapScoreCredit',
    'routerPrefillLoadScale',
    'routerTemperature',
    'routerTrackActiveBlocks',
    'routerAssumeKvReuse',
    'routerTrackOutputBlocks',
    'routerTrackPrefillTokens',
    'routerQueueThreshold',
    'routerQueuePolicy',
    'routerKvOverlapScoreCreditDecay',
    'routerHostCacheHitWeight',
    'routerDiskCacheHitWeight',
    'routerDecodeActiveRequestWeight',
    'routerPredictedTtlSecs',
    'sharedCacheMultiplier',
    'activeDecodeBlocksThreshold',
    'activePrefillTokensThreshold',
    'activePrefillTokensThresholdFrac',
    'admissionControl',
    'routerPolicy',
    'routerTtftDecodePressure',
    'routerTtftWorkWeight',
    'routerTtftDecodeStep',
    'routerTtftDuplicateWeight',
  ]);
  const m = new Map<string, FlagSpec>();
  for (const spec of flagsFor('router')) {
    if (!keys.has(spec.key) || !spec.flag) continue;
    const name = spec.flag.slice(2);
    m.set(name, spec);
    m.set(name.replace(/-/g, '_'), spec);
  }
  return m;
}

/**
 * `--router-policy-config FILE`: a YAML (or JSON, a subset) mapping of routing knobs named like
 * their flags without `--` (`router-prefill-load-scale: 4`; snake_case too). Each value is checked
 * against its flag's row; unknown keys, bad values and unreadable files stop startup naming the
 * flag. The file's values win over flags and environment (YAML over flags).
 */
function applyPolicyFile<C extends RouterConfigFields>(c: C, read: ReadPolicyFile | undefined): C {
  const path = c.routerPolicyConfig;
  if (path == null) return c;
  // Typed up front so that a call to it narrows like a throw.
  const fail: (msg: string) => never = (msg) => {
    throw new ConfigError(`${POLICY_FILE_FLAG} ${path}: ${msg}`, POLICY_FILE_FLAG);
  };
  if (!read) fail('no file reader available in this host');
  let text: string | null = null;
  try {
    text = read(path);
  } catch (e) {
    fail(`cannot read: ${(e as Error).message}`);
  }
  if (text === null) fail('cannot read: no such file');
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (e) {
    fail(`not valid YAML/JSON: ${(e as Error).message.split('\n')[0]}`);
  }
  if (doc === null || doc === undefined) return c;
  if (typeof doc !== 'object' || Array.isArray(doc)) fail('must be a mapping of knob names to values');
  const specs = policyFileSpecs();
  const out: Record<string, unknown> = { ...c };
  for (const [k, raw] of Object.entries(doc as Record<string, unknown>)) {
    const spec = specs.get(k);
    if (!spec) {
      const names = [...new Set([...specs.values()].map((s) => s.flag!.slice(2)))].sort();
      fail(`unknown key '${k}' (allowed: ${names.join(', ')})`);
    }
    let v: unknown = raw;
    if (typeof v === 'string' && v.toLowerCase() === 'none') v = null;
    if (spec.type === 'u64' && typeof v === 'number' && Number.isSafeInteger(v)) v = BigInt(v);
    if (spec.type === 'float' && typeof v === 'string' && v.trim() !== '' && Number.isFinite(Number(v)))
      v = Number(v);
    const err =
      (spec.type === 'float' || spec.type === 'u32') && v !== null && typeof v !== 'number'
        ? `${displayName(spec)} must be a number, got ${JSON.stringify(v)}`
        : checkValue(spec, v);
    if (err !== undefined) fail(`key '${k}': ${err}`);
    out[spec.key] = v;
  }
  return out as C;
}

/** Which index the app should build for this router (§7.4); the router never constructs the pool. */
export interface IndexPlan {
  kind: 'none' | 'events' | 'approximate' | 'remote';
  /** `--router-kv-events`; with kind `remote`, false means the served index is approximate and decisions are recorded there (§7.7). */
  kvEvents: boolean;
  /** Writer lanes for the events index (1 = single-threaded RadixIndexer, > 1 = the pool). */
  eventThreads: number;
  /** Approximate mode (§7.5). */
  ttlSecs: number;
  maxTreeSize: number;
  pruneTargetRatio: number;
  cachePolicy: 'ttl' | 'lru';
}

export interface RouterParams {
  /** Given to the router as is (`KvRouterOptions.policy`). */
  policy: RouterPolicy;
  /** `--kv-cache-block-size`; null = take the card's `kv_cache_block_size`. */
  blockSizeOverride: number | null;
  /** `--router-replica-sync`: the app wires the publisher and feeds `applyReplicaEvent`. */
  replicaSync: boolean;
  /** `--router-prefill-load-model aic`: the app supplies `deps.prefillDurationPredictor`. */
  aic: boolean;
  index: IndexPlan;
}

export function routerParamsFromConfig(config: RouterConfigFields, read?: ReadPolicyFile): RouterParams {
  const c = applyPolicyFile(config, read);
  const credit = c.routerKvOverlapScoreCredit;
  const index: IndexPlan = {
    // §7.4, in order: no credit → no index; remote; approximate; events.
    kind: credit === 0 ? 'none' : c.useRemoteIndexer ? 'remote' : c.routerKvEvents ? 'events' : 'approximate',
    kvEvents: c.routerKvEvents,
    eventThreads: c.routerEventThreads,
    ttlSecs: c.routerTtlSecs,
    maxTreeSize: Number(c.routerMaxTreeSize),
    pruneTargetRatio: c.routerPruneTargetRatio,
    cachePolicy: c.routerApproximateCachePolicy,
  };
  const apt = c.activePrefillTokensThreshold;
  const policy: RouterPolicy = {
    mode: c.routerMode,
    cost: {
      credit,
      creditDecay: c.routerKvOverlapScoreCreditDecay,
      prefillLoadScale: c.routerPrefillLoadScale,
      hostWeight: c.routerHostCacheHitWeight,
      diskWeight: c.routerDiskCacheHitWeight,
      sharedMultiplier: c.sharedCacheMultiplier ?? 0,
      decodeActiveRequestWeight: c.routerDecodeActiveRequestWeight,
      temperature: c.routerTemperature,
      trackPrefillTokens: c.routerTrackPrefillTokens,
      trackActiveBlocks: c.routerTrackActiveBlocks,
      assumeKvReuse: c.routerAssumeKvReuse,
      policy: c.routerPolicy ?? 'dynamo',
      ttftDecodePressure: c.routerTtftDecodePressure ?? undefined,
      ttftWorkWeight: c.routerTtftWorkWeight ?? undefined,
      ttftDecodeStep: c.routerTtftDecodeStep ?? undefined,
      ttftDuplicateWeight: c.routerTtftDuplicateWeight ?? undefined,
      // Predict-on-route: siblings of a burst share the prefill of their predicted blocks.
      siblingShare: c.routerPredictedTtlSecs != null && credit !== 0,
    },
    trackOutputBlocks: c.routerTrackOutputBlocks,
    activeRequestExpirySecs: c.routerActiveRequestExpirySecs,
    queueThreshold: c.routerQueueThreshold,
    queuePolicy: c.routerQueuePolicy,
    overlapRefreshAfterSecs: c.routerOverlapRefreshAfterSecs,
    admissionControl: c.admissionControl,
    busyThresholds: {
      activeDecodeBlocks: c.activeDecodeBlocksThreshold,
      activePrefillTokens: apt === null ? null : Number(apt),
      activePrefillTokensFrac: c.activePrefillTokensThresholdFrac,
    },
    cudaToCpuRatio: c.encoderCudaToCpuRatio,
    // The side index needs KV events (the resolver rejects the combination otherwise) and an index.
    predictedTtlSecs: index.kind === 'none' ? null : c.routerPredictedTtlSecs,
  };
  return {
    policy,
    blockSizeOverride: c.kvCacheBlockSize,
    replicaSync: c.routerReplicaSync,
    aic: c.routerPrefillLoadModel === 'aic',
    index,
  };
}
