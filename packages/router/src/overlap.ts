/**
 * Overlap source: the prompt's hashes and its per-rank overlap (§7.6: max of the primary and the
 * side index), and what the indexes learn from this router's decisions (§7.5, §7.6). The primary
 * may be local (event-fed, approximate, the pool) or remote (§7.7): an index with `prefetch` is
 * asked before the synchronous gate, and its synchronous lookup then reads the parked answer.
 */
import {
  KvrError,
  computeLocalBlockHashes,
  computeSequenceHashes,
  type WorkerWithDpRank,
} from '@kvrouter/protocols';
import { ApproxIndexer, MAX_BLOCKS_PER_WORKER, type KvIndexer } from '@kvrouter/radix-indexer';
import { HashChains } from './hash-chains.js';
import type { Pending } from './intent.js';
import type { ResolvedOptions } from './options.js';
import type { PrefetchingIndexer, RouteRequest, RouterDeps, RoutingRecorder } from './types.js';

type Primary = NonNullable<RouterDeps['indexer']>;

export class OverlapSource {
  private readonly primary: Primary | null;
  private readonly side: (KvIndexer & RoutingRecorder) | null;
  /** The primary when it answers asynchronously (remote index). */
  private readonly prefetcher: PrefetchingIndexer | null;
  private recordPrimary = true;
  /** The last `find` with a side index: both answers (for `predictedOnly`). */
  private last: { seq: Uint32Array; primary: Map<string, number> | null; side: Map<string, number> } | null =
    null;
  private localBuf = new Uint32Array(2048);
  private seqBuf = new Uint32Array(2048);
  /** Earlier turns' hashes, for prompts whose tokens name the prefix they extend (`tokensPrefix`). */
  readonly chains = new HashChains();

  constructor(
    private readonly o: ResolvedOptions,
    private readonly report: (e: unknown, context: string) => void,
  ) {
    const deps = o.deps;
    const clock = o.clock;
    this.primary = deps.indexer ?? null;
    const pttl = o.predictedTtlSecs;
    this.side =
      deps.sideIndexer ??
      (pttl != null
        ? // Bounded (issue 17): TTL first; the size bound only stops a flood (docs/memory.md).
          new ApproxIndexer({ ttlSecs: pttl, maxTreeSize: MAX_BLOCKS_PER_WORKER, now: () => clock.now() })
        : null);
    const p = this.primary as Partial<PrefetchingIndexer> | null;
    this.prefetcher = p && typeof p.prefetch === 'function' ? (p as PrefetchingIndexer) : null;
  }

  /** The primary answers asynchronously: `prefetch` must run before the gate. */
  get remote(): boolean {
    return this.prefetcher !== null;
  }

  /**
   * Remote index (§7.7): hashes the raw request exactly as `hashAndMatch` will and awaits the
   * remote answer. Bad hashing input is left for preparation to reject with its own error.
   */
  async prefetch(req: RouteRequest): Promise<void> {
    const tokens = req?.tokens ?? req?.nvext?.token_data;
    const bs = this.o.blockSize;
    if (!(tokens instanceof Uint32Array) || tokens.length < bs) return;
    let local: Uint32Array | null = null;
    try {
      const eagle = this.o.isEagle;
      const hashOpts =
        req.loraName || req.mmHashes || eagle
          ? { loraName: req.loraName, mmHashes: req.mmHashes, isEagle: eagle }
          : undefined;
      local = computeLocalBlockHashes(tokens, bs, hashOpts);
    } catch {
      // Bad hashing input: the router rejects it with its own error naming the field.
    }
    if (local && local.length > 0) await this.prefetcher!.prefetch(local);
  }

  /** Tokens → local hashes → sequence hashes → findMatches (primary, side), with phase timings. */
  hashAndMatch(p: Pending, req: RouteRequest): void {
    const bs = this.o.blockSize;
    const hr = this.o.hr;
    const prompt = p.prompt;
    const it = p.intent;
    const need = 2 * Math.ceil((it.tokens.length + 1) / bs);
    if (this.localBuf.length < need) {
      this.localBuf = new Uint32Array(need * 2);
      this.seqBuf = new Uint32Array(need * 2);
    }
    const eagle = this.o.isEagle;
    const opts =
      it.loraName || req.mmHashes || eagle
        ? { loraName: it.loraName, mmHashes: req.mmHashes, isEagle: eagle }
        : undefined;
    let t1: number;
    const named = it.prefix;
    if (named !== null && opts === undefined && bs > 0) {
      // An earlier turn's chain: only the blocks after it are hashed (local and sequence in one
      // pass, so the `seq` phase reads ~0), then this prompt's chain is kept for the next turn.
      const n = this.chains.hash(named, it.tokens, bs, this.localBuf, this.seqBuf);
      prompt.local = this.localBuf.subarray(0, 2 * n);
      prompt.seq = this.seqBuf.subarray(0, 2 * n);
      t1 = hr();
    } else {
      prompt.local = computeLocalBlockHashes(it.tokens, bs, opts, this.localBuf);
      t1 = hr();
      prompt.seq = computeSequenceHashes(prompt.local, this.seqBuf);
    }
    const t2 = hr();
    try {
      prompt.scores = this.find(prompt.seq);
    } catch (e) {
      // As with a failing remote index (§7.7): route with empty overlaps rather than fail the request.
      prompt.scores = null;
      this.report(e, 'findMatches');
    }
    const t3 = hr();
    const times = p.times;
    times.hash = t1 - times.start;
    times.seq = t2 - t1;
    times.find = t3 - t2;
  }

  /** Per-rank overlap (§7.6: max of primary and side); null when no index is configured. */
  find(seq: Uint32Array): Map<string, number> | null {
    const a = this.primary ? this.primary.findMatchesBySeq(seq).scores : null;
    if (!this.side) return a;
    const b = this.side.findMatchesBySeq(seq).scores;
    this.last = { seq, primary: a, side: b };
    if (!a || a.size === 0) return b;
    if (b.size === 0) return a;
    const m = new Map(a);
    for (const [k, v] of b) if (v > (m.get(k) ?? 0)) m.set(k, v);
    return m;
  }

  /**
   * Per rank, the blocks of `seq` only the side index predicts (side − primary, when > 0): routed
   * there by this router and not yet reported stored. Reuses the last `find` of the same hashes.
   * Null without a side index.
   */
  predictedOnly(seq: Uint32Array): Map<string, number> | null {
    if (!this.side) return null;
    let l = this.last;
    if (l === null || l.seq !== seq) {
      this.find(seq);
      l = this.last!;
    }
    const out = new Map<string, number>();
    l.side.forEach((v, k) => {
      const d = v - (l.primary?.get(k) ?? 0);
      if (d > 0) out.set(k, d);
    });
    return out;
  }

  /** §7.5 / §7.6: approximate and side indexes learn from a booked decision. */
  record(w: WorkerWithDpRank, p: Pending): void {
    const { local, seq } = p.prompt;
    const n = local.length >> 1;
    if (n === 0) return;
    try {
      if (this.recordPrimary) this.primary?.recordRouting?.(w, local, seq, n);
    } catch (e) {
      // An event-fed pool has the method but refuses (`not_approximate`): stop asking. Building and
      // catching that error cost ~20 µs per decision.
      if (e instanceof KvrError && e.code === 'not_approximate') this.recordPrimary = false;
      // The request is booked and will be dispatched; a prediction that failed is only a lost hint.
      else this.report(e, 'recordRouting');
    }
    try {
      this.side?.recordRouting(w, local, seq, n);
    } catch (e) {
      this.report(e, 'recordRouting');
    }
  }

  removeWorker(id: bigint): void {
    this.primary?.removeWorker(id);
    this.side?.removeWorker(id);
  }

  removeWorkerDpRank(id: bigint, rank: number): void {
    this.primary?.removeWorkerDpRank(id, rank);
    this.side?.removeWorkerDpRank(id, rank);
  }
}
