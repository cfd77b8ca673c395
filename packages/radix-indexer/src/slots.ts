import { type WorkerId, type WorkerWithDpRank } from '@kvrouter/protocols';

/**
 * Dense slot numbers for (worker, dp_rank) pairs: the bit position in every block's holder set.
 * Freed slots are reused (their bits are cleared before release).
 */
export class SlotRegistry {
  private readonly byKey = new Map<string, number>();
  /** worker -> dp_rank -> slot: the per-event lookup, without formatting a bigint as a string. */
  private readonly byRank = new Map<bigint, Map<number, number>>();
  private readonly byWorker = new Map<bigint, Set<number>>();
  private readonly free: number[] = [];
  private readonly hidden = new Set<number>();
  readonly workers: (WorkerWithDpRank | undefined)[] = [];
  readonly keys: (string | undefined)[] = [];
  /** Bitset of slots in use, `holderWords` long; grows with `ensureWords`. */
  liveMask: Int32Array;

  constructor(words: number) {
    this.liveMask = new Int32Array(words);
  }

  get highWater(): number {
    return this.workers.length;
  }

  lookup(workerId: bigint, dpRank: number): number {
    return this.byRank.get(workerId)?.get(dpRank) ?? -1;
  }

  private index(slot: number, workerId: bigint, dpRank: number, key: string): void {
    this.byKey.set(key, slot);
    let m = this.byRank.get(workerId);
    if (!m) this.byRank.set(workerId, (m = new Map<number, number>()));
    m.set(dpRank, slot);
  }

  private unindex(slot: number): void {
    const w = this.workers[slot]!;
    this.byKey.delete(this.keys[slot]!);
    const m = this.byRank.get(w.worker_id);
    if (m?.get(w.dp_rank) === slot) {
      m.delete(w.dp_rank);
      if (m.size === 0) this.byRank.delete(w.worker_id);
    }
  }

  /** Slot for the pair, allocating one if new. */
  acquire(workerId: bigint, dpRank: number): number {
    const existing = this.lookup(workerId, dpRank);
    if (existing >= 0) return existing;
    const key = `${workerId}:${dpRank}`;
    const slot = this.free.length > 0 ? this.free.pop()! : this.workers.length;
    const w: WorkerWithDpRank = { worker_id: workerId as WorkerId, dp_rank: dpRank };
    this.workers[slot] = w;
    this.keys[slot] = key;
    this.index(slot, workerId, dpRank, key);
    let set = this.byWorker.get(workerId);
    if (!set) this.byWorker.set(workerId, (set = new Set()));
    set.add(slot);
    if (slot >> 5 < this.liveMask.length) this.liveMask[slot >> 5] |= 1 << (slot & 31);
    return slot;
  }

  /** Registers the pair at a given slot (a pool writer mirrors the main thread's numbering). */
  assign(slot: number, workerId: bigint, dpRank: number): void {
    const key = `${workerId}:${dpRank}`;
    if (this.byKey.get(key) === slot) return;
    const prev = this.byKey.get(key);
    if (prev !== undefined) this.release(prev);
    if (this.workers[slot]) this.release(slot);
    const fi = this.free.indexOf(slot);
    if (fi >= 0) this.free.splice(fi, 1);
    while (this.workers.length < slot) {
      this.free.push(this.workers.length);
      this.workers.push(undefined);
      this.keys.push(undefined);
    }
    this.workers[slot] = { worker_id: workerId as WorkerId, dp_rank: dpRank };
    this.keys[slot] = key;
    this.index(slot, workerId, dpRank, key);
    let set = this.byWorker.get(workerId);
    if (!set) this.byWorker.set(workerId, (set = new Set()));
    set.add(slot);
    if (slot >> 5 < this.liveMask.length) this.liveMask[slot >> 5]! |= 1 << (slot & 31);
  }

  /** Stops reporting the slot in queries at once (its bits are cleared later by its owner). */
  hide(slot: number): void {
    this.hidden.add(slot);
    if (slot >> 5 < this.liveMask.length) this.liveMask[slot >> 5]! &= ~(1 << (slot & 31));
  }

  slotsOf(workerId: bigint): number[] {
    return [...(this.byWorker.get(workerId) ?? [])];
  }

  release(slot: number): void {
    if (!this.workers[slot]) return;
    this.retire(slot);
    this.recycle(slot);
  }

  /**
   * Forgets the pair at once (lookups miss, queries stop reporting it) but keeps the number
   * reserved until `recycle`, while its owner still clears its bits.
   */
  retire(slot: number): void {
    const w = this.workers[slot];
    if (!w || this.hidden.has(slot)) return;
    this.unindex(slot);
    const set = this.byWorker.get(w.worker_id);
    set?.delete(slot);
    if (set && set.size === 0) this.byWorker.delete(w.worker_id);
    this.hide(slot);
  }

  /** Makes a retired slot number available again. */
  recycle(slot: number): void {
    if (!this.workers[slot]) return;
    this.workers[slot] = undefined;
    this.keys[slot] = undefined;
    this.liveMask[slot >> 5]! &= ~(1 << (slot & 31));
    this.hidden.delete(slot);
    this.free.push(slot);
  }

  ensureWords(words: number): void {
    if (words <= this.liveMask.length) return;
    const m = new Int32Array(words);
    m.set(this.liveMask);
    this.liveMask = m;
    for (let s = 0; s < this.workers.length; s++) if (this.workers[s]) m[s >> 5] |= 1 << (s & 31);
  }

  forEach(fn: (slot: number, w: WorkerWithDpRank, key: string) => void): void {
    for (let s = 0; s < this.workers.length; s++) {
      const w = this.workers[s];
      if (w) fn(s, w, this.keys[s]!);
    }
  }
}
