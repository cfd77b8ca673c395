/**
 * LoRA adapters as routable models. A worker serving an adapter registers a second card under
 * its instance key with a suffix (`v1/mdc/{ns}/{component}/{endpoint}/{id}/{suffix}`, PROTOCOL §6.1)
 * whose `display_name` is the adapter's model name and `lora.name` the adapter. A request for that
 * model is served by the base model's worker set, restricted to the workers that registered the
 * adapter, with block hashes seeded by the adapter's name (§2.1) and `lora_name` in the payload.
 */
import { parseDiscoveryKey } from '@kvrouter/protocols';
import {
  watchModelCards,
  type Discovery,
  type ModelDeploymentCard,
  type TypedWatch,
} from '@kvrouter/runtime';

interface Entry {
  model: string;
  lora: string;
  namespace: string;
  component: string;
  endpoint: string;
  instance: bigint;
}

/** What the catalog needs of the model registry: the served worker sets. */
export interface BaseSets {
  allSets(): readonly {
    model: string;
    namespace: string;
    component: string;
    endpoint: string;
    role?: string;
    workers: ReadonlyMap<bigint, unknown>;
  }[];
}

export interface LoraRoute {
  /** The base model's served name (its worker set). */
  baseModel: string;
  lora: string;
  /** Workers that registered the adapter. */
  workerIds: bigint[];
}

export class LoraCatalog {
  private readonly entries = new Map<string, Entry>();
  private readonly created = new Map<string, number>();
  private watch: TypedWatch<ModelDeploymentCard> | null = null;

  constructor(
    discovery: Discovery,
    private readonly warn: (m: string) => void = () => undefined,
    private readonly now: () => number = Date.now,
  ) {
    this.watch = watchModelCards(discovery);
    void this.pump(this.watch);
  }

  private async pump(w: TypedWatch<ModelDeploymentCard>): Promise<void> {
    try {
      for await (const ch of w) {
        if (ch.type === 'put') {
          const p = parseDiscoveryKey(ch.key);
          if (!p?.suffix) continue;
          const lora = (ch.value.lora as { name?: unknown } | null)?.name;
          this.entries.set(ch.key, {
            model: ch.value.display_name,
            lora: typeof lora === 'string' && lora.length > 0 ? lora : p.suffix,
            namespace: p.namespace,
            component: p.component,
            endpoint: p.endpoint,
            instance: p.instance_id,
          });
          if (!this.created.has(ch.value.display_name))
            this.created.set(ch.value.display_name, Math.floor(this.now() / 1000));
        } else if (ch.type === 'delete') this.entries.delete(ch.key);
      }
    } catch (e) {
      this.warn(`LoRA card watch ended: ${e instanceof Error ? e.message : String(e)}`);
    }
  }

  /** The route of a LoRA model whose base worker set serves at least one of its workers, or null. */
  resolve(model: string, sets: BaseSets): LoraRoute | null {
    const es = [...this.entries.values()].filter((e) => e.model === model);
    if (es.length === 0) return null;
    for (const s of sets.allSets()) {
      if (s.role === 'prefill') continue;
      const mine = es.filter(
        (e) =>
          e.namespace === s.namespace &&
          e.component === s.component &&
          e.endpoint === s.endpoint &&
          s.workers.has(e.instance),
      );
      if (mine.length > 0)
        return { baseModel: s.model, lora: mine[0]!.lora, workerIds: mine.map((e) => e.instance) };
    }
    return null;
  }

  /** LoRA models with a serving base set, for `/v1/models`. */
  list(sets: BaseSets): { id: string; created: number }[] {
    const names = new Set([...this.entries.values()].map((e) => e.model));
    return [...names]
      .filter((n) => this.resolve(n, sets) !== null)
      .sort()
      .map((id) => ({ id, created: this.created.get(id) ?? 0 }));
  }

  close(): void {
    this.watch?.close();
    this.watch = null;
  }
}
