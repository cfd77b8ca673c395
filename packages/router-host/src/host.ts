/**
 * One router's wiring for one worker group (namespace, component, endpoint): its index (local,
 * pooled or remote), the KV event feed into it (subscriber with gap recovery + worker watch), the
 * `ActiveLoad` channel (worker loads in, this router's projected loads out), replica sync, and the
 * router itself, built from the first model card (its block size). The frontend keeps one per
 * worker set; the standalone router one for its endpoint.
 */
import {
  KvEventSubscriber,
  LoadChannel,
  ReplicaLiveChannel,
  ReplicaSync,
  discoveryTransportResolver,
  kvEventsTopic,
  requestPlaneQueryClient,
  watchWorkers,
  type EventPlane,
} from '@kvrouter/kv-events';
import type { RouterEndpointMetrics } from '@kvrouter/metrics';
import { createKvIndexer } from '@kvrouter/radix-indexer/pool';
import type { ActiveLoad, Logger } from '@kvrouter/protocols';
import type { KvRouter, RemoteIndexer, RouterHooks, RouterPorts } from '@kvrouter/router';
import {
  effectiveMaxBatchedTokens,
  type Discovery,
  type ModelDeploymentCard,
  type RequestClient,
} from '@kvrouter/runtime';
import {
  blockSizeOf,
  buildLocalIndex,
  createRouter,
  type HostIndex,
  type IndexPool,
  type RouterPlan,
  type RouterWiring,
} from './assembly/index.js';
import { Closers, routerClock } from './lifecycle.js';
import { createRemoteIndex } from './remote-index.js';

/** How often a router with replica sync publishes its live request ids (issue 18). */
const LIVE_LIST_EVERY_MS = 2000;
/** A peer whose lists stopped this long ago has its bookings freed. */
const LIVE_LIST_SILENT_MS = 10_000;

export interface GroupPath {
  namespace: string;
  component: string;
  endpoint: string;
}

/** The writer-thread pool of `--router-event-threads` (one thread: the in-process index). */
export const threadPool =
  (log: Logger): IndexPool =>
  (o) =>
    createKvIndexer({
      threads: o.threads,
      ...(o.approximate
        ? { approximate: o.approximate }
        : { onError: (e) => log.warn(`index: ${e.message}`) }),
    });

export interface KvEventFeedOptions {
  plane: EventPlane;
  discovery: Discovery;
  /** For local-indexer recovery queries. */
  client: RequestClient;
  path: GroupPath;
  index: HostIndex;
  log: Logger;
}

/**
 * KV events of one component into `index` (§5.1–§5.3): the subscriber (per-(worker, rank) cursors,
 * gap recovery from the worker's local indexer) and the discovery watch that adds and removes workers.
 */
export function startKvEventFeed(o: KvEventFeedOptions): {
  close(): Promise<void>;
  subscriber: KvEventSubscriber;
} {
  const { namespace: ns, component: comp, endpoint } = o.path;
  const sub = new KvEventSubscriber({
    index: o.index,
    query: requestPlaneQueryClient(o.client, { resolve: discoveryTransportResolver(o.discovery, ns, comp) }),
    onError: (e, ctx) => o.log.warn(`kv events ${ns}/${comp}: ${ctx}: ${(e as Error).message}`),
  });
  sub.start(() => o.plane.subscribe(kvEventsTopic(ns, comp)));
  const watch = watchWorkers({
    discovery: o.discovery,
    namespace: ns,
    component: comp,
    endpoint,
    subscriber: sub,
  });
  return {
    subscriber: sub,
    close: async () => {
      watch.close();
      await sub.close();
    },
  };
}

export interface RouterHostOptions {
  plan: RouterPlan;
  path: GroupPath;
  discovery: Discovery;
  client: RequestClient;
  /** KV events, loads and replica sync (null: none of them). */
  eventPlane: EventPlane | null;
  /** This process's discovery lease id (replica sync `router_id`). */
  routerId: bigint;
  log: Logger;
  /** Where the router's log lines say they come from, e.g. `router mock-model (ns/backend)`. */
  label?: string;
  /** With `--use-remote-indexer`: the card's `display_name` (served indexes are keyed by it) and its failure counters. */
  remote?: { modelName: string; metrics: RouterEndpointMetrics } | null;
  /** Do not subscribe to KV events (`--router-durable-kv-events` feeds the index instead). */
  noEventFeed?: boolean;
  /** Worker loads from the event plane reach the router only for workers this accepts (default all). */
  acceptsLoadOf?: (workerId: bigint) => boolean;
  /** Metrics hooks around `publishLoad` (the frontend's gauges); default: publish only. */
  routerHooks?: (publishLoad: ((l: ActiveLoad) => void) | null) => RouterHooks;
  ports?: RouterPorts;
  adjust?: RouterWiring['adjust'];
  /** Clock in ms and randomness (default the real ones). */
  now?: () => number;
  random?: () => number;
}

export class RouterHost {
  readonly index: HostIndex | null;
  private readonly remote: { indexer: RemoteIndexer; close(): void } | null;
  private readonly closers = new Closers();
  private router_: KvRouter | null = null;
  private readonly replica: ReplicaSync | null;
  private readonly loads: LoadChannel | null;
  private feed: { subscriber: KvEventSubscriber } | null = null;

  constructor(readonly o: RouterHostOptions) {
    const { plan, path, log } = o;
    const p = plan.params;
    const now = o.now ?? Date.now;
    this.remote =
      p.index.kind === 'remote' && o.remote
        ? createRemoteIndex({
            discovery: o.discovery,
            client: o.client,
            namespace: path.namespace,
            component: path.component,
            modelName: o.remote.modelName,
            approximate: !p.index.kvEvents,
            metrics: o.remote.metrics,
            warn: (m) => log.warn(m),
          })
        : null;
    if (this.remote) this.closers.push(() => this.remote!.close());
    this.index = this.remote ? this.remote.indexer : buildLocalIndex(p.index, { now, pool: threadPool(log) });
    const index = this.index;
    if (index) this.closers.push(() => index.close());
    const plane = o.eventPlane;
    // Replica sync shares KV booking state between routers (§5.4): kv mode only.
    this.replica =
      plane && p.replicaSync && (p.policy.mode ?? 'kv') === 'kv'
        ? new ReplicaSync(plane, path.namespace, path.component, o.routerId)
        : null;
    this.loads = plane ? new LoadChannel(plane, path.namespace) : null;
    if (!plane) return;
    if (index && !this.remote && p.index.kind === 'events' && !o.noEventFeed) {
      const feed = startKvEventFeed({ plane, discovery: o.discovery, client: o.client, path, index, log });
      this.feed = feed;
      this.closers.push(() => feed.close());
    }
    // Worker-published loads feed the busy monitor in every mode (§11).
    const accepts = o.acceptsLoadOf ?? (() => true);
    const ls = this.loads!.subscribe((l) => {
      if (accepts(l.worker_id)) this.router_?.ingestLoad(l);
    });
    this.closers.push(() => ls.close());
    if (this.replica) {
      const rs = this.replica.subscribe((ev) => this.router_?.applyReplicaEvent(ev));
      this.closers.push(() => rs.close());
      // Reconciliation (issue 18): frees lost on the event plane (a NATS restart) do not leave
      // peer bookings behind until the request expiry.
      const live = new ReplicaLiveChannel(plane, path.namespace, path.component, o.routerId);
      const ls = live.subscribe((l) => {
        const freed = this.router_?.applyReplicaLiveList(l) ?? 0;
        if (freed > 0)
          log.warn(
            `replica sync: freed ${freed} bookings of router ${l.router_id.toString(16)} it no longer lists (their frees were lost)`,
          );
      });
      this.closers.push(() => ls.close());
      const timer = setInterval(() => {
        const r = this.router_;
        if (!r) return;
        const list = r.replicaLiveList();
        if (list) live.publish(list);
        const gone = r.expireSilentReplicas(LIVE_LIST_SILENT_MS);
        if (gone > 0)
          log.warn(`replica sync: freed ${gone} bookings of routers silent for ${LIVE_LIST_SILENT_MS} ms`);
      }, LIVE_LIST_EVERY_MS);
      timer.unref();
      this.closers.push(() => clearInterval(timer));
    }
  }

  /** A rank's KV event cursor (state, recovery phase, last applied id); null without an event feed (the dashboard reads it). */
  cursor(workerId: bigint, dpRank: number): { state: string; last: bigint; phase: string } | null {
    return this.feed?.subscriber.cursor(workerId, dpRank) ?? null;
  }

  /**
   * Resolves true once the index holds what `workers` had when this was called: each one's first
   * recovery from its local indexer (ring-buffer events or tree dump) done and applied; false after
   * `maxMs` without that. A served index registers after it (issue 18), so no query waits on the
   * rebuild of a restarted router. Without an event feed there is nothing to wait for.
   */
  async rebuilt(workers: readonly bigint[], maxMs = 5000): Promise<boolean> {
    const sub = this.feed?.subscriber;
    if (!sub) return true;
    const end = Date.now() + maxMs;
    const caughtUp = (): boolean =>
      sub.pendingRecoveries === 0 && workers.every((id) => sub.cursor(id, 0)?.phase === 'none');
    while (!caughtUp()) {
      if (Date.now() > end) return false;
      await new Promise((r) => setTimeout(r, 20));
    }
    await this.index?.flush();
    return true;
  }

  /** Null until the first card (its block size) built it. */
  get router(): KvRouter | null {
    return this.router_;
  }

  /** The router, built on the first card: `--kv-cache-block-size` or the card's block size. */
  routerFor(card: ModelDeploymentCard): KvRouter {
    if (this.router_) return this.router_;
    const o = this.o;
    const replica = this.replica;
    const loads = this.loads;
    const publishLoad = replica && loads ? (l: ActiveLoad) => loads.publish(l) : null;
    const label = o.label ?? `router ${o.path.namespace}/${o.path.component}`;
    this.router_ = createRouter(o.plan, {
      blockSize: blockSizeOf(o.plan.params, card.kv_cache_block_size),
      clock: routerClock(o.now),
      random: o.random ?? Math.random,
      hrtime: () => performance.now(),
      indexer: this.remote ? null : this.index,
      remote: this.remote?.indexer ?? null,
      ports: {
        routerId: o.routerId,
        ...o.ports,
        ...(replica ? { publishActiveSequenceEvent: (ev) => replica.publish(ev) } : {}),
      },
      hooks: {
        ...(o.routerHooks ? o.routerHooks(publishLoad) : { publishLoad }),
        onError: (e, ctx) => o.log.warn(`${label}: ${ctx}: ${(e as Error).message}`),
      },
      ...(o.adjust ? { adjust: o.adjust } : {}),
    });
    return this.router_;
  }

  /** Adds a routable worker from its card (building the router on the first one). */
  addWorker(id: bigint, card: ModelDeploymentCard): KvRouter {
    const r = this.routerFor(card);
    const rc = card.runtime_config;
    r.addWorker({
      workerId: id,
      dpStart: rc.data_parallel_start_rank,
      dpSize: rc.data_parallel_size,
      totalKvBlocks: rc.total_kv_blocks,
      maxNumBatchedTokens: effectiveMaxBatchedTokens(rc),
      taints: rc.taints,
      topologyDomains: rc.topology_domains,
    });
    return r;
  }

  removeWorker(id: bigint): void {
    this.router_?.removeWorker(id);
  }

  /** Closes the router, then the feed, channels and index (reverse order of building). */
  async close(): Promise<void> {
    this.router_?.close();
    await this.closers.close((e) => this.o.log.warn(`shutdown: ${(e as Error).message}`));
  }
}
