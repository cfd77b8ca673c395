/**
 * End to end with real processes: etcd and nats-server (testkit), a mocker process with two
 * simulated workers, and the standalone router process (`--serve-indexer`, system port). The test
 * plays the frontend: it asks the router for a worker over HTTP and over the request plane, sends
 * the prompt to that worker, reports first token and end, and checks that the router's index (and
 * the index it serves on the worker component) follows the worker's KV events.
 */
import { spawnSync } from 'node:child_process';
import { computeLocalBlockHashes, pairsToU64s, parseJson } from '@kvrouter/protocols';
import { EtcdDiscovery, TcpRequestClient, parseInstance, type Instance } from '@kvrouter/runtime';
import { startEtcd, startNats, type ServiceHandle } from '@kvrouter/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startMocker, startRouterProcess, type Proc, type RouterProc } from '@kvrouter/testkit';

const NS = 'sre2e';
const BS = 16;
let etcd: ServiceHandle;
let nats: ServiceHandle;
let mocker: Proc;
let router: RouterProc;
let observer: EtcdDiscovery;
const client = new TcpRequestClient();

beforeAll(async () => {
  [etcd, nats] = await Promise.all([startEtcd(), startNats({ jetstream: false })]);
  const infra = { etcd: etcd.url, nats: nats.url };
  mocker = startMocker(infra, NS, 2);
  router = await startRouterProcess(infra, NS, ['--serve-indexer']);
  observer = await EtcdDiscovery.connect({ endpoints: etcd.url });
}, 60_000);

afterAll(async () => {
  await client.close();
  await observer?.close();
  await router?.kill();
  await mocker?.kill();
  await Promise.all([etcd?.stop(), nats?.stop()]);
});

async function post(path: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const r = await fetch(`${router.systemUrl}${path}`, {
    method: 'POST',
    body: JSON.stringify(body, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)),
  });
  return { status: r.status, json: parseJson(await r.text()) as Record<string, unknown> };
}

async function instances(comp: string, ep: string): Promise<Instance[]> {
  return (await observer.list(`v1/instances/${NS}/${comp}/${ep}/`)).map((e) => parseInstance(e.value, e.key));
}

/** 64 tokens = 4 full blocks of 16; each family shares no block with another. */
const prompt = (f: number): number[] => Array.from({ length: 64 }, (_, i) => f * 1000 + i + 1);

describe('standalone router process with mocker workers on etcd + NATS', () => {
  it("routes over HTTP and the request plane, and its index follows the workers' KV events", async () => {
    const health = await eventually(
      async () => {
        const h = (await (await fetch(`${router.systemUrl}/health`)).json()) as {
          status: string;
          workers: number;
          models: string[];
        };
        return h.workers === 2 ? h : null;
      },
      30_000,
      'two workers known to the router',
    );
    expect(health).toMatchObject({ status: 'healthy', models: ['mock-model'] });

    // Registered as PROTOCOL §6.1 says: router-discovery under the worker component, its own endpoints under `router`.
    expect((await instances('backend', 'router-discovery')).map((i) => i.instance_id)).toEqual([
      router.routerId,
    ]);
    for (const ep of ['route', 'mark_prefill_completed', 'free', 'generate'])
      expect((await instances('router', ep)).map((i) => i.instance_id)).toEqual([router.routerId]);
    const served = await instances('backend', 'kv_indexer_query');
    expect(served.map((i) => i.instance_id)).toEqual([router.routerId]);
    expect(await instances('backend', 'kv_indexer_record_routing_decision')).toEqual([]);

    const tokens = prompt(1);
    const first = await post('/route', { request_id: 'req-1', token_ids: tokens });
    expect(first.status).toBe(200);
    expect(first.json).toMatchObject({
      request_id: 'req-1',
      overlap_blocks: 0,
      required_blocks: 4,
      booked: true,
    });
    const workerId = BigInt(first.json.worker_id as string | number | bigint);
    const workers = await instances('backend', 'generate');
    const target = workers.find((i) => i.instance_id === workerId);
    expect(target, 'the chosen worker is one of the mocker workers').toBeDefined();

    // The caller dispatches, reports the first token, then the end (over the request plane).
    let n = 0;
    for await (const item of client.stream<{ token_ids: number[] }>(target!.transport, 'generate', {
      request_id: 'req-1',
      model: 'mock-model',
      token_ids: tokens,
      stop_conditions: { max_tokens: 2 },
    })) {
      if (n === 0)
        expect(
          await client.unary(router.transport, 'mark_prefill_completed', { request_id: 'req-1' }),
        ).toEqual({ request_id: 'req-1', found: true });
      n += item.token_ids.length;
    }
    expect(n).toBe(2);
    expect(await client.unary(router.transport, 'free', { request_id: 'req-1' })).toEqual({
      request_id: 'req-1',
      found: true,
    });
    expect(await client.unary(router.transport, 'free', { request_id: 'req-1' })).toEqual({
      request_id: 'req-1',
      found: false,
    });

    // The worker's Stored event reaches the router's index: all 4 prompt blocks on that worker.
    const again = await eventually(
      async () => {
        const r = await client.unary<Record<string, unknown>>(router.transport, 'route', {
          token_ids: tokens,
          query_only: true,
        });
        return r.overlap_blocks === 4 ? r : null;
      },
      15_000,
      "the prompt's 4 blocks in the router index",
    );
    expect(again).toMatchObject({ worker_id: workerId, cached_tokens: 64, booked: false });

    // The served index (§7.7) answers the same from the worker component.
    const local = pairsToU64s(computeLocalBlockHashes(tokens, BS));
    const reply = await client.unary<{
      Scores?: { scores: [{ worker_id: bigint; dp_rank: number }, number][] };
    }>(served[0]!.transport, 'kv_indexer_query', { model_name: 'mock-model', block_hashes: local });
    expect(reply.Scores?.scores).toEqual([[{ worker_id: workerId, dp_rank: 0 }, 4]]);
    expect(
      await client.unary(served[0]!.transport, 'kv_indexer_query', {
        model_name: 'other',
        block_hashes: local,
      }),
    ).toEqual({
      Error: expect.stringContaining('no index is served for model "other"') as string,
    });

    // A different prompt overlaps nothing.
    expect((await post('/route', { token_ids: prompt(2), query_only: true })).json.overlap_blocks).toBe(0);

    const m = await (await fetch(`${router.systemUrl}/metrics`)).text();
    expect(m).toMatch(/dynamo_component_kv_cache_events_applied\{status="ok",event_type="stored"\} [1-9]/);
    expect(m).toContain(
      `dynamo_component_router_requests_total{dynamo_namespace="${NS}",dynamo_component="backend",dynamo_endpoint="generate"} 1`,
    );
    expect(m).toMatch(/dynamo_component_router_time_to_first_token_seconds_count\{[^}]*\} 1/);
    // promtool parses the exposition; its only lint finding is the §16-mandated counter name.
    const pt = spawnSync('promtool', ['check', 'metrics'], { input: m, encoding: 'utf8', timeout: 30_000 });
    expect(pt.error, 'promtool missing: node tools/services.mjs install').toBeUndefined();
    expect([0, 3]).toContain(pt.status);
    const findings = `${pt.stdout}${pt.stderr}`
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '');
    expect(findings).toEqual(
      findings.length
        ? ['dynamo_component_kv_cache_events_applied counter metrics should have "_total" suffix']
        : [],
    );
  }, 90_000);

  it('generate through the router: routed, forwarded, streamed back, then freed', async () => {
    const tokens = prompt(3);
    const items: { token_ids: number[]; finish_reason?: string }[] = [];
    for await (const item of client.stream<{ token_ids: number[]; finish_reason?: string }>(
      router.transport,
      'generate',
      {
        request_id: 'via-router',
        model: 'mock-model',
        token_ids: tokens,
        stop_conditions: { max_tokens: 3 },
        router_config_override: { router_temperature: 0 },
      },
    ))
      items.push(item);
    expect(items.flatMap((i) => i.token_ids)).toHaveLength(3);
    expect(items.at(-1)!.finish_reason).toBe('length');
    // Freed by the router itself at the end of the stream.
    expect(await client.unary(router.transport, 'free', { request_id: 'via-router' })).toEqual({
      request_id: 'via-router',
      found: false,
    });
    // The worker that served it now holds the prompt's 4 blocks, as the router's index shows.
    await eventually(
      async () => {
        const r = await client.unary<{ overlap_blocks: number }>(router.transport, 'route', {
          token_ids: tokens,
          query_only: true,
        });
        return r.overlap_blocks === 4;
      },
      15_000,
      'the forwarded prompt in the index',
    );
    const m = await (await fetch(`${router.systemUrl}/metrics`)).text();
    expect(m).toContain(
      `dynamo_component_router_requests_total{dynamo_namespace="${NS}",dynamo_component="backend",dynamo_endpoint="generate"} 2`,
    );
  }, 60_000);

  it('answers bad input with 400 naming the field, unknown paths with 404', async () => {
    const bad = await post('/route', { token_ids: [1, 'x'] });
    expect(bad.status).toBe(400);
    expect(bad.json).toMatchObject({ error: { code: 'invalid_request', param: 'token_ids[1]' } });
    expect((await post('/free', {})).status).toBe(400);
    expect((await fetch(`${router.systemUrl}/nope`)).status).toBe(404);
    await expect(client.unary(router.transport, 'route', { token_ids: 'x' })).rejects.toMatchObject({
      code: 'invalid_request',
    });
  });
});
