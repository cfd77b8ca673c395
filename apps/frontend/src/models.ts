/**
 * Models come and go with workers in discovery (PROTOCOL.md §6.5). Cards (`v1/mdc/...`) and
 * instances (`v1/instances/.../generate/...`) are watched; a worker is routable once both its card
 * and its instance are known. One `WorkerSet` per (namespace, component, endpoint): its own
 * KvRouter with the card's block size, its own index fed by the KV event subscriber, its own
 * `ActiveLoad` subscription. A model is served while one of its worker sets has a worker.
 */
import { GENERATE_ENDPOINT, KvrError, parseDiscoveryKey, u64ToHex, type WorkerId } from '@kvrouter/protocols';
import {
  KvEventSubscriber,
  LoadChannel,
  ReplicaSync,
  discoveryTransportResolver,
  kvEventsTopic,
  requestPlaneQueryClient,
  watchWorkers,
  type EventPlane,
  type MessageSubscription,
} from '@kvrouter/kv-events';
import type { FrontendMetricSet, RequestLifecycleMetrics } from '@kvrouter/metrics';
import { ApproxIndexer, type KvIndexer } from '@kvrouter/radix-indexer';
import { createKvIndexer } from '@kvrouter/radix-indexer/pool';
import { KvRouter, RemoteIndexedKvRouter, type KvRouterOptions, type RouterParams } from '@kvrouter/router';
import {
  effectiveMaxBatchedTokens,
  watchInstances,
  watchModelCards,
  type Discovery,
  type Instance,
  type ModelDeploymentCard,
  type RequestClient,
  type Transport,
  type TypedChange,
  type TypedWatch,
} from '@kvrouter/runtime';
import { createRemoteIndex } from './remote-indexer.js';
import { DisaggState, prefillRouterOptions, type DisaggFlags } from './disagg.js';

export interface Logger {
  info(msg: string): void;
  warn(msg: string): void;
  error(msg: string): void;
}

export interface ModelRegistryOptions {
  discovery: Discovery;
  /** `--namespace` / `--namespace-prefix` (the prefix wins). */
  namespace: string | null;
  namespacePrefix: string | null;
  /** `--model-name`: every model is served under this name. */
  modelName: string | null;
  params: RouterParams;
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
}

interface WorkerEntry {
  id: WorkerId;
  card: ModelDeploymentCard | null;
  transport: Transport | null;
  routed: boolean;
  /** Its stream failed to connect or dropped: not routed again until discovery re-announces it. */
  down: boolean;
}

/** One (namespace, component, endpoint) of one model: the unit a router routes over. */
export class WorkerSet {
  readonly router: KvRouter;
  readonly lifecycle: RequestLifecycleMetrics;
  readonly blockSize: number;
  readonly workers = new Map<bigint, WorkerEntry>();
  /** Checksum every card of the set must carry (§6.4); the first card's. */
  readonly mdcsum: string;
  readonly contextLength: number;
  readonly migrationLimit: number;
  private readonly closers: (() => void | Promise<void>)[] = [];
  readonly indexer: KvIndexer | null;

  constructor(
    readonly model: string,
    readonly namespace: string,
    readonly component: string,
    readonly endpoint: string,
    card: ModelDeploymentCard,
    private readonly o: ModelRegistryOptions,
    /** `prefill`: a disaggregated prefill worker set (card type `prefill`, §14). */
    readonly role: 'decode' | 'prefill' = 'decode',
  ) {
    const p = o.params;
    this.blockSize = p.blockSizeOverride ?? card.kv_cache_block_size;
    this.mdcsum = card.mdcsum;
    this.contextLength = card.context_length;
    this.migrationLimit = card.migration_limit;
    const now = o.now ?? Date.now;
    const kv = p.mode === 'kv';
    const remote =
      kv && p.index.kind === 'remote'
        ? createRemoteIndex({
            discovery: o.discovery,
            client: o.client,
            namespace,
            component,
            modelName: card.display_name,
            approximate: !p.index.kvEvents,
            metrics: o.metrics.routerRequests.forEndpoint({ namespace, component, endpoint }),
            warn: (m) => o.log.warn(m),
          })
        : null;
    if (remote) this.closers.push(() => remote.close());
    this.indexer = remote ? remote.indexer : kv ? buildIndexer(p, now, o) : null;
    const { index: _i, blockSizeOverride: _b, replicaSync, aic: _a, ...opts } = p;
    const plane = o.eventPlane;
    let replica: ReplicaSync | null = null;
    if (kv && replicaSync && plane) replica = new ReplicaSync(plane, namespace, component, o.routerId);
    const loadChannel = plane ? new LoadChannel(plane, namespace) : null;
    const routerOptions: KvRouterOptions = {
      ...opts,
      blockSize: this.blockSize,
      clock: {
        now,
        setTimeout: (f, ms) => setTimeout(f, ms).unref(),
        clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
      },
      random: o.random ?? Math.random,
      indexer: this.indexer,
      routerId: o.routerId,
      hrtime: () => performance.now(),
      decisionLog: o.decisionLog ?? null,
      ...o.metrics.routerHooks(role, replicaSync && loadChannel ? (l) => loadChannel.publish(l) : null),
      ...(replica ? { publishActiveSequenceEvent: (ev) => replica.publish(ev) } : {}),
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
      onError: (e, ctx) =>
        o.log.warn(`router ${model} (${namespace}/${component}): ${ctx}: ${(e as Error).message}`),
    };
    const ro = role === 'prefill' ? prefillRouterOptions(routerOptions) : routerOptions;
    this.router = remote ? new RemoteIndexedKvRouter({ ...ro, remote: remote.indexer }) : new KvRouter(ro);
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
    if (plane) {
      if (this.indexer && p.index.kind === 'events') this.subscribeEvents(plane, this.indexer);
      // Worker-published loads feed the busy monitor in every mode (§11).
      const sub: MessageSubscription = loadChannel!.subscribe((l) => {
        if (this.workers.get(l.worker_id)?.routed) this.router.ingestLoad(l);
      });
      this.closers.push(() => sub.close());
      if (replica) {
        const rs = replica.subscribe((ev) => this.router.applyReplicaEvent(ev));
        this.closers.push(() => rs.close());
      }
    }
  }

  private subscribeEvents(plane: EventPlane, indexer: KvIndexer): void {
    const o = this.o;
    const sub = new KvEventSubscriber({
      index: indexer,
      query: requestPlaneQueryClient(o.client, {
        resolve: discoveryTransportResolver(o.discovery, this.namespace, this.component),
      }),
      onError: (e, ctx) =>
        o.log.warn(`kv events ${this.namespace}/${this.component}: ${ctx}: ${(e as Error).message}`),
    });
    sub.start(() => plane.subscribe(kvEventsTopic(this.namespace, this.component)));
    const watch = watchWorkers({
      discovery: o.discovery,
      namespace: this.namespace,
      component: this.component,
      subscriber: sub,
    });
    this.closers.push(
      () => watch.close(),
      () => sub.close(),
    );
  }

  private reachedMin = false;

  /** `--router-min-initial-workers` reached once (§6.5): until then requests get 503. */
  get initialized(): boolean {
    if (!this.reachedMin && this.readyCount >= (this.o.minInitialWorkers ?? 0)) this.reachedMin = true;
    return this.reachedMin;
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

  /** Adds or removes the worker from the router according to what is known of it. */
  sync(w: WorkerEntry): void {
    const ready = w.card !== null && w.transport !== null && !w.down;
    if (ready && !w.routed) {
      const rc = w.card!.runtime_config;
      this.router.addWorker({
        workerId: w.id,
        dpStart: rc.data_parallel_start_rank,
        dpSize: rc.data_parallel_size,
        totalKvBlocks: rc.total_kv_blocks,
        maxNumBatchedTokens: effectiveMaxBatchedTokens(rc),
        taints: rc.taints,
        topologyDomains: rc.topology_domains,
      });
      w.routed = true;
      this.o.log.info(
        `worker ${u64ToHex(w.id)} serves model ${this.model} (${this.namespace}/${this.component})`,
      );
    } else if (!ready && w.routed) {
      this.router.removeWorker(w.id);
      this.o.metrics.workers.removeWorker(w.id);
      w.routed = false;
      this.o.log.info(`worker ${u64ToHex(w.id)} left model ${this.model}`);
    }
    if (w.card === null && w.transport === null) this.workers.delete(w.id);
  }

  /**
   * A worker whose connection failed (a crashed process keeps its discovery keys until its lease
   * expires, 10 s): taken out of routing now, so migration and new requests go elsewhere.
   */
  markDown(id: bigint): void {
    const w = this.workers.get(id);
    if (!w || w.down) return;
    w.down = true;
    this.o.log.warn(
      `worker ${u64ToHex(w.id)} of ${this.model} is unreachable; not routing to it until it re-registers`,
    );
    this.sync(w);
  }

  async close(): Promise<void> {
    this.router.close();
    for (const c of this.closers) await c();
    await this.indexer?.close();
  }
}

function buildIndexer(p: RouterParams, now: () => number, o: ModelRegistryOptions): KvIndexer | null {
  const plan = p.index;
  switch (plan.kind) {
    case 'none':
      return null;
    case 'events':
      return createKvIndexer({
        threads: plan.eventThreads,
        onError: (e) => o.log.warn(`index: ${e.message}`),
      });
    case 'approximate': {
      const approx = {
        ttlSecs: plan.ttlSecs,
        maxTreeSize: plan.maxTreeSize,
        pruneTargetRatio: plan.pruneTargetRatio,
        now,
      };
      return plan.eventThreads > 1
        ? createKvIndexer({ threads: plan.eventThreads, approximate: approx })
        : new ApproxIndexer(approx);
    }
    case 'remote':
      // Built by the worker set (createRemoteIndex): it needs the set's namespace and component.
      return null;
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
      if (s.readyCount > 0) {
        this.rr = (this.rr + i + 1) % n;
        return s;
      }
    }
    return null;
  }
}

const setKey = (ns: string, comp: string, ep: string): string => `${ns}\u0000${comp}\u0000${ep}`;

export class ModelRegistry {
  readonly models = new Map<string, Model>();
  private readonly sets = new Map<string, WorkerSet>();
  /** Instances seen before their card (and cards before their instance), by set key. */
  private readonly pending = new Map<string, Map<bigint, WorkerEntry>>();
  private cardWatch: TypedWatch<ModelDeploymentCard> | null = null;
  private instWatch: TypedWatch<Instance> | null = null;
  private readonly created = new Map<string, number>();
  private synced!: Promise<void>;
  private closed = false;
  /** A worker set whose router could not be built (bad flags for this model); logged once. */
  private readonly failedSets = new Set<string>();

  constructor(private readonly o: ModelRegistryOptions) {}

  /** Starts watching; resolves once both initial listings were applied. */
  start(): Promise<void> {
    const filter = this.o.namespacePrefix
      ? { namespacePrefix: this.o.namespacePrefix }
      : this.o.namespace
        ? { namespace: this.o.namespace }
        : {};
    this.cardWatch = watchModelCards(this.o.discovery, filter);
    this.instWatch = watchInstances(this.o.discovery, filter);
    const a = this.pump(this.cardWatch, (ch) => this.onCard(ch));
    const b = this.pump(this.instWatch, (ch) => this.onInstance(ch));
    this.synced = Promise.all([a, b]).then(() => undefined);
    return this.synced;
  }

  private pump<T>(w: TypedWatch<T>, apply: (ch: TypedChange<T>) => void): Promise<void> {
    return new Promise<void>((resolve) => {
      void (async () => {
        try {
          for await (const ch of w) {
            if (ch.type === 'synced') {
              resolve();
              continue;
            }
            try {
              apply(ch);
            } catch (e) {
              this.o.log.warn(`discovery: ${(e as Error).message}`);
            }
          }
        } catch (e) {
          if (!this.closed) this.o.log.error(`discovery watch failed: ${(e as Error).message}`);
        } finally {
          resolve();
        }
      })();
    });
  }

  private entry(key: string, id: bigint): WorkerEntry {
    const set = this.sets.get(key);
    if (set) {
      let w = set.workers.get(id);
      if (!w) {
        w = this.pending.get(key)?.get(id) ?? {
          id: id as WorkerId,
          card: null,
          transport: null,
          routed: false,
          down: false,
        };
        this.pending.get(key)?.delete(id);
        set.workers.set(id, w);
      }
      return w;
    }
    let m = this.pending.get(key);
    if (!m) this.pending.set(key, (m = new Map<bigint, WorkerEntry>()));
    let w = m.get(id);
    if (!w) m.set(id, (w = { id: id as WorkerId, card: null, transport: null, routed: false, down: false }));
    return w;
  }

  private onInstance(ch: TypedChange<Instance>): void {
    if (ch.type === 'invalid') {
      this.o.log.warn(`discovery: ignoring instance ${ch.key}: ${ch.error.message}`);
      return;
    }
    if (ch.type === 'synced') return;
    if (ch.type === 'put') {
      const i = ch.value;
      if (i.endpoint !== GENERATE_ENDPOINT) return;
      const key = setKey(i.namespace, i.component, i.endpoint);
      const w = this.entry(key, i.instance_id);
      w.transport = i.transport;
      w.down = false;
      this.sets.get(key)?.sync(w);
      return;
    }
    const p = ch.parts;
    if (p.endpoint !== GENERATE_ENDPOINT) return;
    const key = setKey(p.namespace, p.component, p.endpoint);
    const w = this.entry(key, p.instance_id);
    w.transport = null;
    const set = this.sets.get(key);
    if (set) set.sync(w);
    else if (w.card === null) this.pending.get(key)?.delete(p.instance_id);
  }

  private onCard(ch: TypedChange<ModelDeploymentCard>): void {
    if (ch.type === 'invalid') {
      this.o.log.warn(`discovery: ignoring model card ${ch.key}: ${ch.error.message}`);
      return;
    }
    if (ch.type === 'synced') return;
    if (ch.type === 'delete') {
      const p = ch.parts;
      // LoRA cards (a suffix after the instance id) do not change the base worker.
      if (p.suffix) return;
      const key = setKey(p.namespace, p.component, p.endpoint);
      const w = this.entry(key, p.instance_id);
      w.card = null;
      const set = this.sets.get(key);
      if (set) set.sync(w);
      else if (w.transport === null) this.pending.get(key)?.delete(p.instance_id);
      return;
    }
    const parts = parseDiscoveryKey(ch.key);
    if (!parts || parts.suffix) return;
    const card = ch.value;
    const types = card.model_type;
    const prefill = types.includes('prefill');
    if (!prefill && !types.includes('chat') && !types.includes('completions')) {
      this.o.log.warn(
        `discovery: model ${card.display_name} of type [${types.join(', ')}] on ${ch.key} is not served (kvrouter serves chat, completions and prefill workers)`,
      );
      return;
    }
    const key = setKey(parts.namespace, parts.component, parts.endpoint);
    let set = this.sets.get(key);
    if (set && set.readyCount === 0 && set.mdcsum !== card.mdcsum && set.workers.size === 0) {
      // An idle set whose model changed: start over with the new card.
      void this.dropSet(key);
      set = undefined;
    }
    if (!set) {
      if (this.failedSets.has(key)) return;
      const model = this.o.modelName ?? card.display_name;
      try {
        set = new WorkerSet(
          model,
          parts.namespace,
          parts.component,
          parts.endpoint,
          card,
          this.o,
          prefill ? 'prefill' : 'decode',
        );
      } catch (e) {
        this.failedSets.add(key);
        this.o.log.error(`model ${model}: cannot build its router: ${(e as Error).message}`);
        return;
      }
      this.sets.set(key, set);
      let m = this.models.get(model);
      if (!m) {
        this.models.set(model, (m = new Model(model, this.o.disagg)));
        this.created.set(model, Math.floor((this.o.now ?? Date.now)() / 1000));
      }
      if (prefill) m.disagg.addSet(set);
      else m.sets.push(set);
      const waiting = this.pending.get(key);
      this.pending.delete(key);
      if (waiting) for (const [id, w] of waiting) set.workers.set(id, w);
    } else if (card.mdcsum !== set.mdcsum) {
      this.o.log.warn(
        `discovery: rejecting card of worker ${u64ToHex(parts.instance_id)} for ${set.model}: checksum ${card.mdcsum} differs from the worker set's ${set.mdcsum}`,
      );
      return;
    }
    const w = this.entry(key, parts.instance_id);
    w.card = card;
    set.sync(w);
    for (const x of [...set.workers.values()]) if (x !== w && !x.routed) set.sync(x);
  }

  private async dropSet(key: string): Promise<void> {
    const set = this.sets.get(key);
    if (!set) return;
    this.sets.delete(key);
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
    return [...this.sets.values()];
  }

  /** Sums of every index's applied-event counts (`dynamo_component_kv_cache_events_applied`). */
  appliedCounts(): Map<string, number> {
    const out = new Map<string, number>();
    for (const s of this.sets.values()) {
      const c = s.indexer?.appliedCounts();
      if (c) for (const [k, v] of c) out.set(k, (out.get(k) ?? 0) + v);
    }
    return out;
  }

  whenSynced(): Promise<void> {
    return this.synced;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.cardWatch?.close();
    this.instWatch?.close();
    await Promise.all([...this.sets.keys()].map((k) => this.dropSet(k)));
  }
}
