/**
 * The local-indexer query over `@kvrouter/runtime`'s tcp request plane, with the transport found
 * in discovery, and discovery-driven worker tracking.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { instanceKey, mdcKey, workerKvIndexerQueryEndpoint } from '@kvrouter/protocols';
import { MemDiscoveryHub, TcpRequestClient, TcpRequestServer } from '@kvrouter/runtime';
import { KvEventPublisher } from './publisher/publisher.js';
import { discoveryTransportResolver, requestPlaneQueryClient, serveLocalIndexer } from './query.js';
import { watchWorkers, workerInfoFromCard } from './workers.js';
import { resolveEventPlaneKind } from './plane/create.js';
import { chain, waitFor } from './test-helpers.js';

const closers: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  for (const c of closers) await c();
});

describe('local-indexer query over the tcp request plane', () => {
  it('serves every rank and resolves the worker through discovery', async () => {
    const hub = new MemDiscoveryHub();
    const wd = hub.connect();
    const rd = hub.connect();
    const pub = new KvEventPublisher({ workerId: wd.leaseId, dpRanks: [0, 1] });
    pub.engineEvent({ dp_rank: 1, data: chain(null, [1n, 2n]) });
    const server = await TcpRequestServer.listen({ host: '127.0.0.1' });
    const client = new TcpRequestClient();
    closers.push(
      () => client.close(),
      () => server.close(),
      () => wd.close(),
      () => rd.close(),
    );
    expect(serveLocalIndexer(server, pub)).toEqual([
      workerKvIndexerQueryEndpoint(0),
      workerKvIndexerQueryEndpoint(1),
    ]);
    // Only the generate instance is registered: the resolver falls back to it.
    await wd.put(
      instanceKey('ns', 'backend', 'generate', wd.leaseId),
      JSON.stringify({ transport: server.transport }),
    );
    const q = requestPlaneQueryClient(client, { resolve: discoveryTransportResolver(rd, 'ns', 'backend') });
    const w = { worker_id: wd.leaseId, dp_rank: 1 };
    const dump = await q.query(w as never, {
      worker_id: wd.leaseId as never,
      start_event_id: null,
      end_event_id: null,
    });
    expect('TreeDump' in dump && dump.TreeDump.last_event_id).toBe(1n);
    expect('TreeDump' in dump && dump.TreeDump.events.length).toBe(2);
    const events = await q.query(w as never, {
      worker_id: wd.leaseId as never,
      start_event_id: 1n as never,
      end_event_id: null,
    });
    expect(events).toEqual({
      Events: {
        events: [
          {
            worker_id: wd.leaseId,
            storage_tier: 'device',
            event: { event_id: 1n, dp_rank: 1, data: chain(null, [1n, 2n]) },
          },
        ],
        last_event_id: 1n,
      },
    });
    // A malformed request is answered with the §3.5 catch-all.
    const raw = await client.unary(server.transport, workerKvIndexerQueryEndpoint(0), { worker_id: 'seven' });
    expect(raw).toMatchObject({ Error: expect.stringMatching(/bad query: .*worker_id/) as unknown });
    // An unknown worker cannot be resolved: the query fails (the subscriber retries it).
    await expect(
      q.query({ worker_id: 99n, dp_rank: 0 } as never, {
        worker_id: 99n as never,
        start_event_id: null,
        end_event_id: null,
      }),
    ).rejects.toThrow(/no transport known for worker 99/);
  });
});

describe('watchWorkers', () => {
  it('adds generate instances with their card ranks and removes them when they leave', async () => {
    const hub = new MemDiscoveryHub();
    const worker = hub.connect();
    const router = hub.connect();
    const calls: string[] = [];
    const subscriber = {
      addWorker: (id: bigint, o?: { dpRanks?: readonly number[]; localIndexer?: boolean }) =>
        calls.push(`add ${id} [${o?.dpRanks?.join(',')}] ${o?.localIndexer}`),
      removeWorker: (id: bigint) => calls.push(`remove ${id}`),
    };
    await worker.put(
      mdcKey('ns', 'backend', 'generate', worker.leaseId),
      JSON.stringify({
        runtime_config: { data_parallel_start_rank: 2, data_parallel_size: 2, enable_local_indexer: false },
      }),
    );
    await worker.put(instanceKey('ns', 'backend', 'generate', worker.leaseId), '{}');
    const w = watchWorkers({ discovery: router, namespace: 'ns', component: 'backend', subscriber });
    await w.synced;
    expect(await waitFor(() => calls.length === 1)).toBe(true);
    expect(calls[0]).toBe(`add ${worker.leaseId} [2,3] false`);
    await worker.close();
    expect(await waitFor(() => calls.length === 2)).toBe(true);
    expect(calls[1]).toBe(`remove ${worker.leaseId}`);
    w.close();
    await router.close();
  });

  it('reads card defaults', () => {
    expect(workerInfoFromCard(null)).toEqual({ dpRanks: [0], localIndexer: true });
    expect(workerInfoFromCard('not json')).toEqual({ dpRanks: [0], localIndexer: true });
    expect(workerInfoFromCard('{"runtime_config":{"data_parallel_size":3}}')).toEqual({
      dpRanks: [0, 1, 2],
      localIndexer: true,
    });
  });
});

describe('--event-plane auto', () => {
  it('is zmq for file/mem discovery and nats for etcd/kubernetes', () => {
    expect(resolveEventPlaneKind('auto', 'mem')).toBe('zmq');
    expect(resolveEventPlaneKind(undefined, 'file')).toBe('zmq');
    expect(resolveEventPlaneKind('auto', 'etcd')).toBe('nats');
    expect(resolveEventPlaneKind('auto', 'kubernetes')).toBe('nats');
    expect(resolveEventPlaneKind('nats', 'mem')).toBe('nats');
    expect(() => resolveEventPlaneKind('kafka' as never, 'mem')).toThrow(/event_plane/);
  });
});
