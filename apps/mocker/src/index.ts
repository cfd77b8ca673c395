export { resolveMockerConfig, startMocker, type MockerIo, type RunningMocker } from './mocker.js';
export {
  MockerConfigError,
  extraArgsToArgv,
  parseEndpoint,
  planFromConfig,
  servedModelName,
  type EndpointPath,
  type MockerConfig,
  type MockerPlan,
} from './options.js';
export { readTopologyDomains, topologyRuntimeConfig } from './topology.js';
