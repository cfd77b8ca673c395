export { DEFAULT_ENGINE_CONFIG, resolveEngineConfig, type EngineConfig, type PreemptionMode } from './config.js';
export { SimEngine, type EngineDeps } from './engine.js';
export { EngineCore } from './engine-core.js';
export { DEFAULT_HASHER, type BlockHasher } from './hasher.js';
export { POLYNOMIAL_TIMING, passDurationMs, type TimingModel } from './timing.js';
export type {
  EmittedToken,
  EngineKvEvent,
  EngineKvEventData,
  EngineLoad,
  EngineRemoveData,
  EngineRequest,
  EngineStats,
  EngineStoreData,
  EngineStoredBlock,
  StepResult,
} from './types.js';
