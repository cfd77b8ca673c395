/**
 * The `DYN_TOPOLOGY_*` worker contract (PROTOCOL.md §13) for the mocker: the rules (file → domain,
 * 30 s wait polled every second, FLAGS.md messages) live in `@kvrouter/topology`; this supplies
 * the directory reading and the timers, and turns its errors into `MockerConfigError` (exit 2).
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import {
  TopologyConfigError,
  domainsFromEntries,
  loadTopology,
  type TopologyDirEntry,
  type TopologyIo,
} from '@kvrouter/topology';
import type { ModelRuntimeConfig } from '@kvrouter/runtime';
import { MockerConfigError, type MockerConfig } from './options.js';

export type TopologyConfig = Pick<
  MockerConfig,
  | 'topologyEnabled'
  | 'topologyMountPath'
  | 'kvTransferDomain'
  | 'kvTransferEnforcement'
  | 'kvTransferPreferredWeight'
>;

/** The mount directory's entries; null when it is missing. */
export function readTopologyDir(dir: string): TopologyDirEntry[] | null {
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
      // Vanished between listing and reading: absent.
      return { name, isFile: false, content: null };
    }
  });
}

export function readTopologyDomains(dir: string): Record<string, string> {
  return domainsFromEntries(readTopologyDir(dir) ?? []);
}

export const nodeTopologyIo: TopologyIo = {
  readDir: readTopologyDir,
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
