/**
 * Honest health (issue 17) with real etcd and nats-server: a frontend (kv mode, KV events on NATS)
 * and a standalone router process over one mocker worker. Killing etcd, then NATS, turns `/health`
 * to 503 with the reason in the body while `/live` stays 200; restarting each brings `/health`
 * back to 200.
 */
import { startEtcd, startNats, type ServiceHandle } from '@kvrouter/testkit';
import { eventually, startMocker, startRouterProcess, type Proc, type RouterProc } from '@kvrouter/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Frontend } from './frontend.js';
import { startFrontend } from './test-helpers.js';

const NS = 'fehealth';
let etcd: ServiceHandle;
let nats: ServiceHandle;
let mocker: Proc;
let router: RouterProc;
let fe: Frontend;

interface Health {
  status: string;
  reasons: string[];
  checks: Record<string, string>;
}

beforeAll(async () => {
  [etcd, nats] = await Promise.all([startEtcd(), startNats({ jetstream: false })]);
  const infra = { etcd: etcd.url, nats: nats.url };
  mocker = startMocker(infra, NS, 1);
  router = await startRouterProcess(infra, NS);
  fe = await startFrontend(
    [
      ...['--discovery-backend', 'etcd', '--event-plane', 'nats', '--namespace', NS],
      ...['--router-mode', 'kv', '--router-event-threads', '1'],
    ],
    { env: { ETCD_ENDPOINTS: etcd.url, NATS_SERVER: nats.url } },
  );
}, 60_000);

afterAll(async () => {
  await fe?.close(0);
  await router?.kill();
  await mocker?.kill();
  await Promise.all([etcd?.stop(), nats?.stop()]);
});

async function health(url: string): Promise<{ code: number; body: Health }> {
  const r = await fetch(`${url}/health`);
  return { code: r.status, body: (await r.json()) as Health };
}

const urls = () => [
  ['frontend', fe.url],
  ['standalone router', router.systemUrl],
];

/** Both report `status` (and, when unhealthy, a reason matching `reason`). */
async function bothReport(ok: boolean, reason: RegExp | null, what: string): Promise<void> {
  for (const [name, url] of urls()) {
    const h = await eventually(
      async () => {
        const h = await health(url!);
        return (h.code === 200) === ok ? h : null;
      },
      30_000,
      `${name} ${what}`,
    );
    if (ok) {
      expect(h.body).toMatchObject({ status: 'healthy', reasons: [] });
      expect(Object.values(h.body.checks).every((c) => c === 'ok')).toBe(true);
    } else {
      expect(h.code).toBe(503);
      expect(h.body.status).toBe('unhealthy');
      expect(h.body.reasons.some((r) => reason!.test(r))).toBe(true);
    }
    // Live = the process serves, whatever its health.
    const live = await fetch(`${url}/live`);
    expect(live.status).toBe(200);
    expect(((await live.json()) as { status: string }).status).toBe('live');
  }
}

describe('/health follows discovery, workers and the event plane', () => {
  it('turns unhealthy with the reason when etcd, then NATS, is killed, and recovers when each is back', async () => {
    await bothReport(true, null, 'healthy with its worker');
    const ok = await health(fe.url);
    expect(Object.keys(ok.body.checks).sort()).toEqual([
      'discovery',
      'lease',
      'nats',
      'shutting_down',
      'workers',
    ]);

    // etcd: kill -9 (data kept), then the same etcd again.
    etcd.proc.kill('SIGKILL');
    await bothReport(false, /discovery \(etcd\) unreachable/, 'unhealthy without etcd');
    etcd = await startEtcd({ restartOf: etcd });
    await bothReport(true, null, 'healthy again with etcd');

    // NATS carries the KV events kv mode needs.
    await nats.stop();
    await bothReport(false, /NATS \(KV event plane\) not connected/, 'unhealthy without NATS');
    nats = await startNats({ jetstream: false, port: nats.port });
    await bothReport(true, null, 'healthy again with NATS');
  });
});
