/**
 * `--dashboard` for the frontend: the decision tap goes on the routers' decision-log option (built
 * before the model registry), the hub (page + SSE) on the HTTP app once the registry exists.
 */
import {
  DashboardHub,
  DecisionTap,
  decisionLogWithTap,
  type DashboardMode,
  type DecisionLog,
} from '@kvrouter/dashboard';
import type { FrontendMetricSet } from '@kvrouter/metrics';
import type { ModelRegistry } from '../models.js';
import { frontendDashboardSource } from './source.js';

/** A tap unless the dashboard is off, and the decision log that feeds it beside the user's. */
export function dashboardDecisionLog(
  mode: DashboardMode,
  user: DecisionLog | null,
): { tap: DecisionTap | null; decisionLog: DecisionLog | null } {
  if (mode === 'off') return { tap: null, decisionLog: user };
  const tap = new DecisionTap();
  return { tap, decisionLog: decisionLogWithTap(user, tap) };
}

export function frontendDashboard(
  mode: DashboardMode,
  tap: DecisionTap | null,
  registry: ModelRegistry,
  metrics: FrontendMetricSet,
): DashboardHub | null {
  if (mode === 'off' || !tap) return null;
  return new DashboardHub({ source: frontendDashboardSource(registry, metrics), mode, tap });
}
