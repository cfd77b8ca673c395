/**
 * The seed's "Diagnostic signals" table (topology-aware KV transfer): each symptom gets one log
 * line (built here, so every component words it the same) and one metric (registered by
 * `@kvrouter/metrics` `TopologyMetrics`; the seed names none, so they are
 * `dynamo_component_router_topology_*`).
 */

export type TopologySymptom =
  | 'worker_exits_at_startup'
  | 'required_no_endpoint'
  | 'preferred_cross_domain'
  | 'metadata_missing'
  | 'constraints_underivable';

export interface SymptomRow {
  symptom: TopologySymptom;
  /** The seed's wording (translated). */
  seen: string;
  likelyCause: string;
  check: string;
  /** Prometheus series counting it; null where no process lives long enough to be scraped. */
  metric: string | null;
}

export const TOPOLOGY_METRICS = {
  requiredUnsatisfied: 'dynamo_component_router_topology_required_unsatisfied_total',
  decodePlacements: 'dynamo_component_router_topology_decode_placements_total',
  metadataMissing: 'dynamo_component_router_topology_metadata_missing_total',
  constraintErrors: 'dynamo_component_router_topology_constraint_errors_total',
} as const;

export const TOPOLOGY_DIAGNOSTICS: readonly SymptomRow[] = [
  {
    symptom: 'worker_exits_at_startup',
    seen: 'the worker exits during startup',
    likelyCause: 'DYN_KV_TRANSFER_DOMAIN is not set, or the topology file was never populated',
    check: 'worker logs and the contents of DYN_TOPOLOGY_MOUNT_PATH',
    metric: null,
  },
  {
    symptom: 'required_no_endpoint',
    seen: 'the required policy returns no endpoint',
    likelyCause: 'no decode worker holds the generated topology taint of the selected prefill worker',
    check: "the workers' ModelRuntimeConfig topology metadata and decode worker placement",
    metric: TOPOLOGY_METRICS.requiredUnsatisfied,
  },
  {
    symptom: 'preferred_cross_domain',
    seen: 'the preferred policy still routes across domains',
    likelyCause:
      "the matching domain's decode workers are overloaded or unavailable, or the weight is small relative to load",
    check: 'raise the preferred weight, add decode capacity in the domain, or switch to required',
    metric: `${TOPOLOGY_METRICS.decodePlacements}{placement="cross_domain"}`,
  },
  {
    symptom: 'metadata_missing',
    seen: 'the router does not see topology metadata',
    likelyCause: 'the worker did not publish the topology fields',
    check: 'backend startup logs and the runtime config in discovery / metrics',
    metric: TOPOLOGY_METRICS.metadataMissing,
  },
  {
    symptom: 'constraints_underivable',
    seen: 'requests fail before prefill with topology_constraint_unavailable',
    likelyCause:
      'the prefill worker publishes an incomplete policy (domain value, enforcement or preferred weight missing)',
    check: "the prefill worker's runtime_config kv_transfer_* fields and topology_domains",
    metric: `${TOPOLOGY_METRICS.constraintErrors}{reason}`,
  },
];

export interface SymptomContext {
  model?: string;
  prefillWorker?: string;
  decodeWorker?: string;
  /** The derived taint, e.g. `dynamo.topology/zone=us-east-1a`. */
  taint?: string;
  reason?: string;
  mountPath?: string;
  /** How many times it happened so far (log lines are sampled by the caller). */
  count?: number;
}

/** One log line per symptom: what happened, then the table's check. */
export function symptomLogLine(symptom: TopologySymptom, c: SymptomContext = {}): string {
  const row = TOPOLOGY_DIAGNOSTICS.find((r) => r.symptom === symptom)!;
  const parts: string[] = [];
  if (c.model !== undefined) parts.push(`model=${c.model}`);
  if (c.prefillWorker !== undefined) parts.push(`prefill_worker=${c.prefillWorker}`);
  if (c.decodeWorker !== undefined) parts.push(`decode_worker=${c.decodeWorker}`);
  if (c.taint !== undefined) parts.push(`taint=${c.taint}`);
  if (c.reason !== undefined) parts.push(`reason=${c.reason}`);
  if (c.mountPath !== undefined) parts.push(`mount_path=${c.mountPath}`);
  if (c.count !== undefined) parts.push(`count=${c.count}`);
  const ctx = parts.length > 0 ? ` (${parts.join(' ')})` : '';
  return `topology: ${row.seen}${ctx}; likely cause: ${row.likelyCause}; check: ${row.check}`;
}
