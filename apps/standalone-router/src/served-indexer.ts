/**
 * `--serve-indexer` (docs/protocol.md §7.7): this router's index answers other routers over the request
 * plane. `kv_indexer_query` `{model_name, block_hashes}` → `{"Scores": WireOverlapScores}` or
 * `{"Error": str}`; in approximate mode `kv_indexer_record_routing_decision` `{model_name, worker,
 * local_hashes, sequence_hashes}` → `"Recorded"` or `{"Error": str}`. Bindings are keyed by model
 * name. Every failure is an `{"Error"}` reply (never a transport error), so the caller can tell "the
 * index said no" from "the index is unreachable".
 */
import {
  RemoteIndexerQueryCodec,
  RemoteIndexerQueryResponseCodec,
  RemoteIndexerRecordRequestCodec,
  RemoteIndexerRecordResponseCodec,
  u64sToPairs,
} from '@kvrouter/protocols';
import type { KvIndexer } from '@kvrouter/radix-indexer';
import { overlapScoresToWire, type RoutingRecorder } from '@kvrouter/router';

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
