/**
 * `--serve-indexer` (docs/protocol.md §7.7): this router's index answers other routers over the request
 * plane. `kv_indexer_query` `{model_name, block_hashes}` → `{"Scores": WireOverlapScores}` or
 * `{"Error": str}`; in approximate mode `kv_indexer_record_routing_decision` `{model_name, worker,
 * local_hashes, sequence_hashes}` → `"Recorded"` or `{"Error": str}`. Bindings are keyed by model
 * name. Every failure is an `{"Error"}` reply (never a transport error), so the caller can tell "the
 * index said no" from "the index is unreachable".
 *
 * Shared by the standalone router and the frontend (`--serve-indexer` on either): `ServedIndexer`
 * (the handlers), `checkServedIndexRules` (the §7.7 mixing rules, before anything is registered) and
 * `serveIndexEndpoints` (handlers on a request-plane server + their discovery instances).
 */
import {
  KV_INDEXER_QUERY_ENDPOINT,
  KV_INDEXER_RECORD_ENDPOINT,
  KvrError,
  instancesPrefix,
  parseDiscoveryKey,
  u64ToHex,
  RemoteIndexerQueryCodec,
  RemoteIndexerQueryResponseCodec,
  RemoteIndexerRecordRequestCodec,
  RemoteIndexerRecordResponseCodec,
  u64sToPairs,
} from '@kvrouter/protocols';
import type { KvIndexer } from '@kvrouter/radix-indexer';
import { overlapScoresToWire, type RoutingRecorder } from '@kvrouter/router';
import { registerInstance, type Discovery, type RequestServer } from '@kvrouter/runtime';

type Served = KvIndexer & Partial<RoutingRecorder>;

const message = (e: unknown): string => (e instanceof Error ? e.message : String(e));

export class ServedIndexer {
  private readonly byModel = new Map<string, Served>();

  constructor(readonly approximate: boolean) {}

  bind(modelName: string, index: Served): void {
    this.byModel.set(modelName, index);
  }

  unbind(modelName: string): void {
    this.byModel.delete(modelName);
  }

  get models(): string[] {
    return [...this.byModel.keys()].sort();
  }

  private lookup(model: string): Served | string {
    const ix = this.byModel.get(model);
    return (
      ix ??
      `no index is served for model ${JSON.stringify(model)} (serving: ${this.models.map((m) => JSON.stringify(m)).join(', ') || 'none yet'})`
    );
  }

  /** The `kv_indexer_query` handler body: a plain value tree ready for the request plane. */
  query(payload: unknown): unknown {
    let reply: Parameters<typeof RemoteIndexerQueryResponseCodec.toValue>[0];
    try {
      const q = RemoteIndexerQueryCodec.fromValue(payload);
      const ix = this.lookup(q.model_name);
      reply =
        typeof ix === 'string'
          ? { Error: ix }
          : { Scores: overlapScoresToWire(ix.findMatches(q.block_hashes)) };
    } catch (e) {
      reply = { Error: message(e) };
    }
    return RemoteIndexerQueryResponseCodec.toValue(reply);
  }

  /** The `kv_indexer_record_routing_decision` handler body (approximate mode only). */
  record(payload: unknown): unknown {
    let reply: Parameters<typeof RemoteIndexerRecordResponseCodec.toValue>[0];
    try {
      const r = RemoteIndexerRecordRequestCodec.fromValue(payload);
      const ix = this.lookup(r.model_name);
      if (typeof ix === 'string') reply = { Error: ix };
      else if (!this.approximate || typeof ix.recordRouting !== 'function')
        reply = { Error: 'this router serves an event-driven index; routing decisions are not recorded' };
      else {
        ix.recordRouting(r.worker, u64sToPairs(r.local_hashes), u64sToPairs(r.sequence_hashes));
        reply = 'Recorded';
      }
    } catch (e) {
      reply = { Error: message(e) };
    }
    return RemoteIndexerRecordResponseCodec.toValue(reply);
  }
}

/**
 * §7.7: event-driven and approximate served indexes cannot be mixed on one component, and an
 * approximate one must be the only serving instance (its records would otherwise split). Throws
 * `config_error` naming `serve-indexer`; `selfId` (this process's lease) is not counted.
 */
export async function checkServedIndexRules(
  discovery: Discovery,
  path: { namespace: string; component: string },
  selfId: bigint,
  approximate: boolean,
): Promise<void> {
  const { namespace: ns, component: comp } = path;
  const others = async (ep: string): Promise<string[]> =>
    (await discovery.list(instancesPrefix(ns, comp, ep)))
      .map((e) => parseDiscoveryKey(e.key))
      .filter((k) => k !== null && k.instance_id !== selfId)
      .map((k) => u64ToHex(k!.instance_id));
  const queries = await others(KV_INDEXER_QUERY_ENDPOINT);
  const records = await others(KV_INDEXER_RECORD_ENDPOINT);
  if (approximate && queries.length > 0)
    throw new KvrError(
      'config_error',
      `--serve-indexer in approximate mode needs to be the only serving instance on ${ns}/${comp}; ${queries.join(', ')} already serve${queries.length === 1 ? 's' : ''} ${KV_INDEXER_QUERY_ENDPOINT}`,
      400,
      { field: 'serve-indexer' },
    );
  if (!approximate && records.length > 0)
    throw new KvrError(
      'config_error',
      `--serve-indexer: ${ns}/${comp} already has an approximate served index (${records.join(', ')}); event-driven and approximate served indexes cannot be mixed`,
      400,
      { field: 'serve-indexer' },
    );
}

/** Serves `served`'s handlers on `server` (once per server). */
export function serveIndexHandlers(server: RequestServer, served: ServedIndexer): void {
  server.serve(KV_INDEXER_QUERY_ENDPOINT, (p) => Promise.resolve(served.query(p)));
  if (served.approximate) server.serve(KV_INDEXER_RECORD_ENDPOINT, (p) => Promise.resolve(served.record(p)));
}

/**
 * Registers the served-index instances on the worker component `path` (`kv_indexer_query`, and
 * `kv_indexer_record_routing_decision` in approximate mode) for `server`'s transport, where
 * `--use-remote-indexer` routers look for them. Returns the unregister functions.
 */
export async function registerServedIndex(
  discovery: Discovery,
  path: { namespace: string; component: string },
  server: RequestServer,
  approximate: boolean,
): Promise<Array<() => Promise<void>>> {
  const out: Array<() => Promise<void>> = [];
  for (const endpoint of approximate
    ? [KV_INDEXER_QUERY_ENDPOINT, KV_INDEXER_RECORD_ENDPOINT]
    : [KV_INDEXER_QUERY_ENDPOINT]) {
    const r = await registerInstance(discovery, { ...path, endpoint, transport: server.transport });
    out.push(() => r.unregister());
  }
  return out;
}
