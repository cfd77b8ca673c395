import {
  KvrError,
  chainHashInto,
  computeSequenceHashes,
  invalidArgument,
  u64sToPairs,
  type RouterEvent,
  type StorageTier,
  type WorkerWithDpRank,
} from '@kvrouter/protocols';
import { BlockTable } from './block-table.js';
import { dumpSlotEvents } from './dump.js';
import { classifyEvent, encodeChecked, u64Parts } from './event-check.js';
import { ExtMap } from './ext-map.js';
import { EXT_SEQ_HI, EXT_SEQ_LO, TREE_SIZE_STRIDE, holderWords } from './layout.js';
import { CHUNK, matchSeqInto, type MatchResult } from './match.js';
import { SlotRegistry } from './slots.js';
import type { AppliedHook, ApplyStatus, EventKind, FindOptions, KvIndexer, OverlapScores } from './types.js';

export interface RadixIndexerOptions {
  /** Initial block-table capacity (entries); grows by doubling. */
  initialCapacity?: number;
  /** Initial worker-slot capacity (rounded up to 32); grows by rebuilding the table. */
  maxSlots?: number;
  /** Largest Stored/Removed batch accepted; larger events are rejected whole as invalid. */
  maxBlocksPerEvent?: number;
  /**
   * Blocks one (worker, dp_rank) may hold (default `MAX_BLOCKS_PER_WORKER`; issue 17). A Stored event
   * that would cross it first drops everything that rank holds, as a Cleared would (counted in
   * `overflowedBlocks`), so an engine whose removals never arrive cannot grow the index without bound.
   */
  maxBlocksPerWorker?: number;
  /** Only events of this tier are indexed (default `device`); others are counted and skipped. */
  tier?: StorageTier;
  onApplied?: AppliedHook;
  /** Keep an f64 per (slot, ext) entry (approximate mode stores expiry times there). */
  extAux?: boolean;
  /** Injected parts (the pool): a shared block table, the slot registry and per-slot sizes. */
  table?: BlockTable;
  slots?: SlotRegistry;
  treeSize?: Int32Array;
}

const DEFAULT_MAX_BLOCKS = 65_536;
/**
 * Default bound of blocks per (worker, dp_rank): 4,194,304 (2^22), above any engine's KV cache
 * (an 8xH200 node at block size 16 holds ~1M device blocks); ~60 bytes each (README, "Memory per
 * (block, worker) pair"), so at most ~250 MB per rank. docs/memory.md.
 */
export const MAX_BLOCKS_PER_WORKER = 1 << 22;
const STATUSES: readonly ApplyStatus[] = ['ok', 'parent_block_not_found', 'block_not_found', 'invalid_block'];
const KINDS: readonly EventKind[] = ['stored', 'removed', 'cleared'];
const { lo, hi } = u64Parts;

/**
 * The exact, single-threaded KV index (PROTOCOL §7.2-7.3): one open-addressing table of block
 * identities with a holder bitset per block, plus the per-slot external-hash map. Queries walk the
 * request's sequence-hash chain, AND-ing holder sets, and stop when no worker remains.
 */
export class RadixIndexer implements KvIndexer {
  table: BlockTable;
  readonly ext: ExtMap;
  readonly slots: SlotRegistry;
  /** Number of blocks each slot holds (|Held[w]|), at `slot * TREE_SIZE_STRIDE`. */
  treeSize: Int32Array;
  /** Applied-event counters indexed by STATUSES × KINDS (no allocation per event). */
  private readonly counts = new Float64Array(STATUSES.length * KINDS.length);
  private readonly maxBlocks: number;
  readonly maxBlocksPerWorker: number;
  /** Blocks dropped by the per-worker bound, and how many times it was hit. */
  overflowedBlocks = 0;
  overflows = 0;
  private readonly tier: StorageTier;
  private readonly onApplied: AppliedHook | undefined;
  // Scratch, reused: no allocation per event or per query.
  private readonly h = new Uint32Array(2);
  private active: Int32Array;
  private readonly match: MatchResult;
  private seqScratch = new Uint32Array(2 * 1024);
  private raw = new Uint32Array(4 * 1024);
  private readonly offs = new Int32Array(CHUNK);
  private readonly homes = new Int32Array(CHUNK);
  /** Result of the prefetch reads (kept so they are not optimised away). */
  sink = 0;

  constructor(opts: RadixIndexerOptions = {}) {
    const maxSlots = opts.table?.maxSlots ?? Math.max(32, opts.maxSlots ?? 64);
    this.table = opts.table ?? new BlockTable(opts.initialCapacity ?? 1 << 16, maxSlots);
    this.ext = new ExtMap(opts.extAux ?? false);
    this.slots = opts.slots ?? new SlotRegistry(holderWords(maxSlots));
    this.treeSize = opts.treeSize ?? new Int32Array(maxSlots * TREE_SIZE_STRIDE);
    this.maxBlocks = opts.maxBlocksPerEvent ?? DEFAULT_MAX_BLOCKS;
    this.maxBlocksPerWorker = opts.maxBlocksPerWorker ?? MAX_BLOCKS_PER_WORKER;
    if (!Number.isSafeInteger(this.maxBlocksPerWorker) || this.maxBlocksPerWorker < 1)
      throw invalidArgument('maxBlocksPerWorker', 'must be an integer >= 1', this.maxBlocksPerWorker);
    this.tier = opts.tier ?? 'device';
    this.onApplied = opts.onApplied;
    this.active = new Int32Array(this.table.hw);
    this.match = { count: 0, slots: new Int32Array(maxSlots), depths: new Int32Array(maxSlots) };
  }

  // ---- mutations -------------------------------------------------------------------------------

  applyEvent(ev: RouterEvent): void {
    this.applyEventStatus(ev);
  }

  /** Applies one event and returns its status (tests and the approximate index use it directly). */
  applyEventStatus(ev: RouterEvent): ApplyStatus {
    const c = classifyEvent(ev, this.maxBlocks, this.tier, false);
    if (c.status !== undefined) return this.count(c.status, c.kind);
    const workerId = ev.worker_id as bigint;
    const rank = ev.event.dp_rank ?? 0;
    if (c.kind === 'cleared') {
      this.clearSlots(new Set(this.slots.slotsOf(workerId)), false);
      return this.count('ok', 'cleared');
    }
    if (this.raw.length < c.words) this.raw = new Uint32Array(c.words * 2);
    if (!encodeChecked(ev, this.raw, 0)) return this.count('invalid_block', c.kind);
    if (c.kind === 'stored') {
      const parent = (ev.event.data as { stored: { parent_hash: bigint | null } }).stored.parent_hash ?? null;
      const slot = this.slots.lookup(workerId, rank);
      return this.applyStoredRaw(
        slot,
        workerId,
        rank,
        parent !== null,
        parent === null ? 0 : lo(parent),
        parent === null ? 0 : hi(parent),
        this.raw,
        0,
        c.blocks,
      );
    }
    return this.applyRemovedRaw(this.slots.lookup(workerId, rank), this.raw, 0, c.blocks);
  }

  /**
   * The one Stored implementation (single-threaded index and pool writers): `data[at..]` holds
   * `n` blocks as (ext lo, ext hi, local lo, local hi). `slot` < 0 means the rank is not known yet;
   * it is acquired only once the event is accepted, so a rejected event leaves no trace.
   */
  applyStoredRaw(
    slot: number,
    workerId: bigint,
    rank: number,
    hasParent: boolean,
    pExtLo: number,
    pExtHi: number,
    data: Uint32Array | Int32Array,
    at: number,
    n: number,
  ): ApplyStatus {
    let pLo = 0;
    let pHi = 0;
    if (n > this.maxBlocksPerWorker) return this.count('invalid_block', 'stored');
    if (slot >= 0 && this.treeSize[slot * TREE_SIZE_STRIDE]! + n > this.maxBlocksPerWorker) {
      // The bound (issue 17): drop the rank's blocks as a Cleared would; its next events rebuild
      // it. A chain continuing from a dropped parent then has no parent, like after a Cleared.
      this.overflowedBlocks += this.treeSize[slot * TREE_SIZE_STRIDE]!;
      this.overflows++;
      this.clearSlots(new Set([slot]), false);
    }
    if (hasParent) {
      const px = slot < 0 ? undefined : this.ext.get(slot);
      const off = px ? px.find(pExtLo, pExtHi) : -1;
      if (off < 0) return this.count('parent_block_not_found', 'stored');
      pLo = px!.words[off + EXT_SEQ_LO]!;
      pHi = px!.words[off + EXT_SEQ_HI]!;
    }
    const firstParentLo = pLo;
    if (slot < 0) slot = this.acquireSlot(workerId, rank);
    // Passes over the chain: hashes first (CPU only), then one read of every home entry in the
    // table and the external map (independent loads whose cache misses overlap), then the table
    // inserts, then the map. The inserts' atomics would otherwise serialise one miss after another.
    if (this.seqScratch.length < 2 * n + 2) this.seqScratch = new Uint32Array(4 * n + 4);
    const seq = this.seqScratch;
    const hadParent = hasParent;
    for (let i = 0, k = at; i < n; i++, k += 4) {
      const tLo = data[k + 2]! >>> 0;
      const tHi = data[k + 3]! >>> 0;
      if (hasParent) chainHashInto(pLo, pHi, tLo, tHi, seq, 2 * i);
      else {
        seq[2 * i] = tLo;
        seq[2 * i + 1] = tHi;
      }
      hasParent = true;
      pLo = seq[2 * i]!;
      pHi = seq[2 * i + 1]!;
    }
    const t = this.table;
    const xt = this.ext.of(slot);
    this.sink = t.touch(seq, n) ^ xt.touch(data, at, n);
    const ts = this.treeSize;
    const tsAt = slot * TREE_SIZE_STRIDE;
    let added = 0;
    for (let i = 0, k = at; i < n; i++, k += 4) {
      const first = i === 0;
      if (
        t.hold(
          seq[2 * i]!,
          seq[2 * i + 1]!,
          data[k + 2]!,
          data[k + 3]!,
          first ? hadParent : true,
          first ? firstParentLo : seq[2 * i - 2]!,
          slot,
        )
      )
        added++;
    }
    ts[tsAt] = ts[tsAt]! + added;
    for (let i = 0, k = at; i < n; i++, k += 4) xt.set(data[k]!, data[k + 1]!, seq[2 * i]!, seq[2 * i + 1]!);
    return this.count('ok', 'stored');
  }

  /** The one Removed implementation: `data[at..]` holds `n` external hashes as (lo, hi, _, _). */
  applyRemovedRaw(slot: number, data: Uint32Array | Int32Array, at: number, n: number): ApplyStatus {
    const xt = slot < 0 ? undefined : this.ext.get(slot);
    if (!xt) return this.count(n > 0 ? 'block_not_found' : 'ok', 'removed');
    // Passes, as for Stored: read the map's home entries (misses overlap), resolve and delete the
    // mappings, read the table's home entries of the identities found, then clear the bits. Same
    // result as one block at a time: a repeated hash misses once deleted, and a second clear of
    // one identity finds its bit already clear.
    if (this.seqScratch.length < 2 * n) this.seqScratch = new Uint32Array(4 * n);
    const seq = this.seqScratch;
    let found = 0;
    this.sink = xt.touch(data, at, n);
    for (let i = 0, k = at; i < n; i++, k += 4) {
      const off = xt.find(data[k]!, data[k + 1]!);
      if (off < 0) continue;
      seq[2 * found] = xt.words[off + EXT_SEQ_LO]!;
      seq[2 * found + 1] = xt.words[off + EXT_SEQ_HI]!;
      found++;
      xt.deleteAt(off);
    }
    this.sink = this.table.touch(seq, found);
    for (let i = 0; i < found; i++) this.unholdBlock(slot, seq[2 * i]!, seq[2 * i + 1]!);
    return this.count(found < n ? 'block_not_found' : 'ok', 'removed');
  }

  /**
   * Typed fast path for a Stored chain (approximate mode): blocks given as (lo, hi) pairs of
   * external hashes and local hashes.
   */
  applyStoredPairs(
    workerId: bigint,
    rank: number,
    parentExt: bigint | null,
    extPairs: Uint32Array,
    localPairs: Uint32Array,
    n: number,
  ): ApplyStatus {
    if (this.raw.length < 4 * n) this.raw = new Uint32Array(8 * n);
    for (let i = 0; i < n; i++) {
      this.raw[4 * i] = extPairs[2 * i]!;
      this.raw[4 * i + 1] = extPairs[2 * i + 1]!;
      this.raw[4 * i + 2] = localPairs[2 * i]!;
      this.raw[4 * i + 3] = localPairs[2 * i + 1]!;
    }
    return this.applyStoredRaw(
      this.slots.lookup(workerId, rank),
      workerId,
      rank,
      parentExt !== null,
      parentExt === null ? 0 : lo(parentExt),
      parentExt === null ? 0 : hi(parentExt),
      this.raw,
      0,
      n,
    );
  }

  /** Removes one (slot, ext) mapping and the block from the slot's holder set; false if unknown. */
  removeExt(slot: number, extLo: number, extHi: number): boolean {
    const xt = this.ext.get(slot);
    const off = xt ? xt.find(extLo, extHi) : -1;
    if (off < 0) return false;
    const sLo = xt!.words[off + EXT_SEQ_LO]!;
    const sHi = xt!.words[off + EXT_SEQ_HI]!;
    xt!.deleteAt(off);
    this.unholdBlock(slot, sLo, sHi);
    return true;
  }

  removeWorker(workerId: bigint): void {
    this.clearSlots(new Set(this.slots.slotsOf(workerId)), true);
  }

  removeWorkerDpRank(workerId: bigint, dpRank: number): void {
    const slot = this.slots.lookup(workerId, dpRank);
    if (slot >= 0) this.clearSlots(new Set([slot]), true);
  }

  flush(): Promise<void> {
    return Promise.resolve();
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  slotOf(workerId: bigint, dpRank: number): number {
    return this.slots.lookup(workerId, dpRank);
  }

  acquireSlot(workerId: bigint, rank: number): number {
    const slot = this.slots.acquire(workerId, rank);
    if (slot >= this.table.maxSlots) this.growSlots(slot + 1);
    return slot;
  }

  private unholdBlock(slot: number, sLo: number, sHi: number): void {
    const off = this.table.find(sLo, sHi);
    if (off >= 0 && this.table.clearBit(off, slot)) this.treeSize[slot * TREE_SIZE_STRIDE]!--;
  }

  /** Drops every block of the slots (Cleared / removeWorker); `release` also frees the slots. */
  clearSlots(slots: Set<number>, release: boolean): void {
    if (slots.size === 0) return;
    this.ext.removeSlots(slots);
    const mask = new Int32Array(this.table.hw);
    for (const s of slots) mask[s >> 5]! |= 1 << (s & 31);
    this.table.clearMask(mask);
    for (const s of slots) {
      this.treeSize[s * TREE_SIZE_STRIDE] = 0;
      if (release) this.slots.release(s);
    }
  }

  /**
   * Switches to another table (and per-slot size array): the pool publishes a grown shared table
   * this way to its reader and writers. Scratch buffers follow the new slot width.
   */
  adoptTable(table: BlockTable, treeSize: Int32Array): void {
    this.table = table;
    this.treeSize = treeSize;
    this.slots.ensureWords(table.hw);
    if (this.active.length !== table.hw) this.active = new Int32Array(table.hw);
    if (this.match.slots.length < table.maxSlots) {
      this.match.slots = new Int32Array(table.maxSlots);
      this.match.depths = new Int32Array(table.maxSlots);
    }
  }

  private growSlots(needed: number): void {
    if (this.table.shared) {
      throw new KvrError(
        'slots_exhausted',
        `worker slot ${needed - 1} is beyond the shared table's ${this.table.maxSlots} slots`,
      );
    }
    let maxSlots = this.table.maxSlots;
    while (maxSlots < needed) maxSlots *= 2;
    const t = new BlockTable(this.table.capacity, maxSlots);
    this.table.copyInto(t, false);
    this.table = t;
    const ts = new Int32Array(maxSlots * TREE_SIZE_STRIDE);
    ts.set(this.treeSize);
    this.treeSize = ts;
    this.slots.ensureWords(t.hw);
    this.active = new Int32Array(t.hw);
    this.match.slots = new Int32Array(maxSlots);
    this.match.depths = new Int32Array(maxSlots);
  }

  private count(status: ApplyStatus, kind: EventKind): ApplyStatus {
    this.counts[STATUSES.indexOf(status) * KINDS.length + KINDS.indexOf(kind)]++;
    this.onApplied?.(status, kind);
    return status;
  }

  // ---- queries ---------------------------------------------------------------------------------

  /**
   * The hot path: walks `n` sequence hashes ((lo, hi) pairs), returning for every slot holding
   * block 0 the number of leading blocks it holds contiguously. Reuses its result buffers.
   */
  matchSeq(seq: Uint32Array, n = seq.length >> 1, earlyExitSingle = false): MatchResult {
    this.sink = matchSeqInto(
      this.table,
      this.slots.liveMask,
      this.active,
      this.offs,
      this.homes,
      this.match,
      seq,
      n,
      earlyExitSingle,
    );
    return this.match;
  }

  findMatchesBySeq(seq: Uint32Array, opts?: FindOptions): OverlapScores {
    const r = this.matchSeq(seq, seq.length >> 1, opts?.earlyExitSingle ?? false);
    return this.toScores(r);
  }

  findMatches(local: readonly bigint[] | Uint32Array, opts?: FindOptions): OverlapScores {
    const pairs = local instanceof Uint32Array ? local : u64sToPairs(local);
    if (this.seqScratch.length < pairs.length) this.seqScratch = new Uint32Array(pairs.length * 2);
    const seq = computeSequenceHashes(pairs, this.seqScratch);
    return this.findMatchesBySeq(seq, opts);
  }

  /** Builds the OverlapScores maps for matched slots; tree sizes are computed only if read. */
  toScores(r: MatchResult): OverlapScores {
    const scores = new Map<string, number>();
    const workers = new Map<string, WorkerWithDpRank>();
    for (let i = 0; i < r.count; i++) {
      const s = r.slots[i]!;
      const key = this.slots.keys[s]!;
      scores.set(key, r.depths[i]!);
      workers.set(key, this.slots.workers[s]!);
    }
    let sizes: Map<string, number> | undefined;
    const computeSizes = () => this.treeSizes();
    return {
      scores,
      workers,
      frequencies: [],
      get treeSizes() {
        return (sizes ??= computeSizes());
      },
    };
  }

  treeSizes(): Map<string, number> {
    const m = new Map<string, number>();
    this.slots.forEach((s, _w, key) => m.set(key, this.treeSize[s * TREE_SIZE_STRIDE]!));
    return m;
  }

  /** Σ_w |Held[w]|: the number of (block, worker rank) pairs. */
  totalPairs(): number {
    let t = 0;
    this.slots.forEach((s) => (t += this.treeSize[s * TREE_SIZE_STRIDE]!));
    return t;
  }

  countsSnapshot(): Float64Array {
    return this.counts.slice();
  }

  countsSince(before: Float64Array): Float64Array {
    const d = this.counts.slice();
    for (let i = 0; i < d.length; i++) d[i]! -= before[i]!;
    return d;
  }

  /** Adds counters applied elsewhere (pool writers), firing the hook once per event. */
  addCounts(delta: Float64Array): void {
    for (let i = 0; i < delta.length; i++) {
      const n = delta[i]!;
      if (n === 0) continue;
      this.counts[i]! += n;
      if (this.onApplied) {
        const st = STATUSES[Math.floor(i / KINDS.length)]!;
        const k = KINDS[i % KINDS.length]!;
        for (let j = 0; j < n; j++) this.onApplied(st, k);
      }
    }
  }

  countCleared(): void {
    this.count('ok', 'cleared');
  }

  /** Counts an event settled without applying (invalid, other tier, unknown rank). */
  countStatus(status: ApplyStatus, kind: EventKind): void {
    this.count(status, kind);
  }

  /** Non-zero counters as `${status}/${event_type}` -> count. */
  appliedCounts(): Map<string, number> {
    const m = new Map<string, number>();
    STATUSES.forEach((st, i) =>
      KINDS.forEach((k, j) => {
        const v = this.counts[i * KINDS.length + j];
        if (v > 0) m.set(`${st}/${k}`, v);
      }),
    );
    return m;
  }

  bytes(): number {
    return this.table.bytes() + this.ext.bytes();
  }

  // ---- dumps -----------------------------------------------------------------------------------

  dump(): Promise<RouterEvent[]> {
    const out: RouterEvent[] = [];
    this.slots.forEach((slot, w) => this.dumpSlot(slot, w, out));
    return Promise.resolve(out);
  }

  /**
   * Single-block Stored events for one slot, parents before children; blocks whose parent the
   * slot does not hold (transitively) are unreachable and skipped (PROTOCOL §3.7).
   */
  dumpSlot(slot: number, w: WorkerWithDpRank, out: RouterEvent[]): void {
    dumpSlotEvents(this.table, this.ext, this.tier, slot, w, out);
  }
}
