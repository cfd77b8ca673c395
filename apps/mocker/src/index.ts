export { resolveMockerConfig, startMocker, type MockerIo, type RunningMocker } from './mocker.js';
export {
  MockerConfigError,
  extraArgsToArgv,
  planFromConfig,
  servedModelName,
  type MockerConfig,
  type MockerPlan,
} from './options.js';
export { readTopologyDomains, topologyRuntimeConfig } from './topology.js';
