/**
 * Discovery-driven worker tracking for the subscriber (§3.6, §6.5): every `generate` instance of
 * the worker component is a worker; its card's `runtime_config` gives its dp ranks and whether it
 * runs a local indexer. A new instance is restored from full dumps, a removed one forgotten.
 */
import { GENERATE_ENDPOINT, instancesPrefix, mdcKey, parseDiscoveryKey } from '@kvrouter/protocols';
import type { Discovery } from '@kvrouter/runtime';
import type { KvEventSubscriber } from './subscriber/subscriber.js';

export interface WorkerInfo {
  dpRanks: number[];
  localIndexer: boolean;
}

/** Ranks and local-indexer flag from a ModelDeploymentCard JSON (§6.4); defaults when absent. */
export function workerInfoFromCard(cardJson: string | null): WorkerInfo {
  let start = 0;
  let size = 1;
  let localIndexer = true;
  if (cardJson !== null) {
    try {
      const rc = (JSON.parse(cardJson) as { runtime_config?: Record<string, unknown> }).runtime_config ?? {};
      const s = rc.data_parallel_start_rank;
      const n = rc.data_parallel_size;
      if (typeof s === 'number' && Number.isInteger(s) && s >= 0) start = s;
      if (typeof n === 'number' && Number.isInteger(n) && n >= 1 && n <= 4096) size = n;
      if (typeof rc.enable_local_indexer === 'boolean') localIndexer = rc.enable_local_indexer;
    } catch {
      // An unreadable card leaves the defaults; the card watcher reports it.
    }
  }
  return { dpRanks: Array.from({ length: size }, (_, i) => start + i), localIndexer };
}

export interface WatchWorkersOptions {
  discovery: Pick<Discovery, 'watch' | 'get'>;
  namespace: string;
  component: string;
  subscriber: Pick<KvEventSubscriber, 'addWorker' | 'removeWorker'>;
  endpoint?: string;
  onError?: (err: unknown) => void;
}

export function watchWorkers(o: WatchWorkersOptions): { close(): void; synced: Promise<void> } {
  const endpoint = o.endpoint ?? GENERATE_ENDPOINT;
  const watch = o.discovery.watch(instancesPrefix(o.namespace, o.component, endpoint));
  let markSynced!: () => void;
  const synced = new Promise<void>((r) => (markSynced = r));
  void (async () => {
    try {
      for await (const ev of watch) {
        if (ev.type === 'synced') {
          markSynced();
          continue;
        }
        const k = parseDiscoveryKey(ev.key);
        if (!k || k.kind !== 'instances') continue;
        if (ev.type === 'delete') {
          o.subscriber.removeWorker(k.instance_id);
          continue;
        }
        const card = await o.discovery
          .get(mdcKey(o.namespace, o.component, endpoint, k.instance_id))
          .catch(() => null);
        const info = workerInfoFromCard(card);
        o.subscriber.addWorker(k.instance_id, info);
      }
    } catch (e) {
      o.onError?.(e);
    } finally {
      markSynced();
    }
  })();
  return { close: () => watch.close(), synced };
}
