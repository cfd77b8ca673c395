/**
 * What the frontend's routers do beyond routing, per worker set, the way the standalone router does
 * it (the shared wiring lives in `@kvrouter/router-host`):
 * - `--router-durable-kv-events` (deprecated, docs/protocol.md §5.3): a JetStream durable consumer
 *   named after the frontend feeds the set's index (snapshot replay, `--router-snapshot-threshold`,
 *   `--router-reset-states`) instead of the event plane; the frontend registers `router-discovery`
 *   under the worker component so other routers' stale-consumer cleanup keeps its consumer.
 * - `--serve-indexer` (§7.7): the set's index answers `kv_indexer_query` (and
 *   `kv_indexer_record_routing_decision` when approximate) for routers with `--use-remote-indexer`.
 * Each set gets its own request-plane server (one instance per component, so two sets of one model
 * never answer for each other). Failures after startup are logged; the set keeps routing.
 */
import { KvrError, ROUTER_DISCOVERY_ENDPOINT, componentSubject, u64ToHex } from '@kvrouter/protocols';
import {
  Closers,
  ServedIndexer,
  checkServedIndexRules,
  registerServedIndex,
  serveIndexHandlers,
  startDurableKvFeed,
  type RouterPlan,
} from '@kvrouter/router-host';
import {
  NatsRequestServer,
  TcpRequestServer,
  registerInstance,
  type Discovery,
  type NatsConnection,
  type RequestServer,
} from '@kvrouter/runtime';
import type { ResolvedConfig } from '@kvrouter/config';
import type { Logger, WorkerSet } from './models.js';

type ServiceFlags = Pick<
  ResolvedConfig<'frontend'>,
  | 'routerDurableKvEvents'
  | 'routerSnapshotThreshold'
  | 'routerResetStates'
  | 'natsStreamMaxAge'
  | 'serveIndexer'
  | 'discoveryBackend'
  | 'requestPlane'
  | 'httpHost'
>;

/** Durable KV events apply to an event-driven index only (kv mode, KV events on, local index). */
export function durableKvEventsOn(config: ServiceFlags, plan: RouterPlan): boolean {
  return config.routerDurableKvEvents && plan.params.index.kind === 'events';
}

/**
 * Startup refusals of these flags on the frontend (exit 2, naming the flag): with mem discovery
 * the workers are embedded and publish in process, so there is no JetStream stream to read and no
 * other router to serve an index to.
 */
export function checkRouterServiceFlags(config: ServiceFlags, plan: RouterPlan): void {
  const why = (flag: string, what: string) =>
    new KvrError(
      'not_supported',
      `${flag}: ${what} needs a shared discovery backend (--discovery-backend etcd, file or kubernetes); with mem discovery the workers are embedded in this process`,
      400,
      { field: flag.replace(/^--/, '') },
    );
  if (config.discoveryBackend === 'mem' && durableKvEventsOn(config, plan))
    throw why('--router-durable-kv-events', 'reading the JetStream stream workers publish to');
  if (config.discoveryBackend === 'mem' && config.serveIndexer)
    throw why('--serve-indexer', 'serving the index to other routers');
}

export interface RouterServicesOptions {
  config: ServiceFlags;
  plan: RouterPlan;
  discovery: Discovery;
  /** Needed for `--router-durable-kv-events` and `--request-plane nats`. */
  nc: NatsConnection | null;
  routerId: bigint;
  log: Logger;
}

/** The registry's `attach` hook for these flags, or null when neither is on. */
export function routerServices(
  o: RouterServicesOptions,
): ((set: WorkerSet) => { close(): Promise<void> }) | null {
  const { config, plan, log } = o;
  const durable = durableKvEventsOn(config, plan);
  const serve = config.serveIndexer;
  // §6.5: every kv-mode router registers `router-discovery` under its worker component (issue 18).
  // (Not with mem discovery: no other process sees it.)
  const kv = (plan.params.policy.mode ?? 'kv') === 'kv' && config.discoveryBackend !== 'mem';
  if (!durable && !serve && !kv) return null;
  return (set) => {
    const closers = new Closers();
    const started = (async () => {
      // Null with --use-remote-indexer: nothing to serve or feed, router-discovery still registered.
      const index = set.indexer;
      const path = { namespace: set.namespace, component: set.component, endpoint: set.endpoint };
      const where = `${set.namespace}/${set.component}`;
      let served: ServedIndexer | null = null;
      if (serve && index) {
        const approximate = plan.params.index.kind === 'approximate';
        try {
          await checkServedIndexRules(o.discovery, path, o.routerId, approximate);
          served = new ServedIndexer(approximate);
          served.bind(set.cardName, index);
        } catch (e) {
          log.error(`${(e as Error).message}; the index of ${where} is not served`);
        }
      }
      const server: RequestServer =
        config.requestPlane === 'nats' && o.nc
          ? await NatsRequestServer.start(o.nc, {
              subject: `${componentSubject(set.namespace, set.component)}.instance.${u64ToHex(o.routerId)}`,
            })
          : await TcpRequestServer.listen({ host: config.httpHost, port: 0 });
      closers.push(() => server.close({ graceMs: 0 }));
      if (served) {
        serveIndexHandlers(server, served);
        for (const u of await registerServedIndex(o.discovery, path, server, served.approximate))
          closers.push(u);
        log.info(
          `serving the ${served.approximate ? 'approximate' : 'event-driven'} index of model ${set.cardName} on ${where} (--serve-indexer)`,
        );
      }
      if (kv || durable) {
        const rd = await registerInstance(o.discovery, {
          ...path,
          endpoint: ROUTER_DISCOVERY_ENDPOINT,
          transport: server.transport,
        });
        closers.push(() => rd.unregister());
      }
      if (durable && o.nc && index) {
        const feed = await startDurableKvFeed({
          nc: o.nc,
          discovery: o.discovery,
          path,
          routerId: o.routerId,
          index,
          snapshotThreshold: config.routerSnapshotThreshold,
          resetStates: config.routerResetStates,
          streamMaxAgeSec: config.natsStreamMaxAge,
          log,
        });
        closers.push(() => feed.close());
      }
    })().catch((e: unknown) =>
      log.error(
        `router services of ${set.model} (${set.namespace}/${set.component}): ${(e as Error).message}`,
      ),
    );
    return {
      close: async () => {
        await started;
        await closers.close((e) => log.warn(`shutdown: ${(e as Error).message}`));
      },
    };
  };
}
