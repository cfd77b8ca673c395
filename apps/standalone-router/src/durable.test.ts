/**
 * Deprecated durable mode (§5.3) end to end: a mocker process publishing KV events to JetStream
 * (`--durable-kv-events`) and the standalone router consuming them with its durable consumer
 * (`--router-durable-kv-events`). The index follows the stream; a router started later rebuilds the
 * same index from the stream alone.
 */
import { EtcdDiscovery, TcpRequestClient, parseInstance } from '@kvrouter/runtime';
import { startEtcd, startNats, type ServiceHandle } from '@kvrouter/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  eventually,
  startMocker,
  startRouterProcess,
  type Infra,
  type Proc,
  type RouterProc,
} from '@kvrouter/testkit';

const NS = 'srdurable';
let etcd: ServiceHandle;
let nats: ServiceHandle;
let infra: Infra;
let mocker: Proc;
const routers: RouterProc[] = [];
const client = new TcpRequestClient();

beforeAll(async () => {
  [etcd, nats] = await Promise.all([startEtcd(), startNats({ jetstream: true })]);
  infra = { etcd: etcd.url, nats: nats.url };
  mocker = startMocker(infra, NS, 1, ['--durable-kv-events']);
}, 60_000);

afterAll(async () => {
  await client.close();
  for (const r of routers) await r.kill();
  await mocker?.kill();
  await Promise.all([etcd?.stop(), nats?.stop()]);
});

const overlap = (r: RouterProc, tokens: number[]) => async (): Promise<number> =>
  (
    await client.unary<{ overlap_blocks: number }>(r.transport, 'route', {
      token_ids: tokens,
      query_only: true,
    })
  ).overlap_blocks;

describe('durable KV events (JetStream)', () => {
  it('the index follows the stream, and a later router rebuilds it from the stream', async () => {
    const a = await startRouterProcess(infra, NS, ['--router-durable-kv-events']);
    routers.push(a);
    await eventually(
      async () =>
        ((await (await fetch(`${a.systemUrl}/health`)).json()) as { workers: number }).workers === 1,
      30_000,
      'the worker',
    );
    const observer = await EtcdDiscovery.connect({ endpoints: etcd.url });
    const [worker] = (await observer.list(`v1/instances/${NS}/backend/generate/`)).map((e) =>
      parseInstance(e.value, e.key),
    );
    await observer.close();

    const tokens = Array.from({ length: 64 }, (_, i) => 9000 + i); // 4 blocks of 16
    for await (const _ of client.stream(worker!.transport, 'generate', {
      request_id: 'd1',
      model: 'mock-model',
      token_ids: tokens,
      stop_conditions: { max_tokens: 1 },
    }));
    await eventually(
      async () => (await overlap(a, tokens)()) === 4,
      15_000,
      'the 4 blocks through JetStream',
    );

    const b = await startRouterProcess(infra, NS, ['--router-durable-kv-events']);
    routers.push(b);
    // Nothing new was generated: b's index comes from replaying the stream with its own consumer.
    expect(
      await eventually(
        async () => ((await overlap(b, tokens)()) === 4 ? 4 : null),
        15_000,
        'the replayed blocks in the new router',
      ),
    ).toBe(4);
    expect(b.stderr()).toMatch(
      /durable KV events: consumer [0-9a-f]+ on stream namespace-srdurable-component-backend-kv-events/,
    );
  }, 120_000);
});
