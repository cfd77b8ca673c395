/**
 * Issue 18, worker deaths: etcd + nats-server, two mocker processes of two workers, a frontend (in
 * this process) with the default `--migration-limit 0`. One mocker is killed (SIGKILL: its workers
 * keep their discovery keys for the lease TTL): new requests never fail with `cannot_connect` (an
 * attempt that reached no worker is routed again), each dead worker leaves the candidate set at its
 * first failed connection, and the dead workers' `dynamo_frontend_worker_*` series leave `/metrics`.
 */
import { parseJson } from '@kvrouter/protocols';
import {
  eventually,
  startEtcd,
  startMocker,
  startNats,
  type Proc,
  type ServiceHandle,
} from '@kvrouter/testkit';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Frontend } from './frontend.js';
import { startFrontend } from './test-helpers.js';

const NS = 'feheal';
let etcd: ServiceHandle;
let nats: ServiceHandle;
let a: Proc;
let b: Proc;
let fe: Frontend;
/** Mocker a's two workers (registered while b was not started yet). */
let firstPair = new Set<bigint>();

const ids = (): bigint[] => [...(fe.registry.allSets()[0]?.workers.keys() ?? [])];
const routable = (): bigint[] =>
  [...(fe.registry.allSets()[0]?.workers.values() ?? [])].filter((w) => w.routed).map((w) => w.id);

beforeAll(async () => {
  [etcd, nats] = await Promise.all([startEtcd(), startNats({ jetstream: false })]);
  const infra = { etcd: etcd.url, nats: nats.url };
  fe = await startFrontend(
    ['--discovery-backend', 'etcd', '--event-plane', 'nats', '--namespace', NS, '--router-mode', 'kv'],
    { env: { ETCD_ENDPOINTS: etcd.url, NATS_SERVER: nats.url } },
  );
  a = startMocker(infra, NS, 2);
  await eventually(async () => routable().length === 2, 30_000, 'mocker a registered');
  firstPair = new Set(routable());
  b = startMocker(infra, NS, 2);
  await eventually(async () => routable().length === 4, 30_000, 'mocker b registered');
}, 90_000);

afterAll(async () => {
  await fe?.close(0);
  await Promise.all([a?.kill(), b?.kill()]);
  await Promise.all([etcd?.stop(), nats?.stop()]);
});

async function complete(i: number, maxTokens: number): Promise<{ status: number; body: string }> {
  const r = await fetch(`${fe.url}/v1/completions`, {
    method: 'POST',
    body: JSON.stringify({
      model: 'mock-model',
      prompt: Array.from({ length: 48 }, (_, k) => 100 + ((i * 7 + k) % 900)),
      max_tokens: maxTokens,
      nvext: { extra_fields: ['worker_id'] },
    }),
  });
  return { status: r.status, body: await r.text() };
}

it('a killed worker fails no new request and its series leave /metrics', async () => {
  const before = new Set(ids());
  expect(before.size).toBe(4);
  // Load on every worker, so each has series (and bookings) when its process dies.
  const warm = await Promise.all(Array.from({ length: 12 }, (_, i) => complete(i, 4)));
  expect(warm.map((r) => r.status)).toEqual(Array(12).fill(200));
  const workerOf = (body: string): bigint =>
    BigInt(
      (parseJson(body) as { nvext: { worker_id: { decode_worker_id: bigint } } }).nvext.worker_id
        .decode_worker_id,
    );
  const used = new Set(warm.map((r) => workerOf(r.body)));
  const metrics0 = await (await fetch(`${fe.url}/metrics`)).text();
  for (const id of used) expect(metrics0).toContain(`worker_id="${id}"`);

  // b's ids: the ones that registered after a's pair.
  const bIds = [...before].filter((id) => !firstPair.has(id));
  expect(bIds).toHaveLength(2);
  await b.kill('SIGKILL');

  // New requests right away: b's workers are still in discovery (lease TTL 10 s).
  const results: { status: number; body: string }[] = [];
  for (let i = 0; i < 40; i++) results.push(await complete(100 + i, 2));
  const failed = results.filter((r) => r.status !== 200);
  expect(failed.map((r) => r.body)).toEqual([]);
  for (const r of results) expect(bIds).not.toContain(workerOf(r.body));

  // Out of the candidate set (marked down at the first failed connection, or gone from discovery).
  await eventually(
    async () => routable().every((id) => !bIds.includes(id)),
    15_000,
    'dead workers unroutable',
  );
  expect(routable().sort()).toEqual([...firstPair].sort());
  // And their series are gone from /metrics, while a live worker's stay.
  await eventually(
    async () => {
      const text = await (await fetch(`${fe.url}/metrics`)).text();
      return bIds.every((id) => !text.includes(`worker_id="${id}"`)) ? text : null;
    },
    15_000,
    'dead workers series removed',
  );
}, 60_000);
