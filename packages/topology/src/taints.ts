/**
 * Topology taints (PROTOCOL §13): each published domain `{d: v}` becomes the worker taint
 * `dynamo.topology/<d>=<v>`; `runtime_config.taints` are added as they are.
 */
export const TOPOLOGY_TAINT_PREFIX = 'dynamo.topology/';

export function topologyTaint(domain: string, value: string): string {
  return `${TOPOLOGY_TAINT_PREFIX}${domain}=${value}`;
}

/** `dynamo.topology/<d>=<v>` → `{domain, value}`; null for any other taint. The value may contain `=`. */
export function parseTopologyTaint(taint: string): { domain: string; value: string } | null {
  if (!taint.startsWith(TOPOLOGY_TAINT_PREFIX)) return null;
  const rest = taint.slice(TOPOLOGY_TAINT_PREFIX.length);
  const eq = rest.indexOf('=');
  if (eq <= 0) return null;
  return { domain: rest.slice(0, eq), value: rest.slice(eq + 1) };
}

/** The taints a worker holds: its extra taints plus one per topology domain. */
export function workerTaints(rc: {
  taints?: readonly string[] | null;
  topology_domains?: Readonly<Record<string, string>> | null;
}): Set<string> {
  const out = new Set<string>(rc.taints ?? []);
  for (const [d, v] of Object.entries(rc.topology_domains ?? {})) out.add(topologyTaint(d, v));
  return out;
}
