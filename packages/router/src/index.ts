export {
  KvRouter,
  MAX_LIVE_REQUESTS,
  QUEUE_RECHECK_MS,
  QUEUE_RECHECK_AIC_MS,
  MAINTENANCE_INTERVAL_MS,
  DEFAULT_OVERLAP_REFRESH_AFTER_SECS,
} from './router.js';
export type { WorkerConfig } from './workers.js';
export { HashChains, MAX_HASH_CHAIN_BYTES } from './hash-chains.js';
export type { ReplicaLiveList } from './replica.js';
export {
  StickySessions,
  SESSION_REAP_INTERVAL_MS,
  SESSION_OPEN_GRACE_S,
  SESSION_CAPACITY_OF_STR_LEN,
  MAX_SESSION_BINDINGS,
  type SessionBinding,
  type SessionRpcPayload,
} from './sessions.js';
export {
  routerParamsFromConfig,
  type RouterParams,
  type RouterConfigFields,
  type IndexPlan,
} from './config.js';
export type * from './types.js';
export {
  RemoteIndexer,
  overlapScoresFromWire,
  overlapScoresToWire,
  type RemoteIndexerClient,
  type RemoteIndexerOptions,
} from './remote-indexer.js';
export {
  TruthMonitor,
  DEFAULT_TRUTH_THRESHOLDS,
  TRUTH_INDEX_POLL_MS,
  TRUTH_MODES,
  type TruthMode,
  type TruthReport,
  type TruthThresholds,
  type WorkerTruth,
  type WorkerTruthState,
  type LoadOnlyReason,
} from './truth.js';
export { MAX_PARKED_REQUESTS } from './queue-driver.js';
