export * from './table.js';
export {
  ConfigError,
  checkValue,
  cliSpellings,
  effectiveBusyThresholds,
  formatFloat,
  mapLegacyOverlapWeight,
  resolveConfig,
  type Resolution,
  type ResolveOptions,
  type Source,
} from './resolve.js';
export { dumpConfigJson } from './dump.js';
export {
  GENERATED_MARKER,
  defaultLabel,
  flagForms,
  renderConfigurationDoc,
  renderFlagTables,
  renderFlagsMarkdown,
  typeLabel,
} from './docs.js';
