export { EngineClient, type EngineClientOptions } from './engine-client.js';
export { WorkerConfigError, planFromConfig, type WorkerConfig, type WorkerPlan } from './options.js';
export {
  probeEngine,
  startWorker,
  type EngineInfo,
  type RunningWorker,
  type StartWorkerOptions,
  type WorkerIo,
} from './worker.js';
