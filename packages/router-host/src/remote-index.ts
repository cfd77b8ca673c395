/**
 * `--use-remote-indexer` (docs/protocol.md §7.7) on a frontend: instead of a tree of its own, each
 * worker set asks the index a standalone router serves on the worker component
 * (`kv_indexer_query`), round robin over the serving instances it sees in discovery. A failure is
 * logged (at most one line per 10 s, with the count), counted in
 * `dynamo_component_router_remote_indexer_query_failures_total`, and the request routes on load
 * alone. Approximate mode (`--no-router-kv-events`) also sends each decision to
 * `kv_indexer_record_routing_decision` (failures: `..._write_failures_total`).
 */
import {
  KV_INDEXER_QUERY_ENDPOINT,
  KV_INDEXER_RECORD_ENDPOINT,
  KvrError,
  RemoteIndexerQueryCodec,
  RemoteIndexerRecordRequestCodec,
} from '@kvrouter/protocols';
import type { RouterEndpointMetrics } from '@kvrouter/metrics';
import { RemoteIndexer, type RemoteIndexerClient } from '@kvrouter/router';
import {
  watchInstances,
  type Discovery,
  type RequestClient,
  type Transport,
  type TypedWatch,
  type Instance,
} from '@kvrouter/runtime';

/** A routing decision cannot wait for the request plane's 10 s unary default. */
export const REMOTE_QUERY_TIMEOUT_MS = 1000;
const LOG_EVERY_MS = 10_000;

/** The live instances of one endpoint, in discovery order, for round-robin picks. */
class Instances {
  private readonly byId = new Map<bigint, Transport>();
  private list: Transport[] = [];
  private rr = 0;
  private readonly watch: TypedWatch<Instance>;

  constructor(discovery: Discovery, namespace: string, component: string, endpoint: string) {
    const watch = watchInstances(discovery, { namespace, component, endpoint });
    this.watch = watch;
    void (async () => {
      try {
        for await (const ch of watch) {
          if (ch.type === 'put') this.byId.set(ch.value.instance_id, ch.value.transport);
          else if (ch.type === 'delete') this.byId.delete(ch.parts.instance_id);
          else continue;
          this.list = [...this.byId.values()];
        }
      } catch {
        // Closed or failed: the list stays as it was; queries then fail and are counted.
      }
    })();
  }

  next(): Transport | null {
    const n = this.list.length;
    if (n === 0) return null;
    this.rr = (this.rr + 1) % n;
    return this.list[this.rr]!;
  }

  close(): void {
    this.watch.close();
  }
}

export interface RemoteIndexOptions {
  discovery: Discovery;
  client: RequestClient;
  namespace: string;
  component: string;
  /** The card's `display_name`: served indexes are keyed by it. */
  modelName: string;
  approximate: boolean;
  metrics: RouterEndpointMetrics;
  warn: (msg: string) => void;
  timeoutMs?: number;
}

export function createRemoteIndex(o: RemoteIndexOptions): { indexer: RemoteIndexer; close(): void } {
  const { namespace: ns, component: comp } = o;
  const queries = new Instances(o.discovery, ns, comp, KV_INDEXER_QUERY_ENDPOINT);
  const records = o.approximate ? new Instances(o.discovery, ns, comp, KV_INDEXER_RECORD_ENDPOINT) : null;
  const timeoutMs = o.timeoutMs ?? REMOTE_QUERY_TIMEOUT_MS;
  const none = (ep: string): KvrError =>
    new KvrError(
      'no_remote_indexer',
      `no ${ep} instance on ${ns}/${comp} (start a router with --serve-indexer)`,
      503,
    );
  const client: RemoteIndexerClient = {
    query: (q) => {
      const t = queries.next();
      return t
        ? o.client.unary(t, KV_INDEXER_QUERY_ENDPOINT, RemoteIndexerQueryCodec.toValue(q), { timeoutMs })
        : Promise.reject(none(KV_INDEXER_QUERY_ENDPOINT));
    },
    record: (r) => {
      const t = records?.next() ?? null;
      return t
        ? o.client.unary(t, KV_INDEXER_RECORD_ENDPOINT, RemoteIndexerRecordRequestCodec.toValue(r), {
            timeoutMs,
          })
        : Promise.reject(none(KV_INDEXER_RECORD_ENDPOINT));
    },
  };
  const throttled = (what: string) => {
    let last = -Infinity;
    let since = 0;
    return (e: unknown): void => {
      since++;
      const now = Date.now();
      if (now - last < LOG_EVERY_MS) return;
      o.warn(
        `remote indexer ${ns}/${comp}: ${what} failed (${since} since the last report), routing on load alone: ${(e as Error).message}`,
      );
      last = now;
      since = 0;
    };
  };
  const logQuery = throttled('query');
  const logWrite = throttled('routing-decision write');
  const indexer = new RemoteIndexer({
    modelName: o.modelName,
    client,
    approximate: o.approximate,
    onQueryFailure: (e) => {
      o.metrics.remoteQueryFailed();
      logQuery(e);
    },
    onWriteFailure: (e) => {
      o.metrics.remoteWriteFailed();
      logWrite(e);
    },
  });
  return {
    indexer,
    close: () => {
      queries.close();
      records?.close();
    },
  };
}
