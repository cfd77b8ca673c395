/**
 * The frontend's view for the dashboard: every worker set of the model registry (its router, the
 * workers' cards, the local index) and the metric families the page reads. Nothing here runs per
 * request; the hub calls it once per tick while a page is open.
 */
import {
  routedWorkerViews,
  type DashboardSource,
  type RegistryLike,
  type RouterSetView,
} from '@kvrouter/dashboard';
import type { FrontendMetricSet } from '@kvrouter/metrics';
import { effectiveMaxBatchedTokens } from '@kvrouter/runtime';
import type { ModelRegistry, WorkerSet } from '../models.js';

function setView(s: WorkerSet, prefix: string): RouterSetView {
  const model = s.model.toLowerCase();
  return {
    model: s.model,
    namespace: s.namespace,
    component: s.component,
    endpoint: s.endpoint,
    role: s.role,
    router: s.router,
    workers: () => routedWorkerViews(s.workers.values(), effectiveMaxBatchedTokens),
    treeSizes: s.indexer ? () => s.indexer!.treeSizes() : null,
    appliedCounts: s.indexer ? () => s.indexer!.appliedCounts() : null,
    cursor: (id, rank) => s.host.cursor(id, rank),
    reported: () => s.lifecycle.reportedCache(s.model),
    series: {
      ttft: { name: `${prefix}_time_to_first_token_seconds`, labels: { model } },
      itl: { name: `${prefix}_inter_token_latency_seconds`, labels: { model } },
      hitRate: {
        name: 'dynamo_component_router_kv_hit_rate',
        labels: { dynamo_namespace: s.namespace, dynamo_component: s.component, dynamo_endpoint: s.endpoint },
      },
    },
  };
}

export function frontendDashboardSource(
  registry: ModelRegistry,
  metrics: FrontendMetricSet,
): DashboardSource {
  const prefix = metrics.frontend.prefix;
  return {
    app: 'frontend',
    registry: metrics.registry as unknown as RegistryLike,
    *sets() {
      for (const s of registry.allSets()) yield setView(s, prefix);
    },
  };
}
