/**
 * Decode constraints from the chosen prefill worker's published topology (PROTOCOL §13). Run after
 * the prefill worker is selected and before prefill is dispatched, so an incomplete policy fails
 * the request without any prefill work (fail-closed).
 */
import { emptyRoutingConstraints, type RoutingConstraints } from '@kvrouter/protocols';
import { TopologyConstraintError } from './errors.js';
import { topologyTaint } from './taints.js';

/** The runtime_config fields read; anything else on the config is ignored. */
export interface PrefillTopology {
  topology_domains?: Readonly<Record<string, string>> | null;
  kv_transfer_domain?: string | null;
  kv_transfer_enforcement?: string | null;
  kv_transfer_preferred_weight?: number | null;
}

export type DerivedConstraints =
  /** The prefill worker publishes no transfer policy: decode is unconstrained (diagnostic "metadata missing"). */
  | { kind: 'none' }
  | {
      kind: 'required' | 'preferred';
      /** `dynamo.topology/<kv_transfer_domain>=<value>` of the prefill worker. */
      taint: string;
      domain: string;
      value: string;
      /** The preferred weight; 1 for required (not used as a weight). */
      weight: number;
      constraints: RoutingConstraints;
    };

/**
 * `rc` null/undefined or without `kv_transfer_domain` and `kv_transfer_enforcement` → `none`.
 * Otherwise every piece must be there, else `TopologyConstraintError` (503) naming the field:
 * domain missing, domain value missing, enforcement missing or unknown, preferred without a weight
 * in [0, 1].
 */
export function deriveDecodeConstraints(
  rc: PrefillTopology | null | undefined,
  workerId?: string,
): DerivedConstraints {
  const domain = rc?.kv_transfer_domain ?? null;
  const enforcement = rc?.kv_transfer_enforcement ?? null;
  if (domain === null && enforcement === null) return { kind: 'none' };
  const who = workerId !== undefined ? `prefill worker ${workerId}` : 'the prefill worker';
  const fail = (
    reason: ConstructorParameters<typeof TopologyConstraintError>[0],
    field: string,
    what: string,
  ): never => {
    throw new TopologyConstraintError(
      reason,
      field,
      `cannot derive KV transfer constraints: ${who} publishes ${what}; failing before prefill`,
      workerId,
    );
  };
  if (domain === null || domain === '')
    return fail(
      'domain_missing',
      'kv_transfer_domain',
      `kv_transfer_enforcement ${enforcement} but no kv_transfer_domain`,
    );
  if (enforcement === null)
    return fail(
      'enforcement_missing',
      'kv_transfer_enforcement',
      `kv_transfer_domain "${domain}" but no kv_transfer_enforcement`,
    );
  if (enforcement !== 'required' && enforcement !== 'preferred')
    return fail(
      'enforcement_invalid',
      'kv_transfer_enforcement',
      `kv_transfer_enforcement "${enforcement}" (expected required or preferred)`,
    );
  const value = rc?.topology_domains?.[domain];
  if (typeof value !== 'string' || value === '')
    return fail(
      'domain_value_missing',
      `topology_domains.${domain}`,
      `kv_transfer_domain "${domain}" but no value for it in topology_domains`,
    );
  const taint = topologyTaint(domain, value);
  const constraints = emptyRoutingConstraints();
  if (enforcement === 'required') {
    constraints.required_taints.add(taint);
    return { kind: 'required', taint, domain, value, weight: 1, constraints };
  }
  const w = rc?.kv_transfer_preferred_weight;
  if (typeof w !== 'number' || !(w >= 0 && w <= 1))
    return fail(
      'weight_missing',
      'kv_transfer_preferred_weight',
      `kv_transfer_enforcement preferred without a kv_transfer_preferred_weight in [0, 1]`,
    );
  constraints.preferred_taints.set(taint, w);
  return { kind: 'preferred', taint, domain, value, weight: w, constraints };
}
