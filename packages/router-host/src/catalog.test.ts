import { MemDiscoveryHub, buildModelCard, registerInstance, registerModelCard } from '@kvrouter/runtime';
import type { Instance, ModelDeploymentCard } from '@kvrouter/runtime';
import { describe, expect, it } from 'vitest';
import { WorkerCatalog, type CatalogHooks, type CatalogOptions } from './catalog.js';

const G = { namespace: 'ns', component: 'backend', endpoint: 'generate' };
const card = (name = 'm', blockSize = 16): ModelDeploymentCard =>
  buildModelCard({
    display_name: name,
    kv_cache_block_size: blockSize,
    context_length: 4096,
    runtime_config: { total_kv_blocks: 100 },
  });
const inst = (id: bigint, endpoint = 'generate', port = Number(id)): Instance => ({
  ...G,
  endpoint,
  instance_id: id,
  transport: { tcp: `127.0.0.1:${port}` },
});
const at = (id: bigint) => ({ ...G, instance_id: id });

/** A catalog whose hooks write what happened into `log` as short lines. */
function recorder(o: Partial<CatalogOptions> = {}, openFails = false) {
  const log: string[] = [];
  let opened = 0;
  const hooks: CatalogHooks<string> = {
    openGroup: (k, c) => {
      if (openFails) throw new Error('bad flags');
      opened++;
      log.push(`open ${k.component} ${c.display_name}`);
      return `set${opened}`;
    },
    closeGroup: (v) => void log.push(`close ${v}`),
    onReady: (g, w) => void log.push(`ready ${g.value} ${w.id}`),
    onGone: (g, w) => void log.push(`gone ${g.value} ${w.id}`),
    onModel: (name) => void log.push(`model ${name}`),
  };
  const cat = new WorkerCatalog<string>(hooks, { warn: (m) => void log.push(`warn ${m}`), ...o });
  return { cat, log };
}

describe('WorkerCatalog', () => {
  it('a worker is routable once both its card and its instance are known, in either order', () => {
    const { cat, log } = recorder();
    cat.putInstance(inst(1n)); // no card yet: no group, nothing routable
    expect(log).toEqual([]);
    cat.putCard(at(1n), card());
    cat.putCard(at(2n), card()); // same model: same group, card before instance
    cat.putInstance(inst(2n));
    expect(log).toEqual(['model m', 'open backend m', 'ready set1 1', 'ready set1 2']);
    expect(cat.readyCount).toBe(2);
    expect(cat.transportOf(2n)).toEqual({ tcp: '127.0.0.1:2' });
  });

  it('leaves when either record goes; forgets a worker with neither', () => {
    const { cat, log } = recorder();
    for (const id of [1n, 2n]) {
      cat.putCard(at(id), card());
      cat.putInstance(inst(id));
    }
    log.length = 0;
    cat.deleteInstance(at(1n) as never);
    expect(log).toEqual(['gone set1 1']);
    expect(cat.transportOf(1n)).toBeNull();
    expect(cat.group(G)!.workers.has(1n)).toBe(true); // its card is still there
    cat.deleteCard(at(1n));
    expect(cat.group(G)!.workers.has(1n)).toBe(false);
    cat.deleteCard(at(2n));
    expect(log).toEqual(['gone set1 1', 'gone set1 2']);
    expect(cat.readyCount).toBe(0);
  });

  it('a card update keeps the worker routable; a new instance record updates its transport', () => {
    const { cat, log } = recorder();
    cat.putCard(at(1n), card());
    cat.putInstance(inst(1n, 'generate', 7000));
    cat.putCard(at(1n), card());
    cat.putInstance(inst(1n, 'generate', 7001));
    expect(log).toEqual(['model m', 'open backend m', 'ready set1 1']);
    expect(cat.transportOf(1n)).toEqual({ tcp: '127.0.0.1:7001' });
  });

  it('markDown takes a worker out until its instance is announced again', () => {
    const { cat, log } = recorder();
    cat.putCard(at(1n), card());
    cat.putInstance(inst(1n));
    expect(cat.markDown(G, 1n)?.down).toBe(true);
    expect(cat.markDown(G, 1n)).toBeNull(); // already down
    cat.putInstance(inst(1n));
    expect(log.slice(2)).toEqual(['ready set1 1', 'gone set1 1', 'ready set1 1']);
  });

  it('rejects a card whose checksum differs from the group’s while it has workers; reopens an idle group', () => {
    const { cat, log } = recorder();
    cat.putCard(at(1n), card('m', 16));
    cat.putInstance(inst(1n));
    const other = card('m', 32); // another block size: another checksum
    expect(other.mdcsum).not.toBe(card('m', 16).mdcsum);
    expect(cat.putCard(at(2n), other)).toBe(false);
    expect(log.at(-1)).toMatch(/^warn discovery: rejecting card of worker 2 for m: checksum /);
    // Everything leaves; the next card with the new checksum starts the group over.
    cat.deleteCard(at(1n));
    cat.deleteInstance(at(1n) as never);
    log.length = 0;
    expect(cat.putCard(at(3n), other)).toBe(true);
    expect(log).toEqual(['close set1', 'open backend m']);
    expect(cat.group(G)!.value).toBe('set2');
  });

  it('with checksums off, any card of the group is accepted', () => {
    const { cat, log } = recorder({ checksums: false });
    cat.putCard(at(1n), card('m', 16));
    cat.putCard(at(2n), card('m', 32));
    cat.putInstance(inst(2n));
    expect(log).toEqual(['model m', 'open backend m', 'ready set1 2']);
  });

  it('a group whose router cannot be built is refused for good and logged once', () => {
    const errors: string[] = [];
    const { cat, log } = recorder({ error: (m) => void errors.push(m) }, true);
    expect(cat.putCard(at(1n), card())).toBe(false);
    expect(cat.putCard(at(2n), card())).toBe(false);
    expect(errors).toEqual(['model m: cannot build its router: bad flags']);
    expect(log).toEqual(['model m']);
    expect(cat.allGroups()).toEqual([]);
  });

  it('refuseCard and the endpoint filter keep records out', () => {
    const { cat, log } = recorder({
      endpoint: 'generate',
      refuseCard: (c, where) => (c.display_name === 'emb' ? `not served: ${where}` : null),
    });
    expect(cat.putCard(at(10n), card('emb'))).toBe(false);
    expect(log).toEqual(['warn not served: ns/backend/generate/a']);
    cat.putCard(at(1n), card());
    cat.putInstance(inst(1n, 'kv_indexer_query')); // a local-indexer endpoint of the worker
    expect(cat.readyCount).toBe(0);
    cat.putInstance(inst(1n));
    expect(cat.readyCount).toBe(1);
  });

  it('watch(): fed from discovery, resolves after the initial listings', async () => {
    const hub = new MemDiscoveryHub();
    const worker = hub.connect();
    await registerInstance(worker, { ...G, transport: { tcp: '127.0.0.1:9' } });
    await registerModelCard(worker, {
      ...G,
      card: {
        display_name: 'm',
        kv_cache_block_size: 16,
        context_length: 4096,
        runtime_config: { total_kv_blocks: 100 },
      },
    });
    const router = hub.connect();
    const { cat, log } = recorder();
    await cat.watch(router, { namespace: 'ns' });
    expect(cat.readyCount).toBe(1);
    expect(cat.modelNames).toEqual(['m']);
    expect(log).toEqual(['model m', 'open backend m', `ready set1 ${worker.leaseId}`]);
    await worker.close(); // its lease goes: both records are deleted
    await new Promise<void>((resolve) => {
      const t = setInterval(() => {
        if (cat.readyCount === 0) {
          clearInterval(t);
          resolve();
        }
      }, 5);
    });
    expect(log.at(-1)).toBe(`gone set1 ${worker.leaseId}`);
    cat.close();
    await router.close();
  });
});
