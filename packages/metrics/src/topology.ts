/**
 * Topology-aware KV transfer diagnostics (the seed's "Diagnostic signals" table; PROTOCOL §13 names
 * no metric, so these are kvrouter's `dynamo_component_router_topology_*`), with the router
 * request metrics' endpoint labels of the decode worker set. The names match
 * `@kvrouter/topology`'s `TOPOLOGY_METRICS`.
 */
import type { Registry } from 'prom-client';
import { ROUTER_LABELS } from './names.js';
import { counter } from './registry.js';
import type { CounterFamily } from './series.js';
import type { RouterEndpointLabels } from './router.js';

export const TOPOLOGY = {
  requiredUnsatisfied: 'dynamo_component_router_topology_required_unsatisfied_total',
  decodePlacements: 'dynamo_component_router_topology_decode_placements_total',
  metadataMissing: 'dynamo_component_router_topology_metadata_missing_total',
  constraintErrors: 'dynamo_component_router_topology_constraint_errors_total',
} as const;

type RL = (typeof ROUTER_LABELS)[number];

export class TopologyMetrics {
  /** Requests failed before prefill: no decode worker holds the required taint. */
  readonly requiredUnsatisfied: CounterFamily<RL>;
  /** Decode placements under a derived constraint; `placement` = `in_domain` | `cross_domain`. */
  readonly decodePlacements: CounterFamily<RL | 'enforcement' | 'placement'>;
  /** Chosen prefill worker publishes no transfer policy while others of the model do. */
  readonly metadataMissing: CounterFamily<RL>;
  /** Fail-closed derivation errors; `reason` = domain_missing | domain_value_missing | enforcement_missing | enforcement_invalid | weight_missing. */
  readonly constraintErrors: CounterFamily<RL | 'reason'>;

  constructor(registry: Registry) {
    this.requiredUnsatisfied = counter(
      registry,
      TOPOLOGY.requiredUnsatisfied,
      'Disaggregated requests failed before prefill because no decode worker holds the required topology taint',
      ROUTER_LABELS,
    );
    this.decodePlacements = counter(
      registry,
      TOPOLOGY.decodePlacements,
      'Decode placements under a topology constraint derived from the prefill worker, by enforcement and placement',
      [...ROUTER_LABELS, 'enforcement', 'placement'],
    );
    this.metadataMissing = counter(
      registry,
      TOPOLOGY.metadataMissing,
      'Prefill workers chosen without published topology metadata while other prefill workers of the model publish it',
      ROUTER_LABELS,
    );
    this.constraintErrors = counter(
      registry,
      TOPOLOGY.constraintErrors,
      "Requests failed before prefill because the prefill worker's topology policy was incomplete, by reason",
      [...ROUTER_LABELS, 'reason'],
    );
  }

  static labels(e: RouterEndpointLabels): Record<RL, string> {
    return { dynamo_namespace: e.namespace, dynamo_component: e.component, dynamo_endpoint: e.endpoint };
  }
}

const perRegistry = new WeakMap<Registry, TopologyMetrics>();

/** The registry's one `TopologyMetrics` (created on first use, so every model shares the families). */
export function topologyMetrics(registry: Registry): TopologyMetrics {
  let m = perRegistry.get(registry);
  if (!m) perRegistry.set(registry, (m = new TopologyMetrics(registry)));
  return m;
}
