/**
 * `/dashboard` on the standalone router's system port (mem discovery, workers as discovery records,
 * approximate index so the router learns from its own decisions): the snapshot lists both workers
 * and the hit rate of the booked decisions; `--dashboard off` leaves the path to the 404.
 */
import { resolveConfig } from '@kvrouter/config';
import { MemDiscoveryHub, registerInstance, registerModelCard } from '@kvrouter/runtime';
import { afterEach, describe, expect, it } from 'vitest';
import { StandaloneRouter } from './service.js';

const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
const PATH = { namespace: 'ns', component: 'backend', endpoint: 'generate' };
const closers: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

async function start(argv: string[]): Promise<StandaloneRouter> {
  const hub = new MemDiscoveryHub();
  for (let i = 0; i < 2; i++) {
    const d = hub.connect();
    closers.push(() => d.close());
    await registerInstance(d, { ...PATH, transport: { tcp: `127.0.0.1:${9 + i}` } });
    await registerModelCard(d, {
      ...PATH,
      card: {
        display_name: 'm',
        kv_cache_block_size: 16,
        context_length: 4096,
        runtime_config: { total_kv_blocks: 1000 },
      },
    });
  }
  const { config } = resolveConfig(
    'router',
    ['--router-mode', 'kv', '--router-event-threads', '1', '--no-router-kv-events', ...argv],
    { DYN_SYSTEM_PORT: '0' },
  );
  const r = await StandaloneRouter.start(config, PATH, { log: quiet, memHub: hub, systemHost: '127.0.0.1' });
  closers.push(() => r.close());
  const end = Date.now() + 5000;
  while (r.workerCount < 2) {
    if (Date.now() > end) throw new Error('workers did not register');
    await new Promise((res) => setTimeout(res, 5));
  }
  return r;
}

describe('standalone router /dashboard', () => {
  it('shows both workers and the predicted hit rate of its decisions', async () => {
    const r = await start([]);
    const prompt = Array.from({ length: 64 }, (_, i) => i + 1);
    // 64 tokens = 4 blocks. First: nothing cached (hit 0). Freed, then the same prompt: the
    // worker that holds it costs 4 (prompt 4 − credit 4, plus 4 new blocks) against 8 elsewhere,
    // so it wins with all 4 blocks cached (hit 1). Mean of the two decisions: 0.5.
    const a = await r.route({ token_ids: prompt });
    r.free({ request_id: a.request_id });
    const b = await r.route({ token_ids: prompt });
    expect(b.worker_id).toBe(a.worker_id);
    const snap = (await (await fetch(`${r.systemUrl}/dashboard/snapshot.json`)).json()) as {
      app: string;
      models: {
        model: string;
        workers: { worker_id: string; cached_blocks: number; active_requests: number }[];
        hit_rate: { predicted: number; reported: number | null };
      }[];
    };
    expect(snap.app).toBe('router');
    expect(snap.models).toHaveLength(1);
    const m = snap.models[0];
    expect(m.model).toBe('m');
    expect(m.workers).toHaveLength(2);
    expect(m.hit_rate.predicted).toBe(0.5);
    expect(m.hit_rate.reported).toBeNull();
    const chosen = m.workers.find((w) => w.worker_id === String(a.worker_id))!;
    expect(chosen.cached_blocks).toBe(4);
    expect(chosen.active_requests).toBe(1);
    const page = await fetch(`${r.systemUrl}/dashboard`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('<title>kvrouter dashboard</title>');
    // The JSON routes still answer.
    expect((await fetch(`${r.systemUrl}/health`)).status).toBe(200);
  });

  it('--dashboard off: not served', async () => {
    const r = await start(['--dashboard', 'off']);
    expect((await fetch(`${r.systemUrl}/dashboard`)).status).toBe(404);
  });
});
