import {
  KvrError,
  chainHashInto,
  sequenceHashOf,
  computeSequenceHashes,
  u64FromParts,
  u64sToPairs,
  U64_MAX,
  type RouterEvent,
  type StorageTier,
  type WorkerWithDpRank,
} from '@kvrouter/protocols';
import { BlockTable, homeOf } from './block-table.js';
import { ExtMap } from './ext-map.js';
import {
  EXT_HI,
  EXT_LO,
  EXT_SEQ_HI,
  EXT_SEQ_LO,
  HOLDERS,
  KEY_HI,
  KEY_LO,
  META,
  META_EMPTY,
  META_HINT,
  META_LIVE_CHILD,
  META_LIVE_ROOT,
  META_STATE,
  TREE_SIZE_STRIDE,
  holderWords,
} from './layout.js';
import { SlotRegistry } from './slots.js';
import type { AppliedHook, ApplyStatus, EventKind, FindOptions, KvIndexer, OverlapScores } from './types.js';

export interface RadixIndexerOptions {
  /** Initial block-table capacity (entries); grows by doubling. */
  initialCapacity?: number;
  /** Initial worker-slot capacity (rounded up to 32); grows by rebuilding the table. */
  maxSlots?: number;
  /** Largest Stored/Removed batch accepted; larger events are rejected whole as invalid. */
  maxBlocksPerEvent?: number;
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
/** Depths probed together in `matchSeq`: the first chunk, and the most on long walks. */
const CHUNK_FIRST = 8;
const CHUNK = 32;
const STATUSES: readonly ApplyStatus[] = ['ok', 'parent_block_not_found', 'block_not_found', 'invalid_block'];
const KINDS: readonly EventKind[] = ['stored', 'removed', 'cleared'];

/** Result buffers of one match walk, reused across calls (valid until the next call). */
export interface MatchResult {
  count: number;
  slots: Int32Array;
  depths: Int32Array;
}

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
    const t = this.table;
    const words = t.words;
    const stride = t.stride;
    const cap = t.capacity;
    const scale = t.scale;
    const hw = t.hw;
    const active = this.active;
    const live = this.slots.liveMask;
    const res = this.match;
    let count = 0;
    let remaining = 0;
    for (let k = 0; k < hw; k++) {
      active[k] = live[k] ?? 0;
      if (active[k] !== 0) remaining++;
    }
    // Words outside [kMin, kMax] have no active worker left.
    let kMin = 0;
    let kMax = hw - 1;
    // Depths are probed in chunks. A light first loop reads the home entry of every depth in the
    // chunk (a few instructions each, so many loads are in flight at once and their cache and TLB
    // misses overlap); the probes then run on cached lines, and the holder sets are AND-ed in
    // order. Chunks start small (short or soon-diverging queries waste few probes past the depth
    // where the last worker drops out) and double up to CHUNK on long walks.
    const offs = this.offs;
    const homes = this.homes;
    const last = HOLDERS + hw - 1;
    let acc = 0;
    let chunk = CHUNK_FIRST;
    let d = 0;
    outer: while (d < n && remaining > 0) {
      const cnt = Math.min(chunk, n - d);
      if (chunk < CHUNK) chunk *= 2;
      for (let j = 0, q = 2 * d; j < cnt; j++, q += 2) {
        const h = homeOf(seq[q]! | 0, seq[q + 1]! | 0, scale);
        homes[j] = h;
        const o = h * stride;
        // The entry's last holder word too: a wide entry may straddle two cache lines.
        acc ^= words[o]! ^ words[o + last]!;
      }
      for (let j = 0, q = 2 * d; j < cnt; j++, q += 2) {
        const kLo = seq[q]! | 0;
        const kHi = seq[q + 1]! | 0;
        let i = homes[j]!;
        let off = -1;
        for (let p = 0; p < cap; p++) {
          const o = i * stride;
          const m = Atomics.load(words, o + META); // acquire: the key is complete once META is live
          if (m === META_EMPTY) break;
          if ((m & META_STATE) >= META_LIVE_ROOT && words[o + KEY_LO] === kLo && words[o + KEY_HI] === kHi) {
            off = o + HOLDERS;
            break;
          }
          if (++i === cap) i = 0;
        }
        offs[j] = off;
      }
      for (let j = 0; j < cnt; j++, d++) {
        if (remaining === 0) break outer;
        const off = offs[j]!;
        if (off >= 0 && !earlyExitSingle) {
          // Most depths of a long match drop nobody: check that with loads and ANDs only, over
          // the words that still have workers, and skip the update.
          let lost = 0;
          for (let k = kMin; k <= kMax; k++) lost |= active[k]! & ~words[off + k]!;
          if (lost === 0) continue;
        }
        remaining = 0;
        for (let k = kMin; k <= kMax; k++) {
          const a = active[k]!;
          if (a === 0) continue;
          const held = off < 0 ? 0 : words[off + k]!;
          let dropped = a & ~held;
          if (dropped !== 0 && d > 0) {
            while (dropped !== 0) {
              const b = 31 - Math.clz32(dropped & -dropped);
              res.slots[count] = (k << 5) + b;
              res.depths[count++] = d;
              dropped &= dropped - 1;
            }
          }
          const next = a & held;
          active[k] = next;
          if (next !== 0) remaining++;
        }
        while (kMin < kMax && active[kMin] === 0) kMin++;
        while (kMax > kMin && active[kMax] === 0) kMax--;
        if (earlyExitSingle && remaining === 1) {
          // One non-zero word; stop if it holds a single worker (reported at depth d + 1).
          let k = 0;
          while (active[k] === 0) k++;
          const a = active[k]!;
          if ((a & (a - 1)) === 0) {
            d++;
            break outer;
          }
        }
      }
    }
    for (let k = 0; k < hw; k++) {
      let a = active[k]!;
      while (a !== 0) {
        const b = 31 - Math.clz32(a & -a);
        res.slots[count] = (k << 5) + b;
        res.depths[count++] = d;
        a &= a - 1;
      }
    }
    res.count = count;
    this.sink = acc;
    return res;
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
    const t = this.table;
    const words = t.words;
    const wi = HOLDERS + (slot >> 5);
    const bit = 1 << (slot & 31);
    // Block identity -> one external hash of this slot that maps to it.
    const extOf = new Map<bigint, bigint>();
    const xt = this.ext.get(slot);
    xt?.forEach((off) => {
      const ew = xt.words;
      const seq = u64FromParts(ew[off + EXT_SEQ_LO]!, ew[off + EXT_SEQ_HI]!);
      if (!extOf.has(seq)) extOf.set(seq, u64FromParts(ew[off + EXT_LO]!, ew[off + EXT_HI]!));
    });
    const roots: bigint[] = [];
    const children = new Map<bigint, bigint[]>();
    const local = new Map<bigint, bigint>();
    const pending: { seq: bigint; hint: number }[] = [];
    const byHint = new Map<number, bigint[]>();
    const lw = t.local;
    t.forEachLive((off) => {
      if ((words[off + wi]! & bit) === 0) return;
      const kLo = words[off + KEY_LO]!;
      const seq = u64FromParts(kLo >>> 0, words[off + KEY_HI]! >>> 0);
      local.set(seq, u64FromParts(words[off + lw]! >>> 0, words[off + lw + 1]! >>> 0));
      const h = kLo & META_HINT;
      const same = byHint.get(h);
      if (same) same.push(seq);
      else byHint.set(h, [seq]);
      const m = words[off + META]!;
      if ((m & META_STATE) === META_LIVE_CHILD) pending.push({ seq, hint: m & META_HINT });
      else roots.push(seq);
    });
    // The parent is the held block whose low-word hint matches and which re-chains to this identity;
    // a child whose parent this slot does not hold is unreachable and left out.
    for (const { seq, hint } of pending) {
      const l = local.get(seq)!;
      const parent = byHint.get(hint)?.find((p) => sequenceHashOf(p, l) === seq);
      if (parent === undefined) continue;
      const list = children.get(parent);
      if (list) list.push(seq);
      else children.set(parent, [seq]);
    }
    // A held block with no external mapping (its ext hash was re-stored elsewhere) is dumped with
    // its identity as a synthetic external hash, so the dump still reproduces its scores.
    const extFor = (seq: bigint) => extOf.get(seq) ?? seq;
    let queue: { seq: bigint; parent: bigint | null }[] = roots.map((seq) => ({ seq, parent: null }));
    let id = 0n;
    while (queue.length > 0) {
      const next: typeof queue = [];
      for (const { seq, parent } of queue) {
        out.push({
          worker_id: w.worker_id,
          storage_tier: this.tier,
          event: {
            event_id: id++ as never,
            dp_rank: w.dp_rank,
            data: {
              stored: {
                parent_hash: (parent === null ? null : extFor(parent)) as never,
                start_position: null,
                blocks: [
                  {
                    block_hash: extFor(seq) as never,
                    tokens_hash: local.get(seq)! as never,
                    mm_extra_info: null,
                  },
                ],
              },
            },
          },
        });
        for (const c of children.get(seq) ?? []) if (local.has(c)) next.push({ seq: c, parent: seq });
      }
      queue = next;
    }
  }
}

// ---- validation helpers (events are checked whole before anything is applied) -------------------

// bigint -> (lo, hi) through a shared 8-byte view: no BigInt allocation per conversion.
const cvt64 = new BigUint64Array(1);
const cvt32 = new Uint32Array(cvt64.buffer);
const lo = (v: bigint): number => {
  cvt64[0] = v;
  return cvt32[0];
};
const hi = (v: bigint): number => {
  cvt64[0] = v;
  return cvt32[1];
};
const isU64 = (v: unknown): v is bigint => typeof v === 'bigint' && v >= 0n && v <= U64_MAX;

/** Result of checking an event before anything is applied. */
export interface Classified {
  kind: EventKind;
  /** Set when the event is settled without applying (invalid, or another tier). */
  status?: ApplyStatus;
  blocks: number;
  /** Raw words `encodeChecked` writes. */
  words: number;
}

/**
 * Validates an event whole (types, ranges, size) without touching any state. With `checkBlocks`
 * false the block values are left to `encodeChecked`, which validates them while encoding (one
 * pass over the blocks instead of two).
 */
export function classifyEvent(
  ev: RouterEvent,
  maxBlocks: number,
  tier: StorageTier,
  checkBlocks = true,
): Classified {
  const kind = eventKind(ev);
  if (kind === undefined || !validWorker(ev))
    return { kind: kind ?? 'stored', status: 'invalid_block', blocks: 0, words: 0 };
  const data = ev.event.data;
  if (kind === 'stored' && !validStored((data as { stored: unknown }).stored, maxBlocks, checkBlocks))
    return { kind, status: 'invalid_block', blocks: 0, words: 0 };
  if (kind === 'removed' && !validRemoved((data as { removed: unknown }).removed, maxBlocks, checkBlocks))
    return { kind, status: 'invalid_block', blocks: 0, words: 0 };
  if ((ev.storage_tier ?? 'device') !== tier) {
    // Not encoded, so validate the blocks here: an invalid event is counted invalid in any tier.
    if (!checkBlocks) return classifyEvent(ev, maxBlocks, tier, true);
    return { kind, status: 'ok', blocks: 0, words: 0 };
  }
  if (kind === 'cleared') return { kind, blocks: 0, words: 0 };
  const n =
    kind === 'stored'
      ? (data as { stored: { blocks: unknown[] } }).stored.blocks.length
      : (data as { removed: { block_hashes: unknown[] } }).removed.block_hashes.length;
  return { kind, blocks: n, words: 4 * n };
}

/**
 * Writes a Stored/Removed event's blocks at `out[at..]` as (ext lo, ext hi, local lo, local hi)
 * (Removed: (lo, hi, _, _)), validating every block value while writing it (for an event
 * classified with `checkBlocks` false). False if one is invalid; `out` may then hold part of the event past `at`,
 * which the caller discards (nothing else has changed).
 */
export function encodeChecked(ev: RouterEvent, out: Uint32Array | Int32Array, at: number): boolean {
  const data = ev.event.data as { stored: { blocks: unknown[] } } | { removed: { block_hashes: unknown[] } };
  if ('stored' in data) {
    for (const b of data.stored.blocks) {
      if (!b || typeof b !== 'object') return false;
      const { block_hash: e, tokens_hash: t } = b as { block_hash?: unknown; tokens_hash?: unknown };
      if (!isU64(e) || !isU64(t)) return false;
      cvt64[0] = e;
      out[at] = cvt32[0]!;
      out[at + 1] = cvt32[1]!;
      cvt64[0] = t;
      out[at + 2] = cvt32[0]!;
      out[at + 3] = cvt32[1]!;
      at += 4;
    }
  } else {
    for (const h of data.removed.block_hashes) {
      if (!isU64(h)) return false;
      cvt64[0] = h;
      out[at] = cvt32[0]!;
      out[at + 1] = cvt32[1]!;
      at += 4;
    }
  }
  return true;
}

export const u64Parts = { lo, hi };

function eventKind(ev: RouterEvent): EventKind | undefined {
  const d = (ev as { event?: { data?: unknown } }).event?.data;
  if (d === 'cleared') return 'cleared';
  if (d && typeof d === 'object') {
    if ('stored' in d) return 'stored';
    if ('removed' in d) return 'removed';
  }
  return undefined;
}

function validWorker(ev: RouterEvent): boolean {
  const r = ev.event.dp_rank ?? 0;
  return isU64(ev.worker_id) && Number.isInteger(r) && r >= 0 && r <= 0xffffffff;
}

function validStored(
  st: unknown,
  maxBlocks: number,
  checkBlocks: boolean,
): st is {
  parent_hash: bigint | null;
  blocks: { block_hash: bigint; tokens_hash: bigint }[];
} {
  if (!st || typeof st !== 'object') return false;
  const s = st as { parent_hash?: unknown; blocks?: unknown };
  if (s.parent_hash !== null && s.parent_hash !== undefined && !isU64(s.parent_hash)) return false;
  if (!Array.isArray(s.blocks) || s.blocks.length > maxBlocks) return false;
  if (!checkBlocks) return true;
  for (const b of s.blocks as unknown[]) {
    if (!b || typeof b !== 'object') return false;
    const bb = b as { block_hash?: unknown; tokens_hash?: unknown };
    if (!isU64(bb.block_hash) || !isU64(bb.tokens_hash)) return false;
  }
  return true;
}

function validRemoved(
  rm: unknown,
  maxBlocks: number,
  checkBlocks: boolean,
): rm is { block_hashes: bigint[] } {
  if (!rm || typeof rm !== 'object') return false;
  const hs = (rm as { block_hashes?: unknown }).block_hashes;
  if (!Array.isArray(hs) || hs.length > maxBlocks) return false;
  if (!checkBlocks) return true;
  for (const h of hs as unknown[]) if (!isU64(h)) return false;
  return true;
}
