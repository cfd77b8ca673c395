export * from './table.js';
export {
  ConfigError,
  checkValue,
  cliSpellings,
  dumpConfigJson,
  effectiveBusyThresholds,
  formatFloat,
  mapLegacyOverlapWeight,
  resolveConfig,
  type Resolution,
  type ResolveOptions,
  type Source,
} from './resolve.js';
export {
  GENERATED_MARKER,
  defaultLabel,
  flagForms,
  renderConfigurationDoc,
  renderFlagTables,
  renderFlagsMarkdown,
  typeLabel,
} from './docs.js';
