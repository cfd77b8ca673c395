export {
  PassScheduler,
  defaultPassScheduler,
  engineClock,
  type PassSchedulerOptions,
  type ScheduledPass,
} from './pass-scheduler.js';
export { RequestStream } from './request-stream.js';
export { EngineDriver, type DriverHooks, type DriverOptions, type DriverStats } from './driver.js';
export {
  SimWorker,
  type RequestPlaneSpec,
  type SimCardOptions,
  type SimWorkerOptions,
  type StopOptions,
} from './worker.js';
export { SimFleet, autoStaggerMs, type SimFleetOptions } from './fleet.js';
export { VllmSimEngine, toVllmEvents, type VllmSimEngineOptions } from './vllm-engine.js';
export { VllmRelay, type KvEventRelay, type VllmRelayOptions } from './vllm-relay.js';
export * from './disagg.js';
export * from './bootstrap.js';
export { applyExtras, withExtras, scriptedOutput, syntheticLogprob } from './extras.js';
export {
  DEFAULT_EMBEDDING_DIM,
  PNG_SIGNATURE,
  embedVector,
  serveMedia,
  type MediaKind,
  type SimMediaOptions,
} from './media.js';
export type { SessionEvent } from './sessions.js';
