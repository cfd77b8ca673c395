export {
  StandaloneRouter,
  stderrLogger,
  type Logger,
  type RouterAppConfig,
  type StandaloneRouterOptions,
} from './service.js';
export * from './api.js';
export { parseEndpointPath, splitEndpointArg, ArgsError, type EndpointPath } from './args.js';
export { startJsonServer, type JsonServer } from './http.js';
export {
  IndexerService,
  DEFAULT_TENANT,
  type IndexerServiceOptions,
  type Registration,
} from './indexer-service.js';
