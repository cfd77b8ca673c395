import type { RouterEvent, WorkerWithDpRank } from '@kvrouter/protocols';
import { RadixIndexer, type RadixIndexerOptions } from './indexer.js';
import { EXT_WORDS } from './layout.js';
import type { FindOptions, KvIndexer, OverlapScores } from './types.js';

export interface ApproxOptions extends RadixIndexerOptions {
  /** Block lifetime after its last recording, seconds (`--router-ttl-secs`, default 120). */
  ttlSecs?: number;
  /** Σ_w |Held[w]| above which the oldest entries are pruned (`--router-max-tree-size`, 2^20). */
  maxTreeSize?: number;
  /** Prune down to maxTreeSize × this (`--router-prune-target-ratio`, 0.8). */
  pruneTargetRatio?: number;
  /** Clock in ms (injected: this package does no I/O and reads no wall clock). */
  now: () => number;
}

/**
 * Approximate mode (PROTOCOL §7.5): no KV events; the router records its own decisions as Stored
 * chains (`block_hash = seq[i]`, parent null) and forgets them after a TTL, or earlier when the
 * index outgrows its size budget (oldest expiry first, deeper positions first among ties).
 *
 * Timers live in a typed min-heap keyed by (expiry, -position); the current expiry of a
 * (rank, block) is kept beside its external-hash entry, so refreshed or removed blocks leave stale
 * heap entries that are skipped when popped. The heap is rebuilt when it holds more than 50x the
 * live timers.
 */
export class ApproxIndexer implements KvIndexer {
  readonly inner: RadixIndexer;
  private readonly ttlMs: number;
  private readonly maxTreeSize: number;
  private readonly target: number;
  private readonly now: () => number;
  // Heap columns.
  private hExp = new Float64Array(1024);
  private hPos = new Int32Array(1024);
  private hSlot = new Int32Array(1024);
  private hLo = new Int32Array(1024);
  private hHi = new Int32Array(1024);
  private hSize = 0;

  constructor(opts: ApproxOptions) {
    this.inner = new RadixIndexer({ ...opts, extAux: true });
    this.ttlMs = (opts.ttlSecs ?? 120) * 1000;
    this.maxTreeSize = opts.maxTreeSize ?? 1 << 20;
    this.target = Math.floor(this.maxTreeSize * (opts.pruneTargetRatio ?? 0.8));
    this.now = opts.now;
  }

  /**
   * Records a routing decision: the prompt's blocks as a root chain on `worker`. `local` and `seq`
   * are (lo, hi) pairs of the prompt's local and sequence hashes.
   */
  recordRouting(worker: WorkerWithDpRank, local: Uint32Array, seq: Uint32Array, n = local.length >> 1): void {
    const now = this.now();
    this.expire(now);
    const ix = this.inner;
    ix.applyStoredPairs(worker.worker_id, worker.dp_rank, null, seq, local, n);
    const slot = ix.slotOf(worker.worker_id, worker.dp_rank);
    const expiry = now + this.ttlMs;
    const xt = ix.ext.of(slot);
    for (let i = 0; i < n; i++) {
      const off = xt.find(seq[2 * i]!, seq[2 * i + 1]!);
      xt.aux![off / EXT_WORDS] = expiry;
      this.push(expiry, i, slot, seq[2 * i] | 0, seq[2 * i + 1] | 0);
    }
    if (ix.totalPairs() > this.maxTreeSize) this.prune(this.target);
    if (this.hSize > 64 && this.hSize > 50 * ix.ext.size) this.rebuildHeap();
  }

  /** Removes every block whose expiry is <= now; returns how many. */
  expire(now = this.now()): number {
    let n = 0;
    while (this.hSize > 0 && this.hExp[0] <= now) if (this.popAndRemove()) n++;
    return n;
  }

  private prune(target: number): void {
    while (this.hSize > 0 && this.inner.totalPairs() > target) this.popAndRemove();
  }

  /** Pops the heap top; removes its block if the entry is current. */
  private popAndRemove(): boolean {
    const exp = this.hExp[0];
    const slot = this.hSlot[0];
    const lo = this.hLo[0];
    const hi = this.hHi[0];
    this.popTop();
    const ix = this.inner;
    const xt = ix.ext.get(slot);
    const off = xt ? xt.find(lo, hi) : -1;
    if (off < 0 || xt!.aux![off / EXT_WORDS] !== exp) return false; // refreshed or gone
    return ix.removeExt(slot, lo, hi);
  }

  // ---- heap on (expiry asc, position desc) ------------------------------------------------------

  private less(a: number, b: number): boolean {
    const ea = this.hExp[a];
    const eb = this.hExp[b];
    return ea < eb || (ea === eb && this.hPos[a] > this.hPos[b]);
  }

  private swap(a: number, b: number): void {
    const e = this.hExp[a];
    this.hExp[a] = this.hExp[b]!;
    this.hExp[b] = e;
    for (const col of [this.hPos, this.hSlot, this.hLo, this.hHi]) {
      const t = col[a];
      col[a] = col[b]!;
      col[b] = t;
    }
  }

  private push(exp: number, pos: number, slot: number, lo: number, hi: number): void {
    if (this.hSize === this.hExp.length) this.growHeap();
    let i = this.hSize++;
    this.hExp[i] = exp;
    this.hPos[i] = pos;
    this.hSlot[i] = slot;
    this.hLo[i] = lo;
    this.hHi[i] = hi;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.less(i, p)) break;
      this.swap(i, p);
      i = p;
    }
  }

  private popTop(): void {
    const last = --this.hSize;
    if (last > 0) this.swap(0, last);
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < this.hSize && this.less(l, m)) m = l;
      if (r < this.hSize && this.less(r, m)) m = r;
      if (m === i) break;
      this.swap(i, m);
      i = m;
    }
  }

  private growHeap(): void {
    const n = this.hExp.length * 2;
    const g = <T extends Float64Array | Int32Array>(a: T, mk: (n: number) => T): T => {
      const b = mk(n);
      b.set(a);
      return b;
    };
    this.hExp = g(this.hExp, (k) => new Float64Array(k));
    this.hPos = g(this.hPos, (k) => new Int32Array(k));
    this.hSlot = g(this.hSlot, (k) => new Int32Array(k));
    this.hLo = g(this.hLo, (k) => new Int32Array(k));
    this.hHi = g(this.hHi, (k) => new Int32Array(k));
  }

  /** Drops stale heap entries: keep only those matching their entry's current expiry. */
  private rebuildHeap(): void {
    const ix = this.inner;
    const keep: number[] = [];
    for (let i = 0; i < this.hSize; i++) {
      const xt = ix.ext.get(this.hSlot[i]!);
      const off = xt ? xt.find(this.hLo[i]!, this.hHi[i]!) : -1;
      if (off >= 0 && xt!.aux![off / EXT_WORDS] === this.hExp[i]) keep.push(i);
    }
    const cols = [this.hExp, this.hPos, this.hSlot, this.hLo, this.hHi] as const;
    const copies = cols.map((c) => keep.map((i) => c[i]));
    this.hSize = 0;
    for (let k = 0; k < keep.length; k++)
      this.push(copies[0][k], copies[1][k], copies[2][k], copies[3][k], copies[4][k]);
  }

  /** Live timers and heap entries, for tests of the rebuild rule. */
  timerStats(): { heap: number; live: number } {
    return { heap: this.hSize, live: this.inner.ext.size };
  }

  // ---- KvIndexer ---------------------------------------------------------------------------------

  /** KV events are not consumed in approximate mode; an event is still applied (without expiry). */
  applyEvent(ev: RouterEvent): void {
    this.inner.applyEvent(ev);
  }
  removeWorker(workerId: bigint): void {
    this.inner.removeWorker(workerId);
  }
  removeWorkerDpRank(workerId: bigint, dpRank: number): void {
    this.inner.removeWorkerDpRank(workerId, dpRank);
  }
  flush(): Promise<void> {
    return Promise.resolve();
  }
  findMatches(local: readonly bigint[] | Uint32Array, opts?: FindOptions): OverlapScores {
    this.expire();
    return this.inner.findMatches(local, opts);
  }
  findMatchesBySeq(seq: Uint32Array, opts?: FindOptions): OverlapScores {
    this.expire();
    return this.inner.findMatchesBySeq(seq, opts);
  }
  dump(): Promise<RouterEvent[]> {
    return this.inner.dump();
  }
  treeSizes(): Map<string, number> {
    return this.inner.treeSizes();
  }
  appliedCounts(): Map<string, number> {
    return this.inner.appliedCounts();
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}
