/**
 * `--router-durable-kv-events` (deprecated; docs/protocol.md §5.3) for any router host: a JetStream
 * durable consumer named after this router feeds the index (snapshot replay first, snapshot + purge
 * past `--router-snapshot-threshold`, `--router-reset-states` at start) instead of the event-plane
 * subscriber. When a `router-discovery` instance of the component leaves, consumers of routers that
 * are gone are deleted. Shared by the standalone router (one endpoint) and the frontend (one feed per
 * worker set).
 */
import { DurableKvConsumer } from '@kvrouter/kv-events';
import {
  ROUTER_DISCOVERY_ENDPOINT,
  instancesPrefix,
  parseDiscoveryKey,
  type Logger,
} from '@kvrouter/protocols';
import { watchInstances, type Discovery, type NatsConnection } from '@kvrouter/runtime';
import type { HostIndex } from './assembly/index.js';
import type { GroupPath } from './host.js';

export interface DurableFeedOptions {
  nc: NatsConnection;
  discovery: Discovery;
  /** The worker group whose stream is read (`namespace-{ns}-component-{comp}-kv-events`). */
  path: GroupPath;
  /** This router's instance id (its consumer is named after it). */
  routerId: bigint;
  index: HostIndex;
  /** `--router-snapshot-threshold`, `--router-reset-states`, `DYN_NATS_STREAM_MAX_AGE`. */
  snapshotThreshold: bigint | number;
  resetStates: boolean;
  streamMaxAgeSec: bigint | number;
  log: Logger;
}

export interface DurableFeed {
  readonly consumer: DurableKvConsumer;
  close(): Promise<void>;
}

/**
 * Starts the consumer (after this router's `router-discovery` instance is registered: stale
 * consumers are those of routers without one) and the watch that cleans up after routers that left.
 */
export async function startDurableKvFeed(o: DurableFeedOptions): Promise<DurableFeed> {
  const { discovery, log } = o;
  const { namespace: ns, component: comp, endpoint } = o.path;
  const ids = async (ep: string): Promise<bigint[]> =>
    (await discovery.list(instancesPrefix(ns, comp, ep))).flatMap((e) => {
      const k = parseDiscoveryKey(e.key);
      return k ? [k.instance_id] : [];
    });
  const consumer = await DurableKvConsumer.start({
    nc: o.nc,
    namespace: ns,
    component: comp,
    routerId: o.routerId,
    index: o.index,
    snapshotThreshold: Number(o.snapshotThreshold),
    resetStates: o.resetStates,
    streamMaxAgeSec: Number(o.streamMaxAgeSec),
    liveRouters: () => ids(ROUTER_DISCOVERY_ENDPOINT),
    liveWorkers: () => ids(endpoint),
    onSnapshot: (s) =>
      log.info(
        `durable kv events ${ns}/${comp}: snapshot of ${s.blocks} blocks (${s.bytes} bytes); stream purged below ${s.purgedBelow}`,
      ),
    onError: (e, ctx) => log.warn(`durable kv events ${ns}/${comp}: ${ctx}: ${(e as Error).message}`),
  });
  const routers = watchInstances(discovery, {
    namespace: ns,
    component: comp,
    endpoint: ROUTER_DISCOVERY_ENDPOINT,
  });
  void (async () => {
    try {
      for await (const ch of routers)
        if (ch.type === 'delete')
          await consumer
            .removeStaleConsumers()
            .catch((e: unknown) =>
              log.warn(`durable kv events ${ns}/${comp}: stale consumers: ${(e as Error).message}`),
            );
    } catch {
      // Closed at shutdown.
    }
  })();
  log.info(
    `durable KV events: consumer ${consumer.consumerName} on stream ${consumer.names.stream}${o.resetStates ? ' (stream and snapshot reset)' : ''}`,
  );
  return {
    consumer,
    close: async () => {
      routers.close();
      await consumer.close();
    },
  };
}
