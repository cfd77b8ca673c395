import { KvrError, u64FromParts } from '@kvrouter/protocols';
import type { KvEventLog } from './event-log.js';
import { SlotTable } from './slot-table.js';

/** Slot states. A FULL slot with refcount 0 is in the inactive pool (prefix cache, evictable). */
const FREE = 0;
export const PARTIAL = 1;
const FULL = 2;

/**
 * vLLM-flavoured KV block pool of one dp rank (docs/protocol.md §17) over fixed typed arrays indexed by
 * slot. Active pool = slots with refcount > 0 (full shared blocks and private partial ones); inactive
 * pool = full blocks with refcount 0, kept in a doubly linked LRU list (append at tail, evict at head;
 * list order is the monotonic release order, so no counters are needed). Capacity is shared:
 * active + inactive + free = capacity. Only FULL slots carry a hash and, with prefix caching on, sit
 * in the hash table; eviction is the only place that emits Removed.
 */
export class BlockManager {
  readonly hashLo: Uint32Array;
  readonly hashHi: Uint32Array;
  readonly refs: Int32Array;
  readonly state: Uint8Array;
  private readonly prev: Int32Array;
  private readonly next: Int32Array;
  private head = -1;
  private tail = -1;
  private readonly freeStack: Int32Array;
  private freeTop: number;
  private readonly table: SlotTable;
  activeCount = 0;
  inactiveCount = 0;
  evictions = 0;

  constructor(
    readonly capacity: number,
    readonly caching: boolean,
    private readonly log: KvEventLog,
  ) {
    this.hashLo = new Uint32Array(capacity);
    this.hashHi = new Uint32Array(capacity);
    this.refs = new Int32Array(capacity);
    this.state = new Uint8Array(capacity);
    this.prev = new Int32Array(capacity).fill(-1);
    this.next = new Int32Array(capacity).fill(-1);
    this.freeStack = new Int32Array(capacity);
    // Low slots pop first: makes traces of small tests readable.
    for (let i = 0; i < capacity; i++) this.freeStack[i] = capacity - 1 - i;
    this.freeTop = capacity;
    this.table = new SlotTable(caching ? capacity : 1, this.hashLo, this.hashHi);
  }

  get freeCount(): number {
    return this.freeTop;
  }

  /** Slots a new allocation can still get: free ones plus evictable cached ones. */
  get available(): number {
    return this.freeTop + this.inactiveCount;
  }

  /** Cached full block with this sequence hash (active or inactive), or -1. */
  lookup(lo: number, hi: number): number {
    return this.table.get(lo, hi);
  }

  /** Another holder for a cached full block; an inactive one moves back to the active pool. */
  ref(slot: number): void {
    if (this.refs[slot] === 0) {
      this.unlink(slot);
      this.inactiveCount--;
      this.activeCount++;
    }
    this.refs[slot]++;
  }

  /** A fresh private (PARTIAL) slot with refcount 1, evicting the LRU cached block if none is free. */
  take(): number {
    if (this.freeTop === 0) this.evictOne();
    const s = this.freeStack[--this.freeTop];
    this.refs[s] = 1;
    this.state[s] = PARTIAL;
    this.activeCount++;
    return s;
  }

  /** Evicts up to `n` LRU cached blocks now, so one allocation's removals form one contiguous batch. */
  evict(n: number): void {
    for (; n > 0 && this.head >= 0; n--) this.evictOne();
  }

  /** Marks a private slot full; with caching on it becomes shareable under (lo, hi). */
  publish(slot: number, lo: number, hi: number): void {
    this.hashLo[slot] = lo;
    this.hashHi[slot] = hi;
    this.state[slot] = FULL;
    if (this.caching) this.table.insert(slot);
  }

  /** Drops one holder; the last one sends a full cached block to the LRU tail, anything else to free. */
  release(slot: number): void {
    const r = --this.refs[slot];
    if (r > 0) return;
    if (r < 0) throw new KvrError('engine_internal', `block slot ${slot} released more often than held`);
    this.activeCount--;
    if (this.caching && this.state[slot] === FULL) {
      this.append(slot);
      this.inactiveCount++;
    } else {
      this.free(slot);
    }
  }

  /** Sequence hashes of every cached block (both pools). For tests and dumps, O(capacity). */
  cachedHashes(): Set<bigint> {
    const out = new Set<bigint>();
    if (!this.caching) return out;
    for (let s = 0; s < this.capacity; s++) {
      if (this.state[s] === FULL) out.add(u64FromParts(this.hashLo[s], this.hashHi[s]));
    }
    return out;
  }

  /**
   * Checks every structural invariant against the refcounts the caller's requests imply. Returns the
   * list of violations (empty = sound). O(capacity); tests only.
   */
  audit(expectedRefs: Int32Array): string[] {
    const bad: string[] = [];
    let active = 0;
    let inactive = 0;
    let free = 0;
    let hashed = 0;
    for (let s = 0; s < this.capacity; s++) {
      const st = this.state[s];
      const r = this.refs[s];
      if (r !== expectedRefs[s]) bad.push(`slot ${s}: refcount ${r}, holders ${expectedRefs[s]}`);
      if (st === FREE) {
        free++;
        if (r !== 0) bad.push(`slot ${s}: free with refcount ${r}`);
      } else if (r > 0) active++;
      else if (st === FULL && this.caching) inactive++;
      else bad.push(`slot ${s}: state ${st} with refcount 0 is neither free nor cached`);
      if (st === PARTIAL && r !== 1) bad.push(`slot ${s}: partial block shared (${r})`);
      if (st === FULL && this.caching) {
        hashed++;
        if (this.table.get(this.hashLo[s], this.hashHi[s]) !== s)
          bad.push(`slot ${s}: not findable by its hash`);
      }
    }
    if (hashed !== this.table.size) bad.push(`table holds ${this.table.size} keys, ${hashed} hashed slots`);
    if (active !== this.activeCount) bad.push(`activeCount ${this.activeCount}, counted ${active}`);
    if (inactive !== this.inactiveCount) bad.push(`inactiveCount ${this.inactiveCount}, counted ${inactive}`);
    if (free !== this.freeTop) bad.push(`free list ${this.freeTop}, counted ${free}`);
    if (active + inactive + free !== this.capacity) bad.push('pools do not add up to capacity');
    let n = 0;
    for (let s = this.head, p = -1; s >= 0; p = s, s = this.next[s]) {
      if (this.prev[s] !== p) bad.push(`LRU link broken at slot ${s}`);
      if (this.refs[s] !== 0 || this.state[s] !== FULL) bad.push(`LRU holds non-cached slot ${s}`);
      if (++n > this.capacity) {
        bad.push('LRU cycle');
        break;
      }
    }
    if (n !== this.inactiveCount) bad.push(`LRU length ${n}, inactiveCount ${this.inactiveCount}`);
    return bad;
  }

  private evictOne(): void {
    const s = this.head;
    if (s < 0) throw new KvrError('engine_internal', 'allocation with no free or evictable block');
    this.unlink(s);
    this.inactiveCount--;
    this.table.delete(s);
    this.log.removed(this.hashLo[s], this.hashHi[s]);
    this.evictions++;
    this.free(s);
  }

  private free(slot: number): void {
    this.state[slot] = FREE;
    this.freeStack[this.freeTop++] = slot;
  }

  private append(slot: number): void {
    this.prev[slot] = this.tail;
    this.next[slot] = -1;
    if (this.tail >= 0) this.next[this.tail] = slot;
    else this.head = slot;
    this.tail = slot;
  }

  private unlink(slot: number): void {
    const p = this.prev[slot];
    const n = this.next[slot];
    if (p >= 0) this.next[p] = n;
    else this.head = n;
    if (n >= 0) this.prev[n] = p;
    else this.tail = p;
    this.prev[slot] = -1;
    this.next[slot] = -1;
  }
}
