/**
 * All ranks' active sequences (docs/protocol.md §9, `multi_worker.rs`): request ids routed to their
 * rank, the cross-rank holder tree for prefix depths, and the flat load table read per decision.
 * Pure: `now` (ms) and random u32 draws are arguments / injected functions.
 */
import type { WorkerWithDpRank } from '@kvrouter/protocols';
import { ActiveSequences, type AddRequestInput, type SequenceOptions } from './active-sequences.js';
import type { CandidateBatch } from './cost.js';
import { HolderTree } from './holders.js';
import { RankLoads } from './rank-loads.js';
import { finite, invalid, nonNegInt, posInt } from './validate.js';

export interface RankLoad {
  active_prefill_tokens: number;
  active_decode_blocks: number;
  active_requests: number;
}

export interface MultiWorkerOptions extends SequenceOptions {
  /** Called after every change on a rank (republish `ActiveLoad`, wake the queue). */
  onChange?: (w: WorkerWithDpRank) => void;
  /** Called with each force-freed request. */
  onExpired?: (requestId: string, w: WorkerWithDpRank) => void;
}

/**
 * Every rank's `ActiveSequences`, with request ids routed to their rank. Ranks are created on
 * `addWorker` or on first booking. Expiry is per rank, so "at most every 30 s" holds per rank.
 */
export class MultiWorkerSequences {
  private readonly ranks = new Map<bigint, Map<number, ActiveSequences>>();
  private readonly owner = new Map<string, ActiveSequences>();
  private readonly opts: MultiWorkerOptions;
  /** Checks AddRequest inputs against the shared options without touching any rank. */
  private readonly planner: ActiveSequences;
  /** Prompt blocks → ranks holding them, for every rank's prefix depth in one pass. */
  private readonly holders = new HolderTree();
  private readonly loads = new RankLoads();
  private depths = new Int32Array(64);

  constructor(opts: MultiWorkerOptions) {
    this.planner = new ActiveSequences(opts);
    this.opts = opts;
  }

  /** Registers ranks `[dpStart, dpStart + dpSize)` of a worker (existing ranks are kept). */
  addWorker(workerId: bigint, dpStart = 0, dpSize = 1): void {
    if (typeof workerId !== 'bigint') throw invalid('worker_id', 'must be a bigint', workerId);
    nonNegInt('dpStart', dpStart);
    posInt('dpSize', dpSize);
    for (let r = dpStart; r < dpStart + dpSize; r++) this.ensureRank(workerId, r);
  }

  /** Forgets all ranks of a worker and their requests; returns the dropped request ids. */
  removeWorker(workerId: bigint): string[] {
    const m = this.ranks.get(workerId);
    if (!m) return [];
    const dropped: string[] = [];
    for (const seq of m.values()) this.dropRank(seq, dropped);
    this.ranks.delete(workerId);
    return dropped;
  }

  removeWorkerDpRank(workerId: bigint, dpRank: number): string[] {
    const m = this.ranks.get(workerId);
    const seq = m?.get(dpRank);
    if (!m || !seq) return [];
    const dropped: string[] = [];
    this.dropRank(seq, dropped);
    m.delete(dpRank);
    if (m.size === 0) this.ranks.delete(workerId);
    return dropped;
  }

  private dropRank(seq: ActiveSequences, dropped: string[]): void {
    if (seq.holderSlot >= 0) this.loads.gen[seq.holderSlot]++;
    seq.loads = null;
    seq.detachHolders();
    for (const id of seq.requestIds()) {
      this.owner.delete(id);
      dropped.push(id);
    }
  }

  rank(w: WorkerWithDpRank): ActiveSequences | undefined {
    return this.ranks.get(w.worker_id)?.get(w.dp_rank);
  }

  *workers(): IterableIterator<WorkerWithDpRank> {
    for (const [worker_id, m] of this.ranks)
      for (const dp_rank of m.keys()) yield { worker_id, dp_rank } as WorkerWithDpRank;
  }

  private ensureRank(workerId: bigint, dpRank: number): ActiveSequences {
    let m = this.ranks.get(workerId);
    if (!m) this.ranks.set(workerId, (m = new Map<number, ActiveSequences>()));
    let seq = m.get(dpRank);
    if (!seq) {
      seq = new ActiveSequences(this.opts);
      seq.holders = this.holders;
      seq.holderSlot = this.holders.acquireSlot();
      this.loads.ensure(this.holders.slotLimit);
      this.loads.gen[seq.holderSlot]++;
      seq.loads = this.loads;
      seq.changed();
      const w = { worker_id: workerId, dp_rank: dpRank } as WorkerWithDpRank;
      const { onChange, onExpired } = this.opts;
      seq.onExpired = (id) => {
        this.owner.delete(id);
        onExpired?.(id, w);
      };
      if (onChange) seq.onChange = () => onChange(w);
      m.set(dpRank, seq);
    }
    return seq;
  }

  /**
   * Books a request on rank `w` (created if unknown). False for a request id already booked on
   * any rank; nothing changes then.
   */
  addRequest(w: WorkerWithDpRank, input: AddRequestInput, now: number): boolean {
    nonNegInt('dp_rank', w.dp_rank);
    if (typeof w.worker_id !== 'bigint') throw invalid('worker_id', 'must be a bigint', w.worker_id);
    finite('now', now);
    const plan = this.planner.plan(input);
    if (this.owner.has(input.requestId)) return false;
    const seq = this.ensureRank(w.worker_id, w.dp_rank);
    seq.maybeExpire(now);
    seq.commit(input, plan, now);
    this.owner.set(input.requestId, seq);
    seq.changed();
    return true;
  }

  markPrefillCompleted(requestId: string, now: number): boolean {
    return this.owner.get(requestId)?.markPrefillCompleted(requestId, now) ?? false;
  }

  addOutputTokens(requestId: string, outputTokens: number, now?: number): boolean {
    return this.owner.get(requestId)?.addOutputTokens(requestId, outputTokens, now) ?? false;
  }

  free(requestId: string, now: number): boolean {
    finite('now', now);
    const seq = this.owner.get(requestId);
    if (!seq) return false;
    this.owner.delete(requestId);
    return seq.free(requestId, now);
  }

  /** The periodic timer path of §9.2 step 4 over every rank. */
  maybeExpire(now: number): string[] {
    const out: string[] = [];
    for (const m of this.ranks.values()) for (const seq of m.values()) out.push(...seq.maybeExpire(now));
    return out;
  }

  expireOlderThan(now: number, maxAgeMs: number): string[] {
    const out: string[] = [];
    for (const m of this.ranks.values())
      for (const seq of m.values()) out.push(...seq.expireOlderThan(now, maxAgeMs));
    return out;
  }

  /** Which rank holds a request, if any. */
  has(requestId: string): boolean {
    return this.owner.has(requestId);
  }

  get activeRequestCount(): number {
    return this.owner.size;
  }

  /** Load of one rank at `now`; zeros for an unknown rank. */
  load(w: WorkerWithDpRank, now: number): RankLoad {
    const seq = this.rank(w);
    return seq
      ? {
          active_prefill_tokens: seq.activePrefillTokens(now),
          active_decode_blocks: seq.activeDecodeBlocks,
          active_requests: seq.activeRequests,
        }
      : { active_prefill_tokens: 0, active_decode_blocks: 0, active_requests: 0 };
  }

  /**
   * Fills the load inputs of `batch` (prefill tokens, decode blocks, requests, prefix depth of
   * `seqPairs`) for `batch.workers[0 .. n)` at one `now`. Unknown ranks get zeros (idle).
   */
  fillLoads(batch: CandidateBatch, seqPairs: Uint32Array | null, now: number): CandidateBatch {
    const h = this.holders;
    if (this.depths.length < h.slotLimit)
      this.depths = new Int32Array(Math.max(h.slotLimit, 2 * this.depths.length));
    const depths = this.depths;
    if (seqPairs && seqPairs.length >= 2) h.prefixDepths(seqPairs, depths);
    else depths.fill(0);
    const L = this.loads;
    const gen = L.gen;
    const slots = batch.loadSlot;
    const gens = batch.loadGen;
    for (let i = 0; i < batch.n; i++) {
      let s = slots[i];
      // A (slot, gen) the caller cached from `slotOf` is trusted only while the slot still
      // belongs to that rank; otherwise look the rank up.
      if (s < 0 || s >= gen.length || gen[s] !== gens[i]) {
        const w = batch.workers[i];
        const seq = this.ranks.get(w.worker_id)?.get(w.dp_rank);
        s = seq === undefined ? -1 : seq.holderSlot;
      }
      if (s < 0) {
        batch.activePrefillTokens[i] = 0;
        batch.activeDecodeBlocks[i] = 0;
        batch.activeRequests[i] = 0;
        batch.activePrefixDepth[i] = 0;
        continue;
      }
      batch.activePrefillTokens[i] = L.prefillAt(s, now);
      batch.activeDecodeBlocks[i] = L.decode[s];
      batch.activeRequests[i] = L.requests[s];
      batch.activePrefixDepth[i] = depths[s];
    }
    return batch;
  }

  /** The rank's active prefill tokens with an unpredicted anchor decaying at `tokensPerMs` (0 if unknown). */
  prefillAtRate(w: WorkerWithDpRank, now: number, tokensPerMs: number): number {
    const seq = this.ranks.get(w.worker_id)?.get(w.dp_rank);
    return seq === undefined || seq.holderSlot < 0
      ? 0
      : this.loads.prefillAtRate(seq.holderSlot, now, tokensPerMs);
  }

  /**
   * The load slot of a rank (−1 if unknown) and its generation: a caller may cache both and put
   * them in `CandidateBatch.loadSlot` / `loadGen` so `fillLoads` skips the per-rank lookup.
   */
  slotOf(w: WorkerWithDpRank): number {
    return this.ranks.get(w.worker_id)?.get(w.dp_rank)?.holderSlot ?? -1;
  }

  slotGen(slot: number): number {
    return slot >= 0 && slot < this.loads.gen.length ? this.loads.gen[slot] : 0;
  }
}
