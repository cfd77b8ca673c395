/**
 * `ResolvedConfig` (frontend or standalone router) → the router's `policy` plus what the host
 * builds around it. The resolver has already applied the `--load-aware` preset, the legacy
 * overlap weight and admission promotion (docs/configuration.md resolution rules), so this is a field-by-field
 * mapping. `policy` goes to `new KvRouter({ policy, ... })` as is; what the router cannot build
 * itself (the index, transports, sinks) is described in `index`, `replicaSync` and `aic`.
 */
import type { ResolvedConfig } from '@kvrouter/config';
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

/** The config fields the router reads (frontend and standalone router share them). */
export type RouterConfigFields = Pick<ResolvedConfig<'router'>, Keys>;

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

export function routerParamsFromConfig(c: RouterConfigFields): RouterParams {
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
