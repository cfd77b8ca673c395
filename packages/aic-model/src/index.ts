export {
  AicModel,
  weightBytesPerGpu,
  type AicModelOptions,
  type PrefillQuery,
  type PrefillBreakdown,
} from './predict.js';
export { SYSTEMS, SYSTEM_IDS, systemSpec, type SystemSpec } from './systems.js';
export { BACKENDS, BACKEND_IDS, backendSpec, type BackendSpec } from './backends.js';
export {
  parseHfConfig,
  builtinModel,
  BUILTIN_MODEL_IDS,
  totalParams,
  type ModelShape,
  type MoeShape,
  type WeightFormat,
} from './models.js';
export {
  aicModelFromFlags,
  aicEngineTimingFromFlag,
  resolveAicModel,
  type AicFlags,
  type ReadText,
} from './flags.js';
