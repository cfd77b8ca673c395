export * from './types.js';
export {
  DashboardHub,
  DASHBOARD_MODES,
  DASHBOARD_PATH,
  isLoopback,
  type DashboardMode,
  type DashboardHubOptions,
} from './hub.js';
export { DecisionTap, decisionLogWithTap, type DecisionLog, type DecisionTapOptions } from './decisions.js';
export { SnapshotBuilder, SIGNAL_PATTERN, routedWorkerViews, type SnapshotOptions } from './snapshot.js';
export { readHistogram, windowOf, quantile, histogramSnapshot, type HistogramReading } from './histogram.js';
export { PAGE_HTML } from './page.js';
