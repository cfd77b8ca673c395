/**
 * `--dashboard` for the standalone router: the same page as the frontend's, on `DYN_SYSTEM_PORT`,
 * over its one worker group (the router host, the workers from the catalog, the index) and its
 * registry (router TTFT from `mark_prefill_completed`, the hit rate of each booked decision). No
 * engine-reported cache hits: the router never sees the engines' responses.
 */
import {
  DashboardHub,
  DecisionTap,
  decisionLogWithTap,
  routedWorkerViews,
  type CatalogWorkerLike,
  type DashboardMode,
  type DashboardSource,
  type RegistryLike,
  type RouterSetView,
} from '@kvrouter/dashboard';
import type { KvRouter } from '@kvrouter/router';
import { effectiveMaxBatchedTokens, type ModelDeploymentCard } from '@kvrouter/runtime';

interface GroupView {
  namespace: string;
  component: string;
  endpoint: string;
  router: KvRouter | null;
  index: { treeSizes(): Map<string, number>; appliedCounts(): Map<string, number> } | null;
  workers: Iterable<CatalogWorkerLike<ModelDeploymentCard['runtime_config']>>;
  model: string;
  cursor: (workerId: bigint, dpRank: number) => { state: string; last: bigint; phase: string } | null;
}

export function standaloneDashboardSource(group: () => GroupView, registry: RegistryLike): DashboardSource {
  return {
    app: 'router',
    registry,
    *sets(): Iterable<RouterSetView> {
      const g = group();
      const router = g.router;
      if (!router) return;
      const labels = {
        dynamo_namespace: g.namespace,
        dynamo_component: g.component,
        dynamo_endpoint: g.endpoint,
      };
      const index = g.index;
      yield {
        model: g.model,
        namespace: g.namespace,
        component: g.component,
        endpoint: g.endpoint,
        role: 'decode',
        router,
        workers: () => routedWorkerViews(g.workers, effectiveMaxBatchedTokens),
        treeSizes: index ? () => index.treeSizes() : null,
        appliedCounts: index ? () => index.appliedCounts() : null,
        cursor: g.cursor,
        reported: null,
        series: {
          ttft: { name: 'dynamo_component_router_time_to_first_token_seconds', labels },
          hitRate: { name: 'dynamo_component_router_kv_hit_rate', labels },
        },
      };
    },
  };
}

/** The tap (unless off) for the router's decision log, and the hub once the router's state exists. */
export function standaloneDashboard(mode: DashboardMode): {
  decisionLog: ReturnType<typeof decisionLogWithTap> | null;
  hub: (source: DashboardSource) => DashboardHub | null;
} {
  if (mode === 'off') return { decisionLog: null, hub: () => null };
  const tap = new DecisionTap();
  return {
    decisionLog: decisionLogWithTap(null, tap),
    hub: (source) => new DashboardHub({ source, mode, tap }),
  };
}
