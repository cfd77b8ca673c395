import { afterEach, describe, expect, it } from 'vitest';
import {
  LocalIndexerQueryRequestCodec,
  LocalIndexerQueryResponseCodec,
  RouterEventCodec,
  type ActiveLoad,
  type EventId,
  type RouterEvent,
  type WorkerId,
} from '@kvrouter/protocols';
import { InprocEventBus, LoadChannel, NatsEventPlane, kvEventsTopic } from '@kvrouter/kv-events';
import { startNats } from '@kvrouter/testkit';
import {
  InprocHub,
  InprocRequestClient,
  MemDiscoveryHub,
  NatsRequestClient,
  connectNats,
  watchInstances,
  watchModelCards,
  type Instance,
  type ModelDeploymentCard,
  type TypedChange,
  type TypedWatch,
} from '@kvrouter/runtime';
import { VirtualClock } from '@kvrouter/protocols';
import type { GenerateItem } from '@kvrouter/protocols';
import { PassScheduler } from './pass-scheduler.js';
import { collect, runClock, settle } from './test-helpers.js';
import { SimWorker } from './worker.js';
import { SimFleet } from './fleet.js';

const NS = 'dynamo';
const COMP = 'backend';
const prompt = (n: number): number[] => Array.from({ length: n }, (_, i) => 1 + i);

interface Env {
  clock: VirtualClock;
  scheduler: PassScheduler;
  disc: MemDiscoveryHub;
  rpc: InprocHub;
  bus: InprocEventBus;
  client: InprocRequestClient;
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

function env(): Env {
  const clock = new VirtualClock();
  const rpc = new InprocHub();
  const client = new InprocRequestClient(rpc);
  cleanups.push(() => client.close());
  return {
    clock,
    scheduler: new PassScheduler({ clock }),
    disc: new MemDiscoveryHub(),
    rpc,
    bus: new InprocEventBus(),
    client,
  };
}

async function startWorker(e: Env, dp = 1): Promise<SimWorker> {
  const d = e.disc.connect();
  const w = await SimWorker.start({
    discovery: d,
    namespace: NS,
    component: COMP,
    modelName: 'mock-llama',
    engine: { numGpuBlocks: 1000, blockSize: 16, dataParallelSize: dp },
    requestPlane: { kind: 'inproc', hub: e.rpc },
    eventPlane: e.bus.plane({ publisherId: d.leaseId }),
    scheduler: e.scheduler,
  });
  cleanups.push(() => w.stop());
  return w;
}

async function nextChange<T>(w: TypedWatch<T>): Promise<TypedChange<T>> {
  const r = await w.next();
  if (r.done) throw new Error('watch ended');
  return r.value;
}

/** Streams a generate request, stamping items with the virtual time they arrive at. */
function generate(e: Env, w: SimWorker, payload: Record<string, unknown>, signal?: AbortSignal) {
  return collect(
    e.clock,
    e.client.stream<GenerateItem>(w.instance.transport, 'generate', payload, { signal }),
  );
}

describe('SimWorker registration', () => {
  it('instance and model card are visible to a discovery watcher, and leave on stop', async () => {
    const e = env();
    const observer = e.disc.connect();
    cleanups.push(() => observer.close());
    const w = await startWorker(e, 2);
    const inst = watchInstances(observer, { namespace: NS, component: COMP, endpoint: 'generate' });
    const cards = watchModelCards(observer, { namespace: NS, component: COMP });
    cleanups.push(
      () => inst.close(),
      () => cards.close(),
    );

    const put = (await nextChange(inst)) as { type: 'put'; value: Instance };
    expect(put.type).toBe('put');
    expect(put.value.instance_id).toBe(w.instanceId);
    expect(put.value.transport).toEqual(w.server.transport);
    expect((await nextChange(inst)).type).toBe('synced');

    const card = (await nextChange(cards)) as { type: 'put'; value: ModelDeploymentCard };
    expect(card.value.display_name).toBe('mock-llama');
    expect(card.value.kv_cache_block_size).toBe(16);
    expect(card.value.runtime_config).toMatchObject({
      total_kv_blocks: 1000,
      max_num_batched_tokens: 8192,
      max_num_seqs: 256,
      data_parallel_start_rank: 0,
      data_parallel_size: 2,
      enable_local_indexer: true,
    });
    // The query endpoint of each rank is registered too (§3.5).
    const keys = (await observer.list(`v1/instances/${NS}/${COMP}/`)).map((k) => k.key.split('/')[4]);
    expect(keys.sort()).toEqual(['generate', 'worker_kv_indexer_query_dp0', 'worker_kv_indexer_query_dp1']);

    await w.stop();
    expect((await nextChange(inst)).type).toBe('delete');
    expect(await observer.list('v1/')).toEqual([]);
  });
});

// Hand-computed from docs/protocol.md §17 (see driver.test.ts for the arithmetic): 100-token prompt,
// block size 16, 1000 blocks: prefill(100) = 18.023973989, decode at u = 7/1000 = 6.11680874.
// A repeat of the prompt hits floor((100 − 1)/16) = 6 cached blocks = 96 tokens and computes 4:
// prefill(4) = 4.209989e-7·16 + 1.518344e-2·4 + 16.50142 = 0.0000067359824 + 0.06073376 + 16.50142
//            = 16.5621604959824.
describe('SimWorker generate over the request plane', () => {
  it('streams tokens at the engine model times; a repeated prompt is served from the prefix cache', async () => {
    const e = env();
    const w = await startWorker(e);
    const a = generate(e, w, {
      request_id: 'a',
      model: 'mock-llama',
      token_ids: prompt(100),
      stop_conditions: { max_tokens: 3 },
    });
    await runClock(e.clock, a.isDone);
    expect(a.error()).toBeNull();
    expect(a.got.map((g) => g.t)).toEqual([
      expect.closeTo(18.023973989, 9),
      expect.closeTo(18.023973989 + 6.11680874, 9),
      expect.closeTo(18.023973989 + 2 * 6.11680874, 9),
    ]);
    expect(a.got[0].item.cached_tokens).toBe(0);
    expect(a.got[2].item.finish_reason).toBe('length');

    const t0 = e.clock.now();
    const b = generate(e, w, {
      request_id: 'b',
      model: 'mock-llama',
      token_ids: prompt(100),
      stop_conditions: { max_tokens: 1 },
    });
    await runClock(e.clock, b.isDone);
    expect(b.got[0].item.cached_tokens).toBe(96);
    expect(b.got[0].t - t0).toBeCloseTo(16.5621604959824, 9);
  });

  it('publishes KV events (numbered by the publisher) and ActiveLoad, and answers local-indexer queries', async () => {
    const e = env();
    const w = await startWorker(e);
    const observer = e.bus.plane({ publisherId: 1n });
    const events: RouterEvent[] = [];
    const sub = observer.subscribe(kvEventsTopic(NS, COMP));
    void (async () => {
      for await (const env of sub) events.push(RouterEventCodec.decodeMsgpack(env.payload));
    })();
    const loads: ActiveLoad[] = [];
    const loadSub = new LoadChannel(observer, NS).subscribe((l) => loads.push(l));
    cleanups.push(
      () => sub.close(),
      () => loadSub.close(),
    );

    const a = generate(e, w, {
      request_id: 'a',
      model: 'm',
      token_ids: prompt(100),
      stop_conditions: { max_tokens: 2 },
    });
    await runClock(e.clock, a.isDone);
    await runClock(e.clock); // the 1 ms load coalescing window
    await settle();
    // Prefill of 100 tokens fills 6 blocks of 16: one Stored chain from the root.
    expect(events).toHaveLength(1);
    const ev = events[0];
    expect(ev.worker_id).toBe(w.instanceId);
    expect(ev.event.event_id).toBe(1n);
    expect(ev.event.dp_rank).toBe(0);
    const data = ev.event.data as { stored: { parent_hash: unknown; blocks: unknown[] } };
    expect(data.stored.parent_hash).toBeNull();
    expect(data.stored.blocks).toHaveLength(6);
    // Load: 0 at start, 7 blocks (6 full + 1 partial) while running, 0 after the request finished.
    expect(loads.every((l) => l.worker_id === w.instanceId && l.active_prefill_tokens === null)).toBe(true);
    expect(loads.map((l) => l.kv_used_blocks)).toEqual([0, 7, 0]);
    expect(loads.map((l) => l.active_decode_blocks)).toEqual([0, 7, 0]);

    const reply = await e.client.unary(
      w.instance.transport,
      'worker_kv_indexer_query_dp0',
      LocalIndexerQueryRequestCodec.toValue({
        worker_id: w.instanceId,
        start_event_id: 1n as EventId,
        end_event_id: null,
      }),
    );
    const res = LocalIndexerQueryResponseCodec.fromValue(reply);
    expect('Events' in res && res.Events.last_event_id).toBe(1n);
    expect('Events' in res && res.Events.events).toEqual(events);
    const other = LocalIndexerQueryResponseCodec.fromValue(
      await e.client.unary(
        w.instance.transport,
        'worker_kv_indexer_query_dp0',
        LocalIndexerQueryRequestCodec.toValue({
          worker_id: 12345n as WorkerId,
          start_event_id: null,
          end_event_id: null,
        }),
      ),
    );
    expect('Error' in other).toBe(true);
  });

  it('a client cancel stops generation in the engine', async () => {
    const e = env();
    const w = await startWorker(e);
    const ac = new AbortController();
    const a = generate(
      e,
      w,
      { request_id: 'a', model: 'm', token_ids: prompt(100), stop_conditions: { max_tokens: 500 } },
      ac.signal,
    );
    await runClock(e.clock, () => a.got.length >= 2);
    ac.abort();
    await runClock(e.clock, a.isDone);
    await runClock(e.clock);
    expect(a.got.length).toBeLessThan(500);
    expect(w.engine.stats(0).cancelled).toBe(1);
    expect(w.engine.hasWork(0)).toBe(false);
    expect(w.driver.activeRequests).toBe(0);
    expect(w.server.activeStreams).toBe(0);
  });

  it('rejects a bad payload with a typed error naming the field', async () => {
    const e = env();
    const w = await startWorker(e);
    const a = generate(e, w, { request_id: 'a', model: 'm', token_ids: [1, -2] });
    await runClock(e.clock, a.isDone);
    expect(a.error()?.code).toBe('invalid_request');
    expect(a.error()?.message).toContain('token_ids[1]');
    expect(w.engine.hasWork(0)).toBe(false);
  });

  it('stop ends in-flight streams with engine_shutdown after their tokens, deregisters and refuses new work', async () => {
    const e = env();
    const w = await startWorker(e);
    const a = generate(e, w, {
      request_id: 'a',
      model: 'm',
      token_ids: prompt(100),
      stop_conditions: { max_tokens: 500 },
    });
    await runClock(e.clock, () => a.got.length >= 2);
    await w.stop();
    await runClock(e.clock, a.isDone);
    expect(a.got.length).toBeGreaterThanOrEqual(2);
    expect(a.error()).toMatchObject({ code: 'engine_shutdown' });
    expect(w.engine.hasWork(0)).toBe(false);
    const b = generate(e, w, { request_id: 'b', model: 'm', token_ids: prompt(10) });
    await runClock(e.clock, b.isDone);
    expect(b.error()).toMatchObject({ code: 'cannot_connect' });
  });

  it('a crash drops streams as disconnected and leaves the keys to expire with the lease', async () => {
    const e = env();
    const observer = e.disc.connect();
    cleanups.push(() => observer.close());
    const w = await startWorker(e);
    const a = generate(e, w, {
      request_id: 'a',
      model: 'm',
      token_ids: prompt(100),
      stop_conditions: { max_tokens: 500 },
    });
    await runClock(e.clock, () => a.got.length >= 1);
    w.crash();
    await runClock(e.clock, a.isDone);
    expect(a.error()).toMatchObject({ code: 'disconnected' });
    expect((await observer.list(`v1/instances/${NS}/`)).length).toBeGreaterThan(0);
  });
});

describe('SimFleet', () => {
  it('starts N workers with distinct instance ids and servers sharing one scheduler', async () => {
    const e = env();
    const observer = e.disc.connect();
    cleanups.push(() => observer.close());
    const fleet = await SimFleet.start({
      numWorkers: 3,
      openDiscovery: async () => e.disc.connect(),
      namespace: NS,
      component: COMP,
      modelName: 'm',
      engine: { numGpuBlocks: 1000, blockSize: 16 },
      requestPlane: { kind: 'inproc', hub: e.rpc },
      eventPlane: (id) => e.bus.plane({ publisherId: id }),
      scheduler: e.scheduler,
    });
    cleanups.push(() => fleet.stop());
    const ids = new Set(fleet.workers.map((w) => w.instanceId));
    expect(ids.size).toBe(3);
    const listed = await observer.list(`v1/instances/${NS}/${COMP}/generate/`);
    expect(listed).toHaveLength(3);
    // Each worker has its own token stream (seed + index): same prompt, different first tokens overall.
    const runs = fleet.workers.map((w, i) =>
      generate(e, w, {
        request_id: `r${i}`,
        model: 'm',
        token_ids: prompt(20),
        stop_conditions: { max_tokens: 4 },
      }),
    );
    await runClock(e.clock, () => runs.every((r) => r.isDone()));
    const seqs = runs.map((r) => r.got.flatMap((g) => g.item.token_ids).join(','));
    expect(new Set(seqs).size).toBe(3);
    // All three started their pass at 0 and ended together: prefill(20) by hand =
    // 4.209989e-7·400 + 1.518344e-2·20 + 16.50142 = 0.00016839956 + 0.3036688 + 16.50142 = 16.80525719956.
    for (const r of runs) expect(r.got[0].t).toBeCloseTo(16.80525719956, 9);
    await fleet.stop();
    expect(await observer.list('v1/')).toEqual([]);
  });

  it('startup delay and stagger postpone the registration of each worker', async () => {
    const e = env();
    const observer = e.disc.connect();
    cleanups.push(() => observer.close());
    const started = SimFleet.start({
      numWorkers: 3,
      openDiscovery: async () => e.disc.connect(),
      namespace: NS,
      component: COMP,
      modelName: 'm',
      engine: { numGpuBlocks: 100, blockSize: 16 },
      requestPlane: { kind: 'inproc', hub: e.rpc },
      scheduler: e.scheduler,
      startupDelayMs: 5,
      staggerMs: 10,
    });
    const registered = async () => (await observer.list(`v1/instances/${NS}/${COMP}/generate/`)).length;
    // Worker i registers at 5 + 10·i ms.
    const seen: number[] = [];
    for (const t of [4, 5, 14, 15, 25]) {
      e.clock.advanceTo(t);
      await settle();
      seen.push(await registered());
    }
    expect(seen).toEqual([0, 1, 1, 2, 3]);
    const fleet = await started;
    cleanups.push(() => fleet.stop());
  });

  it('a worker that fails to start stops the others and the error names the field', async () => {
    const e = env();
    const observer = e.disc.connect();
    cleanups.push(() => observer.close());
    await expect(
      SimFleet.start({
        numWorkers: 2,
        openDiscovery: async () => e.disc.connect(),
        namespace: NS,
        component: COMP,
        modelName: 'm',
        engine: { numGpuBlocks: 0 },
        requestPlane: { kind: 'inproc', hub: e.rpc },
        scheduler: e.scheduler,
      }),
    ).rejects.toMatchObject({ code: 'invalid_engine_config', detail: { field: 'numGpuBlocks' } });
    expect(await observer.list('v1/')).toEqual([]);
  });
});

describe('SimWorker over NATS (request plane and event plane)', () => {
  it('serves generate and publishes its KV events through a real nats-server', async () => {
    const nats = await startNats({ jetstream: false });
    cleanups.push(() => nats.stop());
    const nc = await connectNats(nats.url);
    cleanups.push(() => nc.close());
    const disc = new MemDiscoveryHub();
    const d = disc.connect();
    const w = await SimWorker.start({
      discovery: d,
      namespace: NS,
      component: COMP,
      modelName: 'm',
      engine: { numGpuBlocks: 1000, blockSize: 16, speedupRatio: 100 },
      requestPlane: { kind: 'nats', nc },
      eventPlane: new NatsEventPlane({ nc, publisherId: d.leaseId, discovery: d }),
    });
    cleanups.push(() => w.stop());
    expect(w.instance.transport).toEqual({
      nats_tcp: `namespace.${NS}.component.${COMP}.instance.${w.instanceId.toString(16)}`,
    });
    const observer = new NatsEventPlane({ nc, publisherId: 1n });
    const sub = observer.subscribe(kvEventsTopic(NS, COMP));
    cleanups.push(() => sub.close());
    await nc.flush();

    const client = new NatsRequestClient(nc);
    cleanups.push(() => client.close());
    const tokens: number[] = [];
    for await (const item of client.stream<GenerateItem>(w.instance.transport, 'generate', {
      request_id: 'n1',
      model: 'm',
      token_ids: prompt(40),
      stop_conditions: { max_tokens: 3 },
    }))
      tokens.push(...item.token_ids);
    expect(tokens).toHaveLength(3);
    // 40 tokens of 16 = 2 full blocks, stored in the prefill pass.
    const first = await sub.next();
    const ev = RouterEventCodec.decodeMsgpack((first.value as { payload: Uint8Array }).payload);
    expect(ev.worker_id).toBe(w.instanceId);
    expect((ev.event.data as { stored: { blocks: unknown[] } }).stored.blocks).toHaveLength(2);
    // The NATS plane registered its channel under the worker's lease (§5.2).
    expect((await d.list('v1/event_channels/')).map((e) => e.key)).toContain(
      `v1/event_channels/${NS}/${COMP}/kv-events/${w.instanceId.toString(16)}`,
    );
  });
});
