export {
  DEFAULT_ENGINE_CONFIG,
  resolveEngineConfig,
  type EngineConfig,
  type EngineType,
  type PreemptionMode,
  type ReasoningConfig,
} from './config.js';
export { SimEngine, type EngineDeps, type RankCore } from './engine.js';
export { EngineCore } from './engine-core.js';
export { SglangCore } from './sglang-core.js';
export { RadixCache, RadixNode } from './radix-cache.js';
export { ReasoningTokens } from './reasoning.js';
export {
  parsePlannerProfile,
  parsePlannerProfileNpz,
  profileTiming,
  interp1,
  interp2,
  type PlannerProfile,
} from './timing-profile.js';
export { reasoningFromFlag, profileTimingFromFlag, type FlagFail, type ProfileRead } from './flags.js';
export { parseNpz, parseNpy, NpzError, type NpyArray, type InflateRaw } from './npz.js';
export { DEFAULT_HASHER, type BlockHasher } from './hasher.js';
export { POLYNOMIAL_TIMING, passDurationMs, type DecodeShape, type TimingModel } from './timing.js';
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
