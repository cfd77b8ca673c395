/**
 * The `DYN_TOPOLOGY_*` worker contract (docs/protocol.md §13) for the mocker: the rules (file → domain,
 * 30 s wait polled every second, docs/configuration.md messages) live in `@kvrouter/topology`; this supplies
 * the timers and `@kvrouter/runtime`'s `readTextDir`, and turns its errors into `MockerConfigError` (exit 2).
 */
import { TopologyConfigError, domainsFromEntries, loadTopology, type TopologyIo } from '@kvrouter/topology';
import { readTextDir, type ModelRuntimeConfig } from '@kvrouter/runtime';
import { MockerConfigError, type MockerConfig } from './options.js';

export type TopologyConfig = Pick<
  MockerConfig,
  | 'topologyEnabled'
  | 'topologyMountPath'
  | 'kvTransferDomain'
  | 'kvTransferEnforcement'
  | 'kvTransferPreferredWeight'
>;

export function readTopologyDomains(dir: string): Record<string, string> {
  return domainsFromEntries(readTextDir(dir) ?? []);
}

const nodeTopologyIo: TopologyIo = {
  readDir: readTextDir,
  now: () => performance.now(),
  sleep: (ms) => new Promise((r) => setTimeout(r, ms)),
};

/**
 * The runtime_config fields of the topology contract, after waiting (30 s by default) for the
 * transfer domain's file. Empty when topology is disabled.
 */
export async function topologyRuntimeConfig(
  c: TopologyConfig,
  opts: { waitMs?: number; pollMs?: number } = {},
): Promise<Partial<ModelRuntimeConfig>> {
  try {
    const f = await loadTopology(
      {
        enabled: c.topologyEnabled,
        mountPath: c.topologyMountPath,
        domain: c.kvTransferDomain,
        enforcement: c.kvTransferEnforcement,
        preferredWeight: c.kvTransferPreferredWeight,
      },
      nodeTopologyIo,
      opts,
    );
    return f ? { ...f } : {};
  } catch (e) {
    if (e instanceof TopologyConfigError) {
      const field = e.detail?.field;
      throw new MockerConfigError(e.message, typeof field === 'string' ? field : 'DYN_KV_TRANSFER_DOMAIN');
    }
    throw e;
  }
}
