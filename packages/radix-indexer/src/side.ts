import type { RouterEvent, WorkerWithDpRank } from '@kvrouter/protocols';
import { ApproxIndexer } from './approximate.js';
import type { FindOptions, KvIndexer, OverlapScores } from './types.js';

export interface SideOptions {
  /** `--router-predicted-ttl-secs` (suggested 5). */
  ttlSecs: number;
  now: () => number;
}

/**
 * Predict-on-route (PROTOCOL §7.6): the event-driven primary index plus a TTL-only approximate
 * side index of this router's own decisions. Queries take the per-rank max of both, so siblings of
 * a burst land together before the engine's first Stored event arrives. The side index is never
 * written into the primary (engine and router hashes differ).
 */
export class SideIndexer implements KvIndexer {
  readonly side: ApproxIndexer;

  constructor(
    readonly primary: KvIndexer,
    opts: SideOptions,
  ) {
    this.side = new ApproxIndexer({
      ttlSecs: opts.ttlSecs,
      maxTreeSize: Number.MAX_SAFE_INTEGER,
      now: opts.now,
    });
  }

  recordRouting(worker: WorkerWithDpRank, local: Uint32Array, seq: Uint32Array, n?: number): void {
    this.side.recordRouting(worker, local, seq, n);
  }

  applyEvent(ev: RouterEvent): void {
    this.primary.applyEvent(ev);
  }
  removeWorker(workerId: bigint): void {
    this.primary.removeWorker(workerId);
    this.side.removeWorker(workerId);
  }
  removeWorkerDpRank(workerId: bigint, dpRank: number): void {
    this.primary.removeWorkerDpRank(workerId, dpRank);
    this.side.removeWorkerDpRank(workerId, dpRank);
  }
  flush(): Promise<void> {
    return this.primary.flush();
  }
  findMatches(local: readonly bigint[] | Uint32Array, opts?: FindOptions): OverlapScores {
    return maxMerge(this.primary.findMatches(local, opts), this.side.findMatches(local, opts));
  }
  findMatchesBySeq(seq: Uint32Array, opts?: FindOptions): OverlapScores {
    return maxMerge(this.primary.findMatchesBySeq(seq, opts), this.side.findMatchesBySeq(seq, opts));
  }
  /** Dumps and tree sizes describe the primary (the side index is local and never served). */
  dump(): Promise<RouterEvent[]> {
    return this.primary.dump();
  }
  treeSizes(): Map<string, number> {
    return this.primary.treeSizes();
  }
  appliedCounts(): Map<string, number> {
    return this.primary.appliedCounts();
  }
  async close(): Promise<void> {
    await this.primary.close();
    await this.side.close();
  }
}

/** Per-rank max of two score sets (primary's tree sizes kept). */
export function maxMerge(a: OverlapScores, b: OverlapScores): OverlapScores {
  if (b.scores.size === 0) return a;
  const scores = new Map(a.scores);
  const workers = new Map(a.workers);
  for (const [k, v] of b.scores) {
    if (v > (scores.get(k) ?? 0)) scores.set(k, v);
    if (!workers.has(k)) workers.set(k, b.workers.get(k)!);
  }
  return { scores, treeSizes: a.treeSizes, frequencies: a.frequencies, workers };
}
