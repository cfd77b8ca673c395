/**
 * Issue 18, standalone-router faults, with real processes: etcd + nats-server, a mocker process
 * (2 workers) and this router as a process with `--serve-indexer`; the frontend side of §7.7 is
 * `createRemoteIndex` of `@kvrouter/router-host` in this process, over a request client that
 * records every call it makes.
 *
 * 1. SIGSTOP the router past its 10 s lease and SIGCONT it: it grants its lease again under the same
 *    id and re-registers every key; the remote-index client had stopped calling it at its first
 *    timed-out query, and answers from it again within 5 s of its return; its `/health` reports the gap.
 * 2. SIGKILL it and start another: after the dead instance's first refused connection no query goes
 *    to it, and the new router announces its index only once rebuilt (its first answer already holds
 *    the prompt's blocks).
 * 3. SIGSTOP the mocker past its workers' leases and SIGCONT it: both workers re-register under
 *    the same ids, the router routes to them again and their blocks are back in its index.
 */
import { RouterRequestMetrics, createRegistry } from '@kvrouter/metrics';
import {
  ROUTER_DISCOVERY_ENDPOINT,
  KV_INDEXER_QUERY_ENDPOINT,
  computeLocalBlockHashes,
  computeSequenceHashes,
  parseJson,
} from '@kvrouter/protocols';
import { createRemoteIndex } from '@kvrouter/router-host';
import { EtcdDiscovery, TcpRequestClient, type RequestClient, type Transport } from '@kvrouter/runtime';
import {
  eventually,
  startEtcd,
  startMocker,
  startNats,
  startRouterProcess,
  type Proc,
  type RouterProc,
  type ServiceHandle,
} from '@kvrouter/testkit';
import { afterAll, beforeAll, expect, it } from 'vitest';

const NS = 'srheal';
let etcd: ServiceHandle;
let nats: ServiceHandle;
let mocker: Proc;
let router: RouterProc;
let d: EtcdDiscovery;
const tcp = new TcpRequestClient();

interface Call {
  target: string;
  probe: boolean;
  at: number;
  ok?: boolean;
}
const calls: Call[] = [];
/** The request client of the remote index, recording each call's target and outcome. */
const recording: RequestClient = {
  stream: (t, ep, p, o) => tcp.stream(t, ep, p, o),
  unary: async <T>(t: Transport, ep: string, p: unknown, o?: { timeoutMs?: number }): Promise<T> => {
    const q = p as { block_hashes?: unknown[] };
    const c: Call = { target: JSON.stringify(t), probe: (q.block_hashes ?? []).length === 0, at: Date.now() };
    calls.push(c);
    try {
      const r = await tcp.unary<T>(t, ep, p, o);
      c.ok = true;
      return r;
    } catch (e) {
      c.ok = false;
      throw e;
    }
  },
  close: () => tcp.close(),
} as RequestClient;

/** 64 tokens = 4 blocks of the mocker's 16. */
const TOKENS = Array.from({ length: 64 }, (_, i) => 7000 + 5 * i);
const local = computeLocalBlockHashes(Uint32Array.from(TOKENS), 16);
const seq = computeSequenceHashes(local);
const labels = { namespace: NS, component: 'backend', endpoint: 'generate' };
let remote: ReturnType<typeof createRemoteIndex>;
const warnings: string[] = [];

/** One query through the remote index: the best overlap it returned (0 when it failed). */
async function query(): Promise<number> {
  await remote.indexer.prefetch(local);
  return Math.max(0, ...remote.indexer.findMatchesBySeq(seq).scores.values());
}

beforeAll(async () => {
  [etcd, nats] = await Promise.all([startEtcd(), startNats({ jetstream: false })]);
  const infra = { etcd: etcd.url, nats: nats.url };
  mocker = startMocker(infra, NS, 2);
  router = await startRouterProcess(infra, NS, ['--serve-indexer']);
  d = await EtcdDiscovery.connect({ endpoints: etcd.url });
  remote = createRemoteIndex({
    discovery: d,
    client: recording,
    ...labels,
    modelName: 'mock-model',
    approximate: false,
    metrics: new RouterRequestMetrics(createRegistry()).forEndpoint(labels),
    warn: (m) => warnings.push(m),
  });
  await eventually(
    async () =>
      ((await (await fetch(`${router.systemUrl}/health`)).json()) as { workers: number }).workers === 2,
    30_000,
    'the router sees both workers',
  );
  // One request through the router: its worker stores the 4 blocks and the router's index gets them.
  for await (const _ of tcp.stream(router.transport, 'generate', {
    request_id: 'warm',
    model: 'mock-model',
    token_ids: TOKENS,
    stop_conditions: { max_tokens: 2 },
  }));
  await eventually(async () => (await query()) === 4, 15_000, 'the served index holds the 4 blocks');
}, 90_000);

afterAll(async () => {
  remote?.close();
  await d?.close();
  await tcp.close();
  await router?.kill();
  await mocker?.kill();
  await Promise.all([etcd?.stop(), nats?.stop()]);
});

const routerKeys = async (id: bigint): Promise<string[]> =>
  (await d.list(`v1/instances/${NS}/`)).map((e) => e.key).filter((k) => k.endsWith(`/${id.toString(16)}`));

it('a router paused past its lease re-registers under the same id, is used again within 5 s, and /health shows the gap', async () => {
  const target = JSON.stringify(router.transport);
  const before = await routerKeys(router.routerId);
  expect(before.some((k) => k.includes(`/${ROUTER_DISCOVERY_ENDPOINT}/`))).toBe(true);
  expect(before.some((k) => k.includes(`/${KV_INDEXER_QUERY_ENDPOINT}/`))).toBe(true);

  router.child.kill('SIGSTOP');
  const stoppedAt = Date.now();
  // Queries while it hangs: the first one times out (1 s) and takes it out of the rotation.
  while (Date.now() - stoppedAt < 13_000) {
    expect(await query()).toBe(0);
    await new Promise((r) => setTimeout(r, 250));
  }
  const whileStopped = calls.filter((c) => c.at >= stoppedAt && c.target === target && !c.probe);
  expect(whileStopped.length).toBe(1);
  expect(whileStopped[0]!.ok).toBe(false);
  // Its lease expired meanwhile: etcd deleted its keys.
  await eventually(async () => (await routerKeys(router.routerId)).length === 0, 10_000, 'keys expired');

  router.child.kill('SIGCONT');
  const back = Date.now();
  await eventually(async () => (await query()) === 4, 5_000, 'the frontend side uses the router again');
  const usedAgainMs = Date.now() - back;
  expect(usedAgainMs).toBeLessThanOrEqual(5_000);
  // Same instance id, every key back.
  expect((await routerKeys(router.routerId)).sort()).toEqual(before.sort());
  const h = parseJson(await (await fetch(`${router.systemUrl}/health`)).text()) as {
    status: string;
    router_id: bigint | number;
    lease: {
      state: string;
      reacquired: number;
      lastGap: { lostAt: number; restoredAt: number; keys: number };
    };
  };
  expect(h.status).toBe('healthy');
  expect(BigInt(h.router_id)).toBe(router.routerId);
  expect(h.lease.state).toBe('held');
  expect(h.lease.reacquired).toBe(1);
  expect(h.lease.lastGap.keys).toBe(before.length);
  expect(h.lease.lastGap.lostAt).toBeGreaterThanOrEqual(stoppedAt);
  expect(h.lease.lastGap.restoredAt).toBeGreaterThanOrEqual(h.lease.lastGap.lostAt);
}, 60_000);

it('a killed router gets no query after its first refused connection; its successor serves a rebuilt index', async () => {
  const dead = JSON.stringify(router.transport);
  await router.kill('SIGKILL');
  const killedAt = Date.now();
  const infra = { etcd: etcd.url, nats: nats.url };
  const next = startRouterProcess(infra, NS, ['--serve-indexer']);
  const firstAnswers: number[] = [];
  // Queries while the successor starts (the dead one stays in discovery until its lease expires).
  const ref: { r: RouterProc | null } = { r: null };
  void next.then((r) => (ref.r = r));
  while (ref.r === null || firstAnswers.length === 0) {
    const n = await query();
    const last = calls.at(-1);
    if (ref.r !== null && last?.ok && last.target === JSON.stringify(ref.r.transport)) firstAnswers.push(n);
    await new Promise((r) => setTimeout(r, 100));
    if (Date.now() - killedAt > 40_000) throw new Error('no answer from the successor');
  }
  router = ref.r;
  const toDead = calls.filter((c) => c.at >= killedAt && c.target === dead && !c.probe);
  expect(toDead.length).toBeLessThanOrEqual(1);
  expect(toDead.every((c) => c.ok === false)).toBe(true);
  // The successor's very first answer already holds the blocks (its index was rebuilt from the
  // workers' local indexers before it announced kv_indexer_query).
  expect(firstAnswers[0]).toBe(4);
  expect(warnings.some((w) => /unreachable .*out of rotation/.test(w))).toBe(true);
}, 60_000);

it('workers paused past their leases re-register under the same ids; the router routes to them and rebuilds their blocks', async () => {
  const workerKeys = async (): Promise<string[]> =>
    (await d.list(`v1/instances/${NS}/backend/generate/`)).map((e) => e.key).sort();
  const before = await workerKeys();
  expect(before).toHaveLength(2);
  mocker.child.kill('SIGSTOP');
  // Both workers' leases expire: etcd deletes their keys and the router drops them (and their blocks).
  await eventually(async () => (await workerKeys()).length === 0, 20_000, 'worker keys expired');
  await eventually(
    async () =>
      ((await (await fetch(`${router.systemUrl}/health`)).json()) as { workers: number }).workers === 0,
    10_000,
    'the router dropped both workers',
  );
  mocker.child.kill('SIGCONT');
  // Same instance ids, routable again, and the router's index has the prompt's blocks back (from
  // the workers' local indexers), as the served index shows.
  await eventually(
    async () => (await workerKeys()).join() === before.join(),
    10_000,
    'workers re-registered',
  );
  await eventually(
    async () =>
      ((await (await fetch(`${router.systemUrl}/health`)).json()) as { workers: number }).workers === 2,
    10_000,
    'the router routes to both again',
  );
  await eventually(async () => (await query()) === 4, 10_000, 'the blocks are back in the index');
}, 60_000);
