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
export { defaultLabel, flagForms, renderFlagsMarkdown, typeLabel } from './docs.js';
