/**
 * The `DYN_TOPOLOGY_*` worker contract (docs/protocol.md §13) for the adapter: `@kvrouter/topology` holds
 * the rules (file → domain, 30 s wait for the transfer domain, docs/configuration.md messages); this supplies the
 * timers and `@kvrouter/runtime`'s `readTextDir`.
 */
import { TopologyConfigError, loadTopology } from '@kvrouter/topology';
import { readTextDir, type ModelRuntimeConfig } from '@kvrouter/runtime';
import { WorkerConfigError, type WorkerConfig } from './options.js';

/** The card's topology fields (empty when disabled); configuration problems are `WorkerConfigError`s. */
export async function topologyRuntimeConfig(c: WorkerConfig): Promise<Partial<ModelRuntimeConfig>> {
  try {
    const f = await loadTopology(
      {
        enabled: c.topologyEnabled,
        mountPath: c.topologyMountPath,
        domain: c.kvTransferDomain,
        enforcement: c.kvTransferEnforcement,
        preferredWeight: c.kvTransferPreferredWeight,
      },
      {
        readDir: readTextDir,
        now: () => performance.now(),
        sleep: (ms) => new Promise((r) => setTimeout(r, ms)),
      },
    );
    return f ? { ...f } : {};
  } catch (e) {
    if (e instanceof TopologyConfigError) {
      const field = e.detail?.field;
      throw new WorkerConfigError(e.message, typeof field === 'string' ? field : 'DYN_KV_TRANSFER_DOMAIN');
    }
    throw e;
  }
}
