/**
 * `--use-remote-indexer` end to end (docs/protocol.md §7.7): etcd + nats-server, a mocker process with
 * two workers, a standalone router process with `--serve-indexer`, and a frontend (in this
 * process) that keeps no index: its overlaps come from the served index. Killing the standalone
 * router makes the frontend route on load alone and count the failures.
 */
import { FrontendMetricSet } from '@kvrouter/metrics';
import { computeLocalBlockHashes, computeSequenceHashes, parseJson } from '@kvrouter/protocols';
import { InprocHub, InprocRequestClient, MemDiscoveryHub } from '@kvrouter/runtime';
import { startEtcd, startNats, type ServiceHandle } from '@kvrouter/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Frontend } from './frontend.js';
import { RemoteIndexer } from '@kvrouter/router';
import { createRemoteIndex } from './remote-indexer.js';
import { startFrontend } from './test-helpers.js';
import { eventually, startMocker, startRouterProcess, type Proc, type RouterProc } from '@kvrouter/testkit';

const NS = 'feremote';
let etcd: ServiceHandle;
let nats: ServiceHandle;
let mocker: Proc;
let sr: RouterProc;
let fe: Frontend;

beforeAll(async () => {
  [etcd, nats] = await Promise.all([startEtcd(), startNats({ jetstream: false })]);
  const infra = { etcd: etcd.url, nats: nats.url };
  mocker = startMocker(infra, NS, 2);
  sr = await startRouterProcess(infra, NS, ['--serve-indexer']);
  fe = await startFrontend(
    [
      '--discovery-backend',
      'etcd',
      '--event-plane',
      'nats',
      '--namespace',
      NS,
      '--router-mode',
      'kv',
      '--use-remote-indexer',
      '--router-event-threads',
      '1',
    ],
    { env: { ETCD_ENDPOINTS: etcd.url, NATS_SERVER: nats.url } },
  );
}, 120_000);

afterAll(async () => {
  await fe?.close(0);
  await sr?.kill();
  await mocker?.kill();
  await Promise.all([etcd?.stop(), nats?.stop()]);
});

/** 64 token ids = 4 full blocks of the mocker's 16. */
const PROMPT = Array.from({ length: 64 }, (_, i) => 5000 + 3 * i);

async function complete(prompt: number[]): Promise<{ status: number; worker: bigint | null }> {
  const r = await fetch(`${fe.url}/v1/completions`, {
    method: 'POST',
    body: JSON.stringify({
      model: 'mock-model',
      prompt,
      max_tokens: 2,
      nvext: { extra_fields: ['worker_id'] },
    }),
  });
  // Lossless: instance ids exceed 2^53.
  const body = parseJson(await r.text()) as { nvext?: { worker_id?: { decode_worker_id: bigint | number } } };
  const id = body.nvext?.worker_id?.decode_worker_id;
  return { status: r.status, worker: id === undefined ? null : BigInt(id) };
}

const failuresOf = (metrics: string): number => {
  const m = new RegExp(
    `dynamo_component_router_remote_indexer_query_failures_total\\{dynamo_namespace="${NS}",dynamo_component="backend",dynamo_endpoint="generate"\\} (\\d+)`,
  ).exec(metrics);
  return m ? Number(m[1]) : -1;
};

describe('frontend with --use-remote-indexer and a standalone router serving its index', () => {
  it('routes with the remote overlap, then degrades to load-only routing when the router goes', async () => {
    const set = await eventually(
      async () => {
        const s = fe.registry.allSets()[0];
        return s && s.readyCount === 2 ? s : null;
      },
      30_000,
      'the frontend sees both workers',
    );
    expect(set.indexer).toBeInstanceOf(RemoteIndexer);
    await eventually(
      async () => {
        const h = (await (await fetch(`${sr.systemUrl}/health`)).json()) as { workers: number };
        return h.workers === 2;
      },
      30_000,
      'the standalone router sees both workers',
    );
    const remote = set.indexer as RemoteIndexer;

    const first = await complete(PROMPT);
    expect(first.status).toBe(200);
    const w = first.worker!;
    expect(w).not.toBeNull();

    // The worker's KV events reach the standalone router; the frontend learns the overlap only by asking it.
    const d = await eventually(
      async () => {
        const x = await set.router.route({
          requestId: 'probe',
          tokens: Uint32Array.from(PROMPT),
          queryOnly: true,
        });
        return x.overlapBlocks === 4 ? x : null;
      },
      15_000,
      'the remote overlap of the 4 prompt blocks',
    );
    expect(d.workerId).toBe(w);
    // Both workers idle: 0 prefill blocks left on w against 4 on the other, so the repeat goes to w.
    expect((await complete(PROMPT)).worker).toBe(w);
    expect(remote.stats.failures).toBe(0);

    const before = await (await fetch(`${fe.url}/metrics`)).text();
    expect(failuresOf(before)).toBe(0);
    // The frontend applied no KV event itself: its index is the remote one.
    expect(before).not.toMatch(
      /dynamo_component_kv_cache_events_applied\{status="ok",event_type="stored"\} [1-9]/,
    );

    await sr.kill('SIGKILL');
    // Its keys stay in etcd until the lease expires, so queries hit a dead address: routed on load alone.
    const after = await set.router.route({
      requestId: 'probe2',
      tokens: Uint32Array.from(PROMPT),
      queryOnly: true,
    });
    expect(after.overlapBlocks).toBe(0);
    const served = await complete(PROMPT);
    expect(served.status).toBe(200);
    const m = await (await fetch(`${fe.url}/metrics`)).text();
    // One failed query for the probe, one for the served request.
    expect(failuresOf(m)).toBe(2);
    expect(remote.stats.failures).toBe(2);
  }, 120_000);
});

describe('createRemoteIndex without a serving instance', () => {
  it('fails each query at once, counts every failure, logs once per 10 s', async () => {
    const hub = new MemDiscoveryHub();
    const d = hub.connect();
    const metrics = new FrontendMetricSet({ routerMode: 'kv', routerId: 1n });
    const labels = { namespace: 'n', component: 'c', endpoint: 'generate' };
    const warnings: string[] = [];
    const r = createRemoteIndex({
      discovery: d,
      client: new InprocRequestClient(new InprocHub()),
      ...labels,
      modelName: 'm',
      approximate: false,
      metrics: metrics.routerRequests.forEndpoint(labels),
      warn: (m) => warnings.push(m),
    });
    const local = computeLocalBlockHashes(Uint32Array.from(PROMPT), 16);
    await r.indexer.prefetch(local);
    await r.indexer.prefetch(local);
    expect(r.indexer.stats).toEqual({ queries: 2, failures: 2, writeFailures: 0 });
    expect(r.indexer.findMatchesBySeq(computeSequenceHashes(local)).scores.size).toBe(0);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('no kv_indexer_query instance on n/c');
    expect(await metrics.registry.metrics()).toContain(
      'dynamo_component_router_remote_indexer_query_failures_total{dynamo_namespace="n",dynamo_component="c",dynamo_endpoint="generate"} 2',
    );
    r.close();
    await d.close();
  });
});
