export { SimRng } from './rng.js';
export {
  parseTrace,
  formatTrace,
  checkRows,
  type TraceRow,
  type TraceIssue,
  type ParsedTrace,
  type ParseOptions,
} from './trace.js';
export {
  TokenSynth,
  DEFAULT_TRACE_BLOCK_SIZE,
  DEFAULT_VOCAB_SIZE,
  type TokenSynthOptions,
} from './tokens.js';
export {
  generateSynthetic,
  resolveSynthetic,
  parseDist,
  sample,
  PRESETS,
  DEFAULT_SYNTHETIC,
  type Dist,
  type SyntheticSpec,
} from './synthetic.js';
export { EventQueue, CLS_DELIVERY, CLS_PASS } from './event-queue.js';
export {
  kvRouterPolicy,
  roundRobinPolicy,
  type PolicyContext,
  type PolicyDecision,
  type PolicyFactory,
  type PolicyRequest,
  type RoutingPolicy,
  type SimWorker,
  type LoadReport,
  type KvPolicyOptions,
} from './policy.js';
export {
  runSimulation,
  DEFAULT_SIM_CONFIG,
  type SimConfig,
  type SimHooks,
  type SimProgress,
  type SimResult,
  type RequestColumns,
  type UnitSummary,
} from './simulation.js';
export { oracleBounds, type OracleOptions, type OracleResult } from './oracle.js';
export {
  buildReport,
  reportJson,
  distOf,
  simRunData,
  type Report,
  type Percentiles,
  type RunData,
} from './report.js';
export {
  compareTable,
  compareSvg,
  sweepSvg,
  sweepTable,
  ttftSamples,
  type CompareEntry,
  type SweepPoint,
} from './compare.js';
export { GAP_CAUSES, GapTracker, type GapCause, type GapColumns } from './gap.js';
