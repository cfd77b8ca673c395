/**
 * `WorkerCatalog`: model cards + instances -> routable workers (docs/protocol.md §6.5). Cards
 * (`v1/mdc/...`) and instances (`v1/instances/...`) arrive in any order; a worker is routable once
 * both are known (and it was not marked down), and stops being routable when either goes. Workers
 * are grouped by (namespace, component, endpoint): a group opens on its first accepted card (the
 * app builds its router there) and every later card must carry the same checksum (§6.4).
 *
 * The state machine (`putCard`, `deleteCard`, `putInstance`, `deleteInstance`, `markDown`) is
 * synchronous and does no I/O; `watch()` feeds it from discovery.
 */
import { parseDiscoveryKey, type WorkerId } from '@kvrouter/protocols';
import {
  watchInstances,
  watchModelCards,
  type Discovery,
  type Instance,
  type ModelDeploymentCard,
  type Transport,
  type TypedChange,
  type TypedWatch,
  type WatchScope,
} from '@kvrouter/runtime';

export interface CatalogWorker {
  readonly id: WorkerId;
  card: ModelDeploymentCard | null;
  transport: Transport | null;
  /** Currently handed to the router (`onReady` ran, `onGone` did not since). */
  routed: boolean;
  /** Its stream failed to connect or dropped: not routed again until discovery re-announces it. */
  down: boolean;
}

export interface GroupKey {
  namespace: string;
  component: string;
  endpoint: string;
}

export interface CatalogGroup<G> extends GroupKey {
  /** The card that opened the group (its checksum is the group's). */
  readonly card: ModelDeploymentCard;
  /** Workers seen in this group, routable or not (the same map the app's group object may hold). */
  readonly workers: Map<bigint, CatalogWorker>;
  /** What `openGroup` returned. */
  readonly value: G;
}

export interface CatalogHooks<G> {
  /** A group's first accepted card: build the app's object (its router). Throwing refuses the group for good (logged once). */
  openGroup(key: GroupKey, card: ModelDeploymentCard, workers: Map<bigint, CatalogWorker>): G;
  /** An idle group replaced because its model changed (new checksum with no workers left). */
  closeGroup?(value: G): void | Promise<void>;
  onReady(group: CatalogGroup<G>, w: CatalogWorker): void;
  onGone(group: CatalogGroup<G>, w: CatalogWorker): void;
  /** A model name (`display_name`) seen for the first time. */
  onModel?(name: string, card: ModelDeploymentCard): void;
}

export interface CatalogOptions {
  /** Only instances of this endpoint count (e.g. `generate`; the others are the local indexer's). Default: all. */
  endpoint?: string;
  /** Why a card is not served (null: it is), e.g. a model type the app does not serve; `where` is `ns/comp/ep/id`. */
  refuseCard?(card: ModelDeploymentCard, where: string): string | null;
  /** Reject cards whose `mdcsum` differs from the group's (§6.4). Default true. */
  checksums?: boolean;
  warn(msg: string): void;
  error?(msg: string): void;
}

const keyOf = (k: GroupKey): string => `${k.namespace}\u0000${k.component}\u0000${k.endpoint}`;
const newWorker = (id: bigint): CatalogWorker => ({
  id: id as WorkerId,
  card: null,
  transport: null,
  routed: false,
  down: false,
});

interface InstanceParts extends GroupKey {
  instance_id: bigint;
}

export class WorkerCatalog<G> {
  private readonly groups = new Map<string, CatalogGroup<G>>();
  /** Workers of groups that have no card yet, by group key. */
  private readonly pending = new Map<string, Map<bigint, CatalogWorker>>();
  /** Groups whose `openGroup` threw. */
  private readonly refused = new Set<string>();
  private readonly models = new Set<string>();
  private readonly watches: TypedWatch<unknown>[] = [];
  private closed = false;

  constructor(
    private readonly hooks: CatalogHooks<G>,
    private readonly o: CatalogOptions,
  ) {}

  /** Open groups, in the order they opened. */
  allGroups(): CatalogGroup<G>[] {
    return [...this.groups.values()];
  }

  group(k: GroupKey): CatalogGroup<G> | null {
    return this.groups.get(keyOf(k)) ?? null;
  }

  /** Model names seen on cards, sorted. */
  get modelNames(): string[] {
    return [...this.models].sort();
  }

  /** Routable workers over every group. */
  get readyCount(): number {
    let n = 0;
    for (const g of this.groups.values()) for (const w of g.workers.values()) if (w.routed) n++;
    return n;
  }

  /** Where a routable worker serves (null when it is not routable). */
  transportOf(id: bigint): Transport | null {
    for (const g of this.groups.values()) {
      const w = g.workers.get(id);
      if (w?.routed) return w.transport;
    }
    return null;
  }

  private worker(key: string, id: bigint): CatalogWorker {
    const g = this.groups.get(key);
    let m = g?.workers;
    if (!m) {
      m = this.pending.get(key);
      if (!m) this.pending.set(key, (m = new Map<bigint, CatalogWorker>()));
    }
    let w = m.get(id);
    if (!w) m.set(id, (w = newWorker(id)));
    return w;
  }

  /** Hands the worker to the router or takes it away according to what is known of it. */
  private sync(key: string, w: CatalogWorker): void {
    const g = this.groups.get(key);
    if (g) {
      const ready = w.card !== null && w.transport !== null && !w.down;
      if (ready && !w.routed) {
        w.routed = true;
        this.hooks.onReady(g, w);
      } else if (!ready && w.routed) {
        w.routed = false;
        this.hooks.onGone(g, w);
      }
    }
    if (w.card === null && w.transport === null) (g?.workers ?? this.pending.get(key))?.delete(w.id);
  }

  putInstance(i: Instance): void {
    if (this.o.endpoint !== undefined && i.endpoint !== this.o.endpoint) return;
    const key = keyOf(i);
    const w = this.worker(key, i.instance_id);
    w.transport = i.transport;
    w.down = false;
    this.sync(key, w);
  }

  deleteInstance(p: InstanceParts): void {
    if (this.o.endpoint !== undefined && p.endpoint !== this.o.endpoint) return;
    const key = keyOf(p);
    const w = this.worker(key, p.instance_id);
    w.transport = null;
    this.sync(key, w);
  }

  /** A card put under `v1/mdc/{ns}/{comp}/{ep}/{id}`; false when it was not accepted. */
  putCard(p: InstanceParts, card: ModelDeploymentCard): boolean {
    const key = keyOf(p);
    const refusal =
      this.o.refuseCard?.(
        card,
        `${p.namespace}/${p.component}/${p.endpoint}/${p.instance_id.toString(16)}`,
      ) ?? null;
    if (refusal !== null) {
      this.o.warn(refusal);
      return false;
    }
    if (!this.models.has(card.display_name)) {
      this.models.add(card.display_name);
      this.hooks.onModel?.(card.display_name, card);
    }
    const checksums = this.o.checksums ?? true;
    let g = this.groups.get(key);
    if (g && checksums && g.workers.size === 0 && g.card.mdcsum !== card.mdcsum) {
      // An idle group whose model changed: start over with the new card.
      this.groups.delete(key);
      void this.hooks.closeGroup?.(g.value);
      g = undefined;
    }
    if (!g) {
      if (this.refused.has(key)) return false;
      const workers = this.pending.get(key) ?? new Map<bigint, CatalogWorker>();
      let value: G;
      try {
        value = this.hooks.openGroup(p, card, workers);
      } catch (e) {
        this.refused.add(key);
        (this.o.error ?? this.o.warn)(
          `model ${card.display_name}: cannot build its router: ${(e as Error).message}`,
        );
        return false;
      }
      this.pending.delete(key);
      g = { namespace: p.namespace, component: p.component, endpoint: p.endpoint, card, workers, value };
      this.groups.set(key, g);
      // Workers whose instance came first become routable with their card below or when it comes.
    } else if (checksums && card.mdcsum !== g.card.mdcsum) {
      this.o.warn(
        `discovery: rejecting card of worker ${p.instance_id.toString(16)} for ${g.card.display_name}: checksum ${card.mdcsum} differs from the worker set's ${g.card.mdcsum}`,
      );
      return false;
    }
    const w = this.worker(key, p.instance_id);
    w.card = card;
    this.sync(key, w);
    return true;
  }

  deleteCard(p: InstanceParts): void {
    const key = keyOf(p);
    const w = this.worker(key, p.instance_id);
    w.card = null;
    this.sync(key, w);
  }

  /** A worker whose connection failed: out of routing until its instance is announced again. */
  markDown(k: GroupKey, id: bigint): CatalogWorker | null {
    const key = keyOf(k);
    const w = this.groups.get(key)?.workers.get(id);
    if (!w || w.down) return null;
    w.down = true;
    this.sync(key, w);
    return w;
  }

  /** Drops a group (its workers are forgotten without `onGone`); the caller closes its value. */
  removeGroup(k: GroupKey): CatalogGroup<G> | null {
    const key = keyOf(k);
    const g = this.groups.get(key) ?? null;
    this.groups.delete(key);
    return g;
  }

  /**
   * Feeds the catalog from discovery. Resolves once both initial listings were applied. A bad
   * record or a failing hook is a warning, never the end of the watch.
   */
  watch(discovery: Discovery, scope: WatchScope = {}): Promise<void> {
    const cards = watchModelCards(discovery, scope);
    const insts = watchInstances(discovery, scope);
    this.watches.push(cards, insts);
    return Promise.all([
      this.pump(cards, 'model card', (ch) => this.onCard(ch)),
      this.pump(insts, 'instance', (ch) => this.onInstance(ch)),
    ]).then(() => undefined);
  }

  private onCard(ch: TypedChange<ModelDeploymentCard>): void {
    if (ch.type === 'delete') {
      // LoRA cards (a suffix after the instance id) do not change the base worker.
      if (!ch.parts.suffix) this.deleteCard(ch.parts);
    } else if (ch.type === 'put') {
      const k = parseDiscoveryKey(ch.key);
      if (k && !k.suffix) this.putCard(k, ch.value);
    }
  }

  private onInstance(ch: TypedChange<Instance>): void {
    if (ch.type === 'delete') this.deleteInstance(ch.parts);
    else if (ch.type === 'put') this.putInstance(ch.value);
  }

  private pump<T>(w: TypedWatch<T>, what: string, apply: (ch: TypedChange<T>) => void): Promise<void> {
    return new Promise<void>((resolve) => {
      void (async () => {
        try {
          for await (const ch of w) {
            if (ch.type === 'synced') {
              resolve();
              continue;
            }
            if (ch.type === 'invalid') {
              this.o.warn(`discovery: ignoring ${what} ${ch.key}: ${ch.error.message}`);
              continue;
            }
            try {
              apply(ch);
            } catch (e) {
              this.o.warn(`discovery: ${ch.key}: ${(e as Error).message}`);
            }
          }
        } catch (e) {
          if (!this.closed) (this.o.error ?? this.o.warn)(`discovery watch failed: ${(e as Error).message}`);
        } finally {
          resolve();
        }
      })();
    });
  }

  /** Stops watching (groups stay; their owners close them). */
  close(): void {
    this.closed = true;
    for (const w of this.watches) w.close();
  }
}
