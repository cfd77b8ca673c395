export * from './assembly/index.js';
export { buildAicPredictor, readTextFile } from './aic.js';
export {
  WorkerCatalog,
  type CatalogGroup,
  type CatalogHooks,
  type CatalogOptions,
  type CatalogWorker,
  type GroupKey,
} from './catalog.js';
export {
  RouterHost,
  startKvEventFeed,
  threadPool,
  type GroupPath,
  type KvEventFeedOptions,
  type RouterHostOptions,
} from './host.js';
export { Closers, routerClock, stderrLogger } from './lifecycle.js';
export { startDurableKvFeed, type DurableFeed, type DurableFeedOptions } from './durable-feed.js';
export {
  ServedIndexer,
  checkServedIndexRules,
  registerServedIndex,
  serveIndexHandlers,
} from './served-indexer.js';
export {
  EXIT_CONFIG,
  EXIT_OK,
  EXIT_SECOND_SIGNAL,
  EXIT_STARTUP_FAILED,
  runMain,
  startupExitCode,
  type MainProcess,
  type MainSpec,
} from './main.js';
export { REMOTE_QUERY_TIMEOUT_MS, createRemoteIndex, type RemoteIndexOptions } from './remote-index.js';
