/**
 * The local-indexer query path (§3.5) between the router-side subscriber and worker publishers.
 * `QueryClient` is all the subscriber needs; implementations: in-process (tests, embedded workers)
 * and over `@kvrouter/runtime`'s request plane (tcp / nats), endpoint `worker_kv_indexer_query_dp{r}`.
 */
import {
  DecodeError,
  KvrError,
  LocalIndexerQueryRequestCodec,
  LocalIndexerQueryResponseCodec,
  instanceKey,
  workerKvIndexerQueryEndpoint,
  type LocalIndexerQueryRequest,
  type LocalIndexerQueryResponse,
  type WorkerWithDpRank,
  errorMessage,
} from '@kvrouter/protocols';
import type { Discovery, RequestClient, RequestServer, Transport } from '@kvrouter/runtime';

import type { KvEventPublisher } from './publisher/publisher.js';

export interface QueryClient {
  /** Rejects on transport failure; a worker-side refusal is an `{Error}` response. */
  query(
    worker: WorkerWithDpRank,
    req: LocalIndexerQueryRequest,
    signal?: AbortSignal,
  ): Promise<LocalIndexerQueryResponse>;
}

/** The part of a request-plane server used to serve the query endpoints. */
export type QueryServer = Pick<RequestServer, 'serve' | 'unserve'>;

// ---------------------------------------------------------------------------------------------------
// In-process

/** Publishers of this process by worker id; queries go straight to `handleQuery`. */
export class InprocQueryHub implements QueryClient {
  private readonly publishers = new Map<bigint, KvEventPublisher>();

  register(p: KvEventPublisher): void {
    this.publishers.set(p.workerId, p);
  }

  unregister(p: KvEventPublisher): void {
    if (this.publishers.get(p.workerId) === p) this.publishers.delete(p.workerId);
  }

  query(worker: WorkerWithDpRank, req: LocalIndexerQueryRequest): Promise<LocalIndexerQueryResponse> {
    const p = this.publishers.get(worker.worker_id);
    if (!p)
      return Promise.reject(new KvrError('cannot_connect', `no in-process worker ${worker.worker_id}`, 503));
    // Through the wire codecs, so this path checks the same shapes a network hop would.
    const wireReq = LocalIndexerQueryRequestCodec.fromValue(LocalIndexerQueryRequestCodec.toValue(req));
    const res = p.handleQuery(worker.dp_rank, wireReq);
    return Promise.resolve(
      LocalIndexerQueryResponseCodec.fromValue(LocalIndexerQueryResponseCodec.toValue(res)),
    );
  }
}

// ---------------------------------------------------------------------------------------------------
// Request plane

/**
 * Serves `worker_kv_indexer_query_dp{r}` for each of the publisher's ranks. A malformed request is
 * answered `{Error}` (the §3.5 catch-all) rather than failing the stream.
 */
export function serveLocalIndexer(
  server: QueryServer,
  publisher: KvEventPublisher,
  dpRanks = publisher.dpRanks,
): string[] {
  const endpoints: string[] = [];
  for (const rank of dpRanks) {
    const ep = workerKvIndexerQueryEndpoint(rank);
    server.serve(ep, (payload: unknown) => {
      let res: LocalIndexerQueryResponse;
      try {
        res = publisher.handleQuery(rank, LocalIndexerQueryRequestCodec.fromValue(payload));
      } catch (e) {
        res = { Error: e instanceof DecodeError ? `bad query: ${e.message}` : errorMessage(e) };
      }
      return Promise.resolve(LocalIndexerQueryResponseCodec.toValue(res));
    });
    endpoints.push(ep);
  }
  return endpoints;
}

export interface RequestPlaneQueryOptions {
  /** Where a worker's query endpoint listens; null = unknown (the query fails, and is retried). */
  resolve: (worker: WorkerWithDpRank, endpoint: string) => Transport | null | Promise<Transport | null>;
  /** Per query; default 10 000 ms (the request plane's unary timeout). */
  timeoutMs?: number;
}

export function requestPlaneQueryClient(
  client: Pick<RequestClient, 'unary'>,
  opts: RequestPlaneQueryOptions,
): QueryClient {
  return {
    async query(worker, req, signal) {
      const ep = workerKvIndexerQueryEndpoint(worker.dp_rank);
      const target = await opts.resolve(worker, ep);
      if (!target)
        throw new KvrError(
          'cannot_connect',
          `no transport known for worker ${worker.worker_id} endpoint ${ep}`,
          503,
        );
      const reply = await client.unary(target, ep, LocalIndexerQueryRequestCodec.toValue(req), {
        timeoutMs: opts.timeoutMs ?? 10_000,
        signal,
      });
      return LocalIndexerQueryResponseCodec.fromValue(reply);
    },
  };
}

/**
 * Resolves a worker's query transport from its discovery instance
 * `v1/instances/{ns}/{comp}/worker_kv_indexer_query_dp{r}/{id}`, falling back to its `generate`
 * instance (one request-plane server usually serves every endpoint of a worker).
 */
export function discoveryTransportResolver(
  discovery: Pick<Discovery, 'get'>,
  namespace: string,
  component: string,
): RequestPlaneQueryOptions['resolve'] {
  return async (worker, endpoint) => {
    for (const ep of [endpoint, 'generate']) {
      const v = await discovery.get(instanceKey(namespace, component, ep, worker.worker_id));
      if (v === null) continue;
      try {
        const t = (JSON.parse(v) as { transport?: unknown }).transport;
        if (t && typeof t === 'object') return t as Transport;
      } catch {
        // A foreign or broken instance record: try the next one.
      }
    }
    return null;
  };
}
