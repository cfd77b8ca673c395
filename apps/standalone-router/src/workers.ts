/**
 * The workers of the one endpoint this router serves (PROTOCOL.md §6.5, narrowed to one
 * namespace/component/endpoint): a worker is routable once both its card (`v1/mdc/...`) and its
 * instance (`v1/instances/...`) are known, and leaves when either goes. Cards also give the block
 * size (when `--kv-cache-block-size` is not set) and the model names a served index is keyed by.
 */
import { parseDiscoveryKey } from '@kvrouter/protocols';
import {
  watchInstances,
  watchModelCards,
  type Discovery,
  type Instance,
  type ModelDeploymentCard,
  type TypedChange,
  type Transport,
  type TypedWatch,
} from '@kvrouter/runtime';

export interface EndpointPath {
  namespace: string;
  component: string;
  endpoint: string;
}

export interface TrackerHooks {
  onReady(id: bigint, card: ModelDeploymentCard): void;
  onGone(id: bigint): void;
  /** A model name seen for the first time (a card's `display_name`). */
  onModel?(name: string, card: ModelDeploymentCard): void;
  onWarning(message: string): void;
}

interface Entry {
  card: ModelDeploymentCard | null;
  instance: Instance | null;
  ready: boolean;
}

export class WorkerTracker {
  private readonly entries = new Map<bigint, Entry>();
  private readonly models = new Set<string>();
  private readonly watches: TypedWatch<unknown>[] = [];
  private closed = false;
  readonly synced: Promise<void>;

  constructor(
    discovery: Discovery,
    readonly path: EndpointPath,
    private readonly hooks: TrackerHooks,
  ) {
    const scope = { namespace: path.namespace, component: path.component, endpoint: path.endpoint };
    const cards = watchModelCards(discovery, scope);
    const insts = watchInstances(discovery, scope);
    this.watches.push(cards, insts);
    this.synced = Promise.all([
      this.pump(cards, (ch) => this.onCard(ch)),
      this.pump(insts, (ch) => this.onInstance(ch)),
    ]).then(() => undefined);
  }

  get readyCount(): number {
    let n = 0;
    for (const e of this.entries.values()) if (e.ready) n++;
    return n;
  }

  /** Where a routable worker serves (null when it is not routable). */
  transportOf(id: bigint): Transport | null {
    const e = this.entries.get(id);
    return e?.ready ? e.instance!.transport : null;
  }

  get modelNames(): string[] {
    return [...this.models].sort();
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
            if (ch.type === 'invalid') {
              this.hooks.onWarning(`discovery: ignoring ${ch.key}: ${ch.error.message}`);
              continue;
            }
            try {
              apply(ch);
            } catch (e) {
              // One bad record (or a failing hook) must not end the watch.
              this.hooks.onWarning(`discovery: ${ch.key}: ${(e as Error).message}`);
            }
          }
        } catch (e) {
          if (!this.closed) this.hooks.onWarning(`discovery watch failed: ${(e as Error).message}`);
        } finally {
          resolve();
        }
      })();
    });
  }

  private entry(id: bigint): Entry {
    let e = this.entries.get(id);
    if (!e) this.entries.set(id, (e = { card: null, instance: null, ready: false }));
    return e;
  }

  private onCard(ch: TypedChange<ModelDeploymentCard>): void {
    if (ch.type === 'delete') {
      // LoRA cards (a suffix after the instance id) do not change the base worker.
      if (ch.parts.suffix) return;
      this.sync(ch.parts.instance_id, (e) => (e.card = null));
      return;
    }
    if (ch.type !== 'put') return;
    const k = parseDiscoveryKey(ch.key);
    if (!k || k.suffix) return;
    const id = k.instance_id;
    const card = ch.value;
    if (!this.models.has(card.display_name)) {
      this.models.add(card.display_name);
      this.hooks.onModel?.(card.display_name, card);
    }
    this.sync(id, (e) => (e.card = card));
  }

  private onInstance(ch: TypedChange<Instance>): void {
    if (ch.type === 'delete') this.sync(ch.parts.instance_id, (e) => (e.instance = null));
    else if (ch.type === 'put') this.sync(ch.value.instance_id, (e) => (e.instance = ch.value));
  }

  private sync(id: bigint, change: (e: Entry) => void): void {
    const e = this.entry(id);
    change(e);
    const ready = e.card !== null && e.instance !== null;
    if (ready && !e.ready) {
      e.ready = true;
      this.hooks.onReady(id, e.card!);
    } else if (!ready && e.ready) {
      e.ready = false;
      this.hooks.onGone(id);
    }
    if (e.card === null && e.instance === null) this.entries.delete(id);
  }

  close(): void {
    this.closed = true;
    for (const w of this.watches) w.close();
  }
}
