/**
 * Worker topology contract (FLAGS.md "Topology-aware KV transfer", PROTOCOL.md §13): with
 * `DYN_TOPOLOGY_ENABLED`, each file in the mount directory is one domain (name = domain, trimmed
 * content = value; hidden and empty files ignored), published in the card's runtime_config.
 * Lives here until a shared topology package exists.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { ModelRuntimeConfig } from '@kvrouter/runtime';
import { MockerConfigError, type MockerConfig } from './options.js';

export type TopologyConfig = Pick<
  MockerConfig,
  'topologyEnabled' | 'topologyMountPath' | 'kvTransferDomain' | 'kvTransferEnforcement' | 'kvTransferPreferredWeight'
>;

export function readTopologyDomains(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return out;
  }
  for (const name of names.sort()) {
    if (name.startsWith('.')) continue;
    const p = join(dir, name);
    try {
      if (!statSync(p).isFile()) continue;
      const v = readFileSync(p, 'utf8').trim();
      if (v.length > 0) out[name] = v;
    } catch {
      // A file that vanished between listing and reading counts as absent.
    }
  }
  return out;
}

/**
 * The runtime_config fields of the topology contract; waits up to `waitMs` (30 s) for the KV
 * transfer domain's file to be populated. Empty when topology is disabled.
 */
export async function topologyRuntimeConfig(
  c: TopologyConfig,
  opts: { waitMs?: number; pollMs?: number } = {},
): Promise<Partial<ModelRuntimeConfig>> {
  if (!c.topologyEnabled) return {};
  const domain = c.kvTransferDomain!;
  const waitMs = opts.waitMs ?? 30_000;
  const deadline = performance.now() + waitMs;
  let domains = readTopologyDomains(c.topologyMountPath);
  while (domains[domain] === undefined) {
    if (performance.now() >= deadline)
      throw new MockerConfigError(
        `topology domain "${domain}" in ${c.topologyMountPath} was not populated within ${Math.round(waitMs / 1000)}s`,
        'DYN_KV_TRANSFER_DOMAIN',
      );
    await new Promise((r) => setTimeout(r, opts.pollMs ?? 250));
    domains = readTopologyDomains(c.topologyMountPath);
  }
  return {
    topology_domains: domains,
    kv_transfer_domain: domain,
    kv_transfer_enforcement: c.kvTransferEnforcement,
    kv_transfer_preferred_weight: c.kvTransferEnforcement === 'preferred' ? c.kvTransferPreferredWeight : null,
  };
}
