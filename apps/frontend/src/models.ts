/**
 * Models come and go with workers in discovery (docs/protocol.md §6.5). The `WorkerCatalog` of
 * `@kvrouter/router-host` turns cards and instances into routable workers; each
 * (namespace, component, endpoint) group is a `WorkerSet`: its own `RouterHost` (router with the
 * card's block size, index fed by the KV event feed, `ActiveLoad` and replica channels). A model
 * is served while one of its worker sets has a worker.
 */
import { GENERATE_ENDPOINT, KvrError, u64ToHex, type Logger } from '@kvrouter/protocols';
import type { EventPlane } from '@kvrouter/kv-events';
import type { FrontendMetricSet, RequestLifecycleMetrics } from '@kvrouter/metrics';
import type { KvIndexer } from '@kvrouter/radix-indexer';
import type { KvRouter } from '@kvrouter/router';
import {
  RouterHost,
  WorkerCatalog,
  type CatalogWorker,
  type GroupKey,
  type RouterPlan,
} from '@kvrouter/router-host';
import type { Discovery, ModelDeploymentCard, ModelType, RequestClient, Transport } from '@kvrouter/runtime';
import { DisaggState, prefillRouterOptions, type DisaggFlags } from './disagg.js';

export type { Logger };

export interface ModelRegistryOptions {
  discovery: Discovery;
  /** `--namespace` / `--namespace-prefix` (the prefix wins). */
  namespace: string | null;
  namespacePrefix: string | null;
  /** `--model-name`: every model is served under this name. */
  modelName: string | null;
  /** Router params, refusals checked and the AIC predictor built (`planRouter`). */
  plan: RouterPlan;
  /** The event plane KV events and loads arrive on (null: none, e.g. non-kv modes without busy checks). */
  eventPlane: EventPlane | null;
  /** For local-indexer recovery queries. */
  client: RequestClient;
  metrics: FrontendMetricSet;
  /** This frontend's discovery instance id (`router_id`). */
  routerId: bigint;
  log: Logger;
  /** `--decision-log` / `--decision-log-sample`: sampled routing decisions as JSON lines. */
  decisionLog?: { sink: (line: string) => void; sampleRate: number } | null;
  /** `--router-min-initial-workers`: a worker set serves once this many workers were ready. */
  minInitialWorkers?: number;
  /** `--enforce-disagg`, `--decode-fallback` (§14). */
  disagg?: DisaggFlags;
  /** Clock in ms (`Date.now` in production). */
  now?: () => number;
  random?: () => number;
  /**
   * `--router-durable-kv-events`: indexes are fed by a JetStream consumer (started by `attach`), not
   * by the event plane, and a worker that leaves is removed from its set's index here.
   */
  durableKvEvents?: boolean;
  /** More wiring per worker set once it is built (durable feed, served index); closed before the set. */
  attach?: ((set: WorkerSet) => { close(): Promise<void> }) | null;
}

/** One (namespace, component, endpoint) of one model: the unit a router routes over. */
export class WorkerSet implements GroupKey {
  readonly host: RouterHost;
  readonly router: KvRouter;
  readonly lifecycle: RequestLifecycleMetrics;
  readonly blockSize: number;
  /** Checksum every card of the set must carry (§6.4); the first card's. */
  readonly mdcsum: string;
  readonly contextLength: number;
  readonly migrationLimit: number;
  /** The card's `model_type`: what the set's workers serve (chat / completions, embedding, images, videos, prefill). */
  readonly modelTypes: readonly ModelType[];
  /** The first card's `display_name` (served and remote indexes are keyed by it, not by `--model-name`). */
  readonly cardName: string;
  private readonly attached: { close(): Promise<void> } | null;

  constructor(
    readonly model: string,
    readonly namespace: string,
    readonly component: string,
    readonly endpoint: string,
    card: ModelDeploymentCard,
    private readonly o: ModelRegistryOptions,
    /** The catalog's workers of this group (routable or not). */
    readonly workers: Map<bigint, CatalogWorker>,
    private readonly catalog: WorkerCatalog<WorkerSet>,
    /** `prefill`: a disaggregated prefill worker set (card type `prefill`, §14). */
    readonly role: 'decode' | 'prefill' = 'decode',
  ) {
    this.mdcsum = card.mdcsum;
    this.contextLength = card.context_length;
    this.migrationLimit = card.migration_limit;
    this.modelTypes = card.model_type;
    this.cardName = card.display_name;
    this.host = new RouterHost({
      plan: o.plan,
      path: { namespace, component, endpoint },
      discovery: o.discovery,
      client: o.client,
      eventPlane: o.eventPlane,
      routerId: o.routerId,
      log: o.log,
      label: `router ${model} (${namespace}/${component})`,
      remote: {
        modelName: card.display_name,
        metrics: o.metrics.routerRequests.forEndpoint({ namespace, component, endpoint }),
      },
      acceptsLoadOf: (id) => this.workers.get(id)?.routed === true,
      routerHooks: (publishLoad) => o.metrics.routerHooks(role, publishLoad),
      ports: {
        decisionLog: o.decisionLog ?? null,
        sessionRpc: (worker, payload) => {
          const w = this.workers.get(worker.worker_id);
          if (!w?.transport)
            return Promise.reject(new KvrError('cannot_connect', `worker ${worker.worker_id} is gone`, 503));
          return o.client.unary(w.transport, 'session_control', payload).then((r) => {
            const err = (r as { error?: unknown } | null)?.error;
            if (typeof err === 'string') throw new KvrError('session_open_failed', err, 503);
            return r;
          });
        },
      },
      ...(role === 'prefill' ? { adjust: prefillRouterOptions } : {}),
      ...(o.durableKvEvents ? { noEventFeed: true } : {}),
      ...(o.now ? { now: o.now } : {}),
      ...(o.random ? { random: o.random } : {}),
    });
    this.router = this.host.routerFor(card);
    this.blockSize = this.router.blockSize;
    this.lifecycle = o.metrics.lifecycle({ namespace, component, endpoint });
    // The model's config gauges describe its decode (or aggregated) workers.
    if (role === 'decode')
      o.metrics.frontend.setModelConfig(model, {
        total_kv_blocks: card.runtime_config.total_kv_blocks,
        max_num_seqs: card.runtime_config.max_num_seqs,
        max_num_batched_tokens: card.runtime_config.max_num_batched_tokens,
        context_length: card.context_length,
        kv_cache_block_size: this.blockSize,
        migration_limit: card.migration_limit,
      });
    this.attached = o.attach?.(this) ?? null;
  }

  /** The router's own index (null with a remote index or none). */
  get indexer(): KvIndexer | null {
    return this.host.index;
  }

  private reachedMin = false;

  /** `--router-min-initial-workers` reached once (§6.5): until then requests get 503. */
  get initialized(): boolean {
    if (!this.reachedMin && this.readyCount >= (this.o.minInitialWorkers ?? 0)) this.reachedMin = true;
    return this.reachedMin;
  }

  /** Whether the set generates text (card type chat or completions): media-only sets take no generate requests. */
  get generates(): boolean {
    return this.modelTypes.includes('chat') || this.modelTypes.includes('completions');
  }

  /** Workers the router can pick. */
  get readyCount(): number {
    let n = 0;
    for (const w of this.workers.values()) if (w.routed) n++;
    return n;
  }

  transportOf(id: bigint): Transport | null {
    return this.workers.get(id)?.transport ?? null;
  }

  /**
   * A worker whose connection failed (a crashed process keeps its discovery keys until its lease
   * expires, 10 s): taken out of routing now, so migration and new requests go elsewhere.
   */
  markDown(id: bigint): void {
    const w = this.workers.get(id);
    if (!w || w.down) return;
    this.o.log.warn(
      `worker ${u64ToHex(w.id)} of ${this.model} is unreachable; not routing to it until it re-registers`,
    );
    this.catalog.markDown(this, id);
  }

  async close(): Promise<void> {
    await this.attached?.close();
    await this.host.close();
  }
}

export class Model {
  readonly sets: WorkerSet[] = [];
  /** Prefill worker sets and the §14 activation state. */
  readonly disagg: DisaggState;
  private rr = 0;
  constructor(
    readonly name: string,
    flags?: DisaggFlags,
  ) {
    this.disagg = new DisaggState(name, flags);
  }

  get ready(): boolean {
    return this.sets.some((s) => s.readyCount > 0);
  }

  /** The worker set for the next request: round robin over sets that have workers. */
  pick(): WorkerSet | null {
    const n = this.sets.length;
    for (let i = 0; i < n; i++) {
      const s = this.sets[(this.rr + i) % n]!;
      if (s.readyCount > 0 && s.generates) {
        this.rr = (this.rr + i + 1) % n;
        return s;
      }
    }
    return null;
  }
}

export class ModelRegistry {
  readonly models = new Map<string, Model>();
  private readonly catalog: WorkerCatalog<WorkerSet>;
  private readonly created = new Map<string, number>();
  private synced!: Promise<void>;

  constructor(private readonly o: ModelRegistryOptions) {
    const log = o.log;
    this.catalog = new WorkerCatalog<WorkerSet>(
      {
        openGroup: (k, card, workers) => this.openSet(k, card, workers),
        closeGroup: (set) => this.dropSet(set),
        onReady: ({ value: set }, w) => {
          set.host.addWorker(w.id, w.card!);
          log.info(`worker ${u64ToHex(w.id)} serves model ${set.model} (${set.namespace}/${set.component})`);
        },
        onGone: ({ value: set }, w) => {
          set.host.removeWorker(w.id);
          // §5.3: in durable mode nothing else tells the index a worker left.
          if (o.durableKvEvents) set.indexer?.removeWorker(w.id);
          o.metrics.workers.removeWorker(w.id);
          log.info(`worker ${u64ToHex(w.id)} left model ${set.model}`);
        },
      },
      {
        // The other instances of a worker are its local indexer's endpoints.
        endpoint: GENERATE_ENDPOINT,
        refuseCard: (card, where) => {
          const types = card.model_type;
          if (types.length > 0) return null;
          return `discovery: model ${card.display_name} of type [${types.join(', ')}] on ${where} is not served (kvrouter serves chat, completions, prefill, embedding, images and videos workers)`;
        },
        warn: (m) => log.warn(m),
        error: (m) => log.error(m),
      },
    );
  }

  /** Starts watching; resolves once both initial listings were applied. */
  start(): Promise<void> {
    const filter = this.o.namespacePrefix
      ? { namespacePrefix: this.o.namespacePrefix }
      : this.o.namespace
        ? { namespace: this.o.namespace }
        : {};
    this.synced = this.catalog.watch(this.o.discovery, filter);
    return this.synced;
  }

  private openSet(k: GroupKey, card: ModelDeploymentCard, workers: Map<bigint, CatalogWorker>): WorkerSet {
    const prefill = card.model_type.includes('prefill');
    const model = this.o.modelName ?? card.display_name;
    const set = new WorkerSet(
      model,
      k.namespace,
      k.component,
      k.endpoint,
      card,
      this.o,
      workers,
      this.catalog,
      prefill ? 'prefill' : 'decode',
    );
    let m = this.models.get(model);
    if (!m) {
      this.models.set(model, (m = new Model(model, this.o.disagg)));
      this.created.set(model, Math.floor((this.o.now ?? Date.now)() / 1000));
    }
    if (prefill) m.disagg.addSet(set);
    else m.sets.push(set);
    return set;
  }

  private async dropSet(set: WorkerSet): Promise<void> {
    const m = this.models.get(set.model);
    if (m) {
      if (set.role === 'prefill') m.disagg.removeSet(set);
      else m.sets.splice(m.sets.indexOf(set), 1);
      if (m.sets.length === 0 && m.disagg.sets.length === 0) this.models.delete(set.model);
    }
    await set.close();
  }

  /** A served model (one with a ready worker), or null. */
  get(name: string): Model | null {
    const m = this.models.get(name);
    return m && m.ready ? m : null;
  }

  /** Models with at least one ready worker, for `/v1/models`. */
  list(): { id: string; created: number }[] {
    const out: { id: string; created: number }[] = [];
    for (const [name, m] of this.models)
      if (m.ready) out.push({ id: name, created: this.created.get(name) ?? 0 });
    return out.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  allSets(): WorkerSet[] {
    return this.catalog.allGroups().map((g) => g.value);
  }

  /** Sums of every index's applied-event counts (`dynamo_component_kv_cache_events_applied`). */
  appliedCounts(): Map<string, number> {
    const out = new Map<string, number>();
    for (const s of this.allSets()) {
      const c = s.indexer?.appliedCounts();
      if (c) for (const [k, v] of c) out.set(k, (out.get(k) ?? 0) + v);
    }
    return out;
  }

  whenSynced(): Promise<void> {
    return this.synced;
  }

  async close(): Promise<void> {
    this.catalog.close();
    await Promise.all(
      this.allSets().map((s) => {
        this.catalog.removeGroup(s);
        return this.dropSet(s);
      }),
    );
  }
}
