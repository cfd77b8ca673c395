/**
 * The `DYN_TOPOLOGY_*` worker contract (PROTOCOL.md §13) for the adapter: `@kvrouter/topology` holds
 * the rules (file → domain, 30 s wait for the transfer domain, FLAGS.md messages); this supplies the
 * directory reading and the timers (the mocker has its own copy: apps do not import each other).
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { TopologyConfigError, loadTopology, type TopologyDirEntry } from '@kvrouter/topology';
import type { ModelRuntimeConfig } from '@kvrouter/runtime';
import { WorkerConfigError, type WorkerConfig } from './options.js';

function readDir(dir: string): TopologyDirEntry[] | null {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return null;
  }
  return names.map((name) => {
    const p = join(dir, name);
    try {
      const isFile = statSync(p).isFile();
      return { name, isFile, content: isFile ? readFileSync(p, 'utf8') : null };
    } catch {
      return { name, isFile: false, content: null };
    }
  });
}

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
      { readDir, now: () => performance.now(), sleep: (ms) => new Promise((r) => setTimeout(r, ms)) },
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
