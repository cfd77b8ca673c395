/**
 * End to end without a GPU: two vLLM-compatible mocker processes (OpenAI HTTP + vLLM ZMQ KV events),
 * each behind one worker adapter (this process; mem discovery, ZMQ event plane, tcp request plane).
 * A router built from the real pieces (discovery watch → KvEventSubscriber → RadixIndexer → KvRouter)
 * routes token requests KV-aware to the adapters; its index holds exactly the blocks the engines
 * report as cached. Killing an engine makes its adapter fail streams with migratable codes, then
 * deregister and clear the engine's blocks.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveConfig } from '@kvrouter/config';
import { instancesPrefix, type RouterEvent } from '@kvrouter/protocols';
import {
  KvEventSubscriber,
  LoadChannel,
  ZmqEventPlane,
  discoveryTransportResolver,
  kvEventsTopic,
  requestPlaneQueryClient,
  watchWorkers,
} from '@kvrouter/kv-events';
import { RadixIndexer } from '@kvrouter/radix-indexer';
import { KvRouter } from '@kvrouter/router';
import {
  TcpRequestClient,
  createDiscovery,
  isMigratable,
  parseInstance,
  type Discovery,
} from '@kvrouter/runtime';
import type { GenerateItem } from '@kvrouter/protocols';
import { startWorker, type RunningWorker } from './worker.js';

const NS = 'e2e-worker';
const MOCKER = fileURLToPath(new URL('../../mocker/src/main.ts', import.meta.url));
const BS = 4;

interface Engine {
  child: ChildProcess;
  http: string;
  kv: string;
  replay: string;
}

async function startEngine(): Promise<Engine> {
  const child = spawn(
    process.execPath,
    [
      ...[
        '--conditions=source',
        '--import',
        'tsx',
        MOCKER,
        '--model-path',
        'mock-vllm',
        '--http-host',
        '127.0.0.1',
      ],
      ...[
        '--http-ports',
        '0',
        '--zmq-kv-events-ports',
        '0',
        '--zmq-replay-ports',
        '0',
        '--block-size',
        String(BS),
      ],
      ...['--num-gpu-blocks-override', '512', '--speedup-ratio', '10'],
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', resolve);
    child.once('exit', (c) => reject(new Error(`mocker exited with ${c}`)));
  });
  const e = (JSON.parse(line) as { engines: Array<{ http: string; kv_events: string[]; replay: string[] }> })
    .engines[0];
  return { child, http: e.http, kv: e.kv_events[0], replay: e.replay[0] };
}

async function engineBlocks(e: Engine): Promise<Set<string>> {
  const r = (await (await fetch(`${e.http}/debug/kv_blocks`)).json()) as {
    ranks: Array<{ blocks: string[] }>;
  };
  return new Set(r.ranks[0].blocks);
}

function indexBlocks(dump: RouterEvent[], worker: bigint): Set<string> {
  const out = new Set<string>();
  for (const e of dump) {
    const d = e.event.data;
    if (e.worker_id === worker && typeof d === 'object' && 'stored' in d)
      for (const b of d.stored.blocks) out.add(String(b.block_hash));
  }
  return out;
}

async function until(cond: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const prompt = (n: number, base: number) => Uint32Array.from({ length: n }, (_, i) => base + i);

describe('worker adapter in front of vLLM-compatible engines', () => {
  const engines: Engine[] = [];
  const workers: RunningWorker[] = [];
  const closers: Array<() => unknown> = [];
  let d: Discovery;
  let index: RadixIndexer;
  let router: KvRouter;
  const client = new TcpRequestClient();
  const transports = new Map<bigint, { tcp: string }>();
  /** Latest ActiveLoad per worker, as the router's busy monitor would see it. */
  const loads = new Map<bigint, number | null>();

  beforeAll(async () => {
    engines.push(...(await Promise.all([startEngine(), startEngine()])));
    for (const e of engines) {
      const { config } = resolveConfig(
        'worker',
        [
          ...[
            '--engine-url',
            e.http,
            '--block-size',
            String(BS),
            '--kv-events-endpoint',
            e.kv,
            '--kv-events-replay-endpoint',
            e.replay,
          ],
          ...[
            '--endpoint',
            `dyn://${NS}.backend.generate`,
            '--total-kv-blocks',
            '512',
            '--discovery-backend',
            'mem',
          ],
        ],
        {},
      );
      workers.push(
        await startWorker(config, { log: () => undefined }, { engineWaitMs: 20_000, healthPeriodMs: 200 }),
      );
    }
    d = await createDiscovery({ backend: 'mem' });
    const plane = new ZmqEventPlane({
      publisherId: d.leaseId,
      discovery: d,
      bindHost: '127.0.0.1',
      advertiseHost: '127.0.0.1',
    });
    index = new RadixIndexer();
    const sub = new KvEventSubscriber({
      index,
      query: requestPlaneQueryClient(client, { resolve: discoveryTransportResolver(d, NS, 'backend') }),
      startupDelayMs: 0,
    });
    sub.start(() => plane.subscribe(kvEventsTopic(NS, 'backend')));
    const loadSub = new LoadChannel(plane, NS).subscribe((l) => loads.set(l.worker_id, l.kv_used_blocks));
    const watch = watchWorkers({ discovery: d, namespace: NS, component: 'backend', subscriber: sub });
    router = new KvRouter({
      blockSize: BS,
      deps: {
        clock: {
          now: () => Date.now(),
          setTimeout: (f, ms) => setTimeout(f, ms).unref(),
          clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
        },
        random: Math.random,
        indexer: index,
      },
    });
    for (const w of workers) {
      router.addWorker({ workerId: w.instanceId, totalKvBlocks: 512 });
      transports.set(w.instanceId, w.server.transport as { tcp: string });
    }
    closers.push(
      () => loadSub.close(),
      () => watch.close(),
      () => sub.close(),
      () => plane.close(),
      () => d.close(),
    );
    await watch.synced;
    await new Promise((r) => setTimeout(r, 400)); // ZMQ slow joiners: router SUB → adapters, adapters' SUB → engines
  }, 60_000);

  afterAll(async () => {
    for (const w of workers) await w.stop().catch(() => undefined);
    for (const c of closers) await c();
    await client.close();
    for (const e of engines)
      if (e.child.exitCode === null && e.child.signalCode === null) e.child.kill('SIGKILL');
  });

  async function run(requestId: string, tokens: Uint32Array, maxTokens: number) {
    const decision = await router.route({ requestId, tokens });
    const items: GenerateItem[] = [];
    try {
      const stream = client.stream(transports.get(decision.workerId)!, 'generate', {
        request_id: requestId,
        model: 'mock-vllm',
        token_ids: Array.from(tokens),
        dp_rank: decision.dpRank,
        stop_conditions: { max_tokens: maxTokens },
      }) as AsyncIterable<GenerateItem>;
      for await (const it of stream) items.push(it);
    } finally {
      router.free(requestId);
    }
    return { decision, items };
  }

  it('each adapter publishes ActiveLoad from its engine’s KV usage gauge', async () => {
    // Republished every 2 s even when unchanged, so a router that joined late hears it.
    await until(() => workers.every((w) => loads.has(w.instanceId)), 6000, 'a load from every adapter');
    for (const w of workers) expect(loads.get(w.instanceId)).toBeGreaterThanOrEqual(0);
  });

  it('the load rises while the engine holds a request', async () => {
    const w = workers[1];
    const stream = client.stream(transports.get(w.instanceId)!, 'generate', {
      request_id: 'r-load',
      model: 'mock-vllm',
      token_ids: Array.from(prompt(40, 7000)),
      stop_conditions: { max_tokens: 2000 },
    });
    const it = stream[Symbol.asyncIterator]();
    try {
      await it.next();
      // 40 prompt tokens alone hold 10 blocks of 4 while the request runs (the gauge is polled every 250 ms).
      await until(() => (loads.get(w.instanceId) ?? 0) >= 10, 5000, 'a load of at least 10 blocks');
    } finally {
      await it.return?.();
    }
  });

  it('generate is forwarded to the engine and streams token ids back', async () => {
    const { items } = await run('r-basic', prompt(10, 1000), 5);
    expect(items.flatMap((i) => i.token_ids)).toHaveLength(5);
    expect(items.at(-1)!.finish_reason).toBe('length');
    expect(items.slice(0, -1).every((i) => i.finish_reason === undefined)).toBe(true);
  });

  it('routes KV-aware: a shared prefix goes back to the engine that caches it; the index equals the engines’ caches', async () => {
    // 40-token prompts = 10 blocks of 4; three families, each asked twice with different tails.
    const families = [prompt(40, 1), prompt(40, 5000), prompt(40, 9000)];
    const first = new Map<number, bigint>();
    for (const [f, p] of families.entries()) {
      const { decision } = await run(`fam${f}-a`, p, 2);
      first.set(f, decision.workerId);
    }
    // Wait until the router has seen every engine event (engine → adapter → event plane → index).
    const converged = async () => {
      const dump = await index.dump();
      let total = 0;
      for (const [i, w] of workers.entries()) {
        const want = await engineBlocks(engines[i]);
        const got = indexBlocks(dump, w.instanceId);
        total += want.size;
        if (got.size !== want.size || [...want].some((h) => !got.has(h))) return false;
      }
      // Three 10-block families at least, plus the basic request's blocks.
      return total >= 30;
    };
    await until(converged, 10_000, 'the index to equal the engines’ cached blocks');
    for (const [f, p] of families.entries()) {
      const tail = Uint32Array.from([...p, 77, 78, 79, 80, 81]);
      const { decision } = await run(`fam${f}-b`, tail, 2);
      // Every 40-token prefix block (10) is cached on the first engine: 10 overlap blocks.
      expect(decision.workerId).toBe(first.get(f));
      expect(decision.overlapBlocks).toBe(10);
    }
    await until(converged, 10_000, 'the index to equal the engines’ caches after the second round');
  }, 30_000);

  it('killing an engine: its adapter fails streams with migratable codes, then deregisters and its blocks leave the index', async () => {
    const victim = 0;
    const w = workers[victim];
    const target = transports.get(w.instanceId)!;
    const items: GenerateItem[] = [];
    const stream = client.stream(target, 'generate', {
      request_id: 'r-long',
      model: 'mock-vllm',
      token_ids: Array.from(prompt(12, 300)),
      stop_conditions: { max_tokens: 2000 },
    }) as AsyncIterable<GenerateItem>;
    let midStream: unknown = null;
    try {
      for await (const it of stream) {
        items.push(it);
        if (items.length === 1) engines[victim].child.kill('SIGKILL');
      }
    } catch (e) {
      midStream = e;
    }
    expect(items.length).toBeGreaterThanOrEqual(1);
    expect(items.flatMap((i) => i.token_ids).length).toBeLessThan(2000);
    expect((midStream as { code?: string }).code).toBe('disconnected');
    expect(isMigratable(midStream)).toBe(true);

    let fresh: unknown = null;
    try {
      for await (const _ of client.stream(target, 'generate', {
        request_id: 'r-after',
        model: 'm',
        token_ids: [1, 2, 3],
      }))
        void _;
    } catch (e) {
      fresh = e;
    }
    // Either the engine is unreachable (adapter still registered) or the adapter already stopped serving.
    expect(isMigratable(fresh)).toBe(true);

    // The health monitor notices, deregisters and clears: routers drop the worker and its blocks.
    await until(() => !w.engineUp, 5000, 'the adapter to notice the dead engine');
    await until(
      async () =>
        !(await d.list(instancesPrefix(NS, 'backend', 'generate'))).some(
          (kv) => parseInstance(kv.value).instance_id === w.instanceId,
        ),
      5000,
      'deregistration',
    );
    await until(
      async () => indexBlocks(await index.dump(), w.instanceId).size === 0,
      5000,
      'the index to drop the dead engine’s blocks',
    );
    expect(indexBlocks(await index.dump(), workers[1].instanceId).size).toBeGreaterThan(0);
  }, 30_000);
});
