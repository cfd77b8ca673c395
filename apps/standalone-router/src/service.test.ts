/**
 * The standalone router in this process on mem discovery (workers are plain discovery records
 * here; the etcd + NATS end-to-end test with real workers is e2e.test.ts): worker set tracking,
 * the approximate served index and its §7.7 rules, and startup refusals.
 */
import { spawnSync } from 'node:child_process';
import { resolveConfig } from '@kvrouter/config';
import type { WorkerId } from '@kvrouter/protocols';
import { MemDiscoveryHub, registerInstance, registerModelCard, type Discovery } from '@kvrouter/runtime';
import { afterEach, describe, expect, it } from 'vitest';
import { StandaloneRouter } from './service.js';
import { REPO } from './test-procs.js';

const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
const PATH = { namespace: 'ns', component: 'backend', endpoint: 'generate' };
const closers: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

async function router(hub: MemDiscoveryHub, argv: string[]): Promise<StandaloneRouter> {
  const { config } = resolveConfig('router', ['--router-mode', 'kv', '--router-event-threads', '1', ...argv], {});
  const r = await StandaloneRouter.start(config, PATH, { log: quiet, memHub: hub });
  closers.push(() => r.close());
  return r;
}

/** A worker as discovery shows it: generate instance + card (block size 16). */
async function worker(hub: MemDiscoveryHub): Promise<Discovery> {
  const d = hub.connect();
  closers.push(() => d.close());
  await registerInstance(d, { ...PATH, transport: { tcp: '127.0.0.1:9' } });
  await registerModelCard(d, { ...PATH, card: { display_name: 'm', kv_cache_block_size: 16, context_length: 4096, runtime_config: { total_kv_blocks: 1000 } } });
  return d;
}

async function until(cond: () => boolean): Promise<void> {
  const end = Date.now() + 5000;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('StandaloneRouter (mem discovery)', () => {
  it('routes once a worker has both instance and card, and drops it when it leaves', async () => {
    const hub = new MemDiscoveryHub();
    const r = await router(hub, ['--no-router-kv-events']);
    await expect(r.route({ token_ids: [1, 2, 3] })).rejects.toMatchObject({ code: 'no_eligible_workers', status: 503 });
    const w = await worker(hub);
    await until(() => r.workerCount === 1);
    expect(r.router!.blockSize).toBe(16);
    const d = await r.route({ request_id: 'a', token_ids: Array.from({ length: 40 }, (_, i) => i) });
    // 40 tokens, block size 16: ceil(40 / 16) = 3 required blocks, nothing cached yet.
    expect(d).toEqual({ request_id: 'a', worker_id: w.leaseId, dp_rank: 0, overlap_blocks: 0, cached_tokens: 0, required_blocks: 3, booked: true });
    expect(r.router!.rankLoad({ worker_id: w.leaseId as WorkerId, dp_rank: 0 }).active_requests).toBe(1);
    expect(r.markPrefillCompleted({ request_id: 'a' })).toEqual({ request_id: 'a', found: true });
    expect(r.free({ request_id: 'a' })).toEqual({ request_id: 'a', found: true });
    expect(r.router!.rankLoad({ worker_id: w.leaseId as WorkerId, dp_rank: 0 }).active_requests).toBe(0);
    // Approximate mode recorded the decision: the same prompt now overlaps floor(40 / 16) = 2 blocks.
    expect((await r.route({ token_ids: Array.from({ length: 40 }, (_, i) => i), query_only: true })).overlap_blocks).toBe(2);
    await w.close();
    await until(() => r.workerCount === 0);
    await expect(r.route({ token_ids: [1] })).rejects.toMatchObject({ status: 503 });
  });

  it('--serve-indexer in approximate mode serves query and record, and must be the only serving instance', async () => {
    const hub = new MemDiscoveryHub();
    const r = await router(hub, ['--no-router-kv-events', '--serve-indexer']);
    const obs = hub.connect();
    closers.push(() => obs.close());
    const eps = async (ep: string) => (await obs.list(`v1/instances/ns/backend/${ep}/`)).length;
    expect([await eps('kv_indexer_query'), await eps('kv_indexer_record_routing_decision'), await eps('router-discovery')]).toEqual([1, 1, 1]);
    await worker(hub);
    await until(() => r.modelNames.length === 1);

    await expect(router(hub, ['--no-router-kv-events', '--serve-indexer'])).rejects.toThrow(/only serving instance/);
    await expect(router(hub, ['--serve-indexer'])).rejects.toThrow(/cannot be mixed/);
    // Both refused before registering anything (and their leases are gone).
    expect(await eps('kv_indexer_query')).toBe(1);
    expect(await eps('router-discovery')).toBe(1);
  });

  it('refuses --use-remote-indexer (a standalone router keeps its own index)', async () => {
    const { config } = resolveConfig('router', ['--router-mode', 'kv', '--use-remote-indexer'], {});
    await expect(StandaloneRouter.start(config, PATH, { log: quiet, memHub: new MemDiscoveryHub() })).rejects.toMatchObject({ code: 'not_supported' });
  });

  it('CLI: --endpoint is required; FLAGS.md validation messages exit 2', () => {
    const run = (args: string[]) =>
      spawnSync(process.execPath, ['--conditions=source', '--import', 'tsx', 'apps/standalone-router/src/main.ts', ...args], { cwd: REPO, encoding: 'utf8', timeout: 30_000 });
    const a = run(['--router-mode', 'kv']);
    expect([a.status, a.stderr.trim()]).toEqual([2, 'error: the following arguments are required: --endpoint']);
    const b = run(['--endpoint', 'dyn://ns.backend.generate', '--router-mode', 'kv', '--serve-indexer', '--use-remote-indexer']);
    expect([b.status, b.stderr.trim()]).toEqual([2, 'error: --serve-indexer and --use-remote-indexer are mutually exclusive']);
  }, 60_000);
});
