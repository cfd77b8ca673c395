/**
 * `--use-remote-indexer` (docs/protocol.md §7.7): the router keeps no index of its own and asks an index
 * served by another router (`--serve-indexer`) on the worker component. The router's scoring path
 * is synchronous (the admission gate must see every previous booking), so the remote round trip
 * happens before it: given as the router's `deps.indexer`, `RemoteIndexer` is a prefetching overlap
 * source — `KvRouter.route` hashes the prompt, awaits `prefetch` (the remote scores are parked
 * here), and the synchronous `findMatchesBySeq` then hands them to the gate.
 * A failed query is reported once and routes on load alone (empty overlap), as §7.7 requires.
 *
 * Kind core: the transport is injected (`RemoteIndexerClient`); the app picks the serving instance.
 */
import {
  KvrError,
  invalidArgument,
  RemoteIndexerQueryResponseCodec,
  RemoteIndexerRecordResponseCodec,
  computeSequenceHashes,
  pairsToU64s,
  workerKey,
  type LocalBlockHash,
  type RemoteIndexerQuery,
  type RemoteIndexerRecordRequest,
  type RouterEvent,
  type SequenceHash,
  type WireOverlapScores,
  type WorkerWithDpRank,
} from '@kvrouter/protocols';
import type { KvIndexer, OverlapScores } from '@kvrouter/radix-indexer';
import type { PrefetchingIndexer, RoutingRecorder } from './types.js';

/** One call to one serving instance; resolves with the reply payload as received. */
export interface RemoteIndexerClient {
  query(q: RemoteIndexerQuery): Promise<unknown>;
  record(r: RemoteIndexerRecordRequest): Promise<unknown>;
}

export interface RemoteIndexerOptions {
  /** `model_name` of every query and record (the card's `display_name`; bindings are keyed by it). */
  modelName: string;
  client: RemoteIndexerClient;
  /** Approximate mode (`--no-router-kv-events`): routing decisions are sent as records too. */
  approximate?: boolean;
  /** A query failed (transport or `{"Error"}` reply); the request routes with empty overlap. */
  onQueryFailure?: (err: unknown) => void;
  /** A record write failed (approximate mode). */
  onWriteFailure?: (err: unknown) => void;
  /** Remembered query results (default 4096); also what an overlap refresh at dequeue reads. */
  cacheEntries?: number;
}

const EMPTY_SCORES = (): OverlapScores => ({
  scores: new Map(),
  treeSizes: new Map(),
  frequencies: [],
  workers: new Map(),
});

/** Sequence hashes commit to the whole prefix, so (block count, last sequence hash) names a query. */
function queryKey(seq: Uint32Array): string {
  const n = seq.length;
  return n === 0 ? '' : `${n >>> 1}:${seq[n - 2]}:${seq[n - 1]}`;
}

/** `WireOverlapScores` (lists of pairs) → the index's map form. */
export function overlapScoresFromWire(w: WireOverlapScores): OverlapScores {
  const out = EMPTY_SCORES();
  for (const [worker, n] of w.scores) {
    const k = workerKey(worker);
    out.workers.set(k, worker);
    // §7.1: workers with score 0 are absent.
    if (n > 0) out.scores.set(k, n);
  }
  for (const [worker, n] of w.tree_sizes) {
    const k = workerKey(worker);
    out.workers.set(k, worker);
    out.treeSizes.set(k, n);
  }
  out.frequencies = [...w.frequencies];
  return out;
}

/** The index's map form → `WireOverlapScores` (what a serving router answers). */
export function overlapScoresToWire(o: OverlapScores): WireOverlapScores {
  const worker = (k: string): WorkerWithDpRank => {
    const w = o.workers.get(k);
    if (w) return w;
    const i = k.lastIndexOf(':');
    return { worker_id: BigInt(k.slice(0, i)), dp_rank: Number(k.slice(i + 1)) } as WorkerWithDpRank;
  };
  return {
    scores: [...o.scores].map(([k, n]) => [worker(k), n]),
    frequencies: [...o.frequencies],
    tree_sizes: [...o.treeSizes].map(([k, n]) => [worker(k), n]),
  };
}

export class RemoteIndexer implements KvIndexer, RoutingRecorder, PrefetchingIndexer {
  private readonly results = new Map<string, OverlapScores>();
  private readonly cap: number;
  private queries = 0;
  private failures = 0;
  private writeFailures = 0;

  constructor(private readonly o: RemoteIndexerOptions) {
    if (!o || typeof o.modelName !== 'string' || o.modelName.length === 0)
      throw invalidArgument('modelName', 'must be a non-empty string');
    if (!o.client || typeof o.client.query !== 'function')
      throw invalidArgument('client', 'must provide query()');
    const cap = o.cacheEntries ?? 4096;
    if (!Number.isSafeInteger(cap) || cap < 1)
      throw invalidArgument('cacheEntries', 'must be an integer >= 1', cap);
    this.cap = cap;
  }

  get stats(): { queries: number; failures: number; writeFailures: number } {
    return { queries: this.queries, failures: this.failures, writeFailures: this.writeFailures };
  }

  /**
   * Asks the remote index for these local hashes (pairs) and keeps the answer for the synchronous
   * lookup that follows. Never rejects: a failure is reported and leaves no answer (empty overlap).
   */
  async prefetch(local: Uint32Array): Promise<void> {
    const seq = computeSequenceHashes(local);
    const key = queryKey(seq);
    if (key === '') return;
    this.queries++;
    try {
      const reply = RemoteIndexerQueryResponseCodec.fromValue(
        await this.o.client.query({
          model_name: this.o.modelName,
          block_hashes: pairsToU64s(local) as LocalBlockHash[],
        }),
      );
      if ('Error' in reply) throw new KvrError('remote_indexer_error', `remote indexer: ${reply.Error}`, 503);
      this.results.delete(key);
      if (this.results.size >= this.cap) this.results.delete(this.results.keys().next().value!);
      this.results.set(key, overlapScoresFromWire(reply.Scores));
    } catch (e) {
      // A stale answer for the same prompt would hide the failure; §7.7 says route on load alone.
      this.results.delete(key);
      this.failures++;
      this.o.onQueryFailure?.(e);
    }
  }

  findMatchesBySeq(seq: Uint32Array): OverlapScores {
    return this.results.get(queryKey(seq)) ?? EMPTY_SCORES();
  }

  findMatches(local: readonly bigint[] | Uint32Array): OverlapScores {
    if (local instanceof Uint32Array) return this.findMatchesBySeq(computeSequenceHashes(local));
    const pairs = new Uint32Array(2 * local.length);
    for (let i = 0; i < local.length; i++) {
      pairs[2 * i] = Number(local[i]! & 0xffffffffn);
      pairs[2 * i + 1] = Number(local[i]! >> 32n);
    }
    return this.findMatchesBySeq(computeSequenceHashes(pairs));
  }

  /** Approximate mode: the decision goes to the serving index; event mode: the engines' events feed it. */
  recordRouting(worker: WorkerWithDpRank, local: Uint32Array, seq: Uint32Array, n?: number): void {
    if (!this.o.approximate) return;
    const blocks = n ?? local.length >>> 1;
    const req: RemoteIndexerRecordRequest = {
      model_name: this.o.modelName,
      worker,
      local_hashes: pairsToU64s(local.subarray(0, 2 * blocks)) as LocalBlockHash[],
      sequence_hashes: pairsToU64s(seq.subarray(0, 2 * blocks)) as SequenceHash[],
    };
    const failed = (e: unknown): void => {
      this.writeFailures++;
      this.o.onWriteFailure?.(e);
    };
    let sent: Promise<unknown>;
    try {
      sent = this.o.client.record(req);
    } catch (e) {
      failed(e);
      return;
    }
    sent
      .then((r) => {
        const reply = RemoteIndexerRecordResponseCodec.fromValue(r);
        if (reply !== 'Recorded')
          throw new KvrError('remote_indexer_error', `remote indexer: ${reply.Error}`, 503);
      })
      .catch(failed);
  }

  // The serving router's own subscriber feeds its index; here nothing is kept but query answers.
  applyEvent(_event: RouterEvent): void {}
  removeWorker(_workerId: bigint): void {}
  removeWorkerDpRank(_workerId: bigint, _dpRank: number): void {}
  flush(): Promise<void> {
    return Promise.resolve();
  }
  dump(): Promise<RouterEvent[]> {
    return Promise.resolve([]);
  }
  treeSizes(): Map<string, number> {
    return new Map();
  }
  appliedCounts(): Map<string, number> {
    return new Map();
  }
  close(): Promise<void> {
    this.results.clear();
    return Promise.resolve();
  }
}
