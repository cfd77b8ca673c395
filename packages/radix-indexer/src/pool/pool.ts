import { Piscina } from 'piscina';
import { KvrError, type RouterEvent, type StorageTier, type WorkerWithDpRank } from '@kvrouter/protocols';
import { BlockTable, capacityFor } from '../block-table.js';
import { classifyEvent, encodeChecked, u64Parts } from '../event-check.js';
import { RadixIndexer } from '../indexer.js';
import { GROW_LOAD, MAX_LOAD, TREE_SIZE_STRIDE, holderWords } from '../layout.js';
import type { MatchResult } from '../match.js';
import { SlotRegistry } from '../slots.js';
import type { AppliedHook, FindOptions, KvIndexer, OverlapScores } from '../types.js';
import {
  OP_CLEAR,
  OP_DROP,
  OP_RECORD,
  OP_REMOVED,
  OP_STORED,
  RECORD_HEADER,
  REMOVED_HEADER,
  STORED_HEADER,
  type ApproxConfig,
  type GrowResult,
  type OpsResult,
  type TableRef,
  type Task,
} from './protocol.js';
import { writerEntry, type WriterEntry } from './writer-entry.js';

export interface PoolOptions {
  /** Writer threads (`--router-event-threads`, default 4). */
  threads?: number;
  initialCapacity?: number;
  maxSlots?: number;
  maxBlocksPerEvent?: number;
  tier?: StorageTier;
  onApplied?: AppliedHook;
  /**
   * Called with the workers whose writer thread crashed: their blocks were dropped and the event
   * layer should request full dumps for them. The pool keeps serving meanwhile.
   */
  onResync?: (workers: bigint[]) => void;
  /** Errors reported by writer threads (rebuilt from `{code, message}`). */
  onError?: (err: KvrError) => void;
  /** Approximate mode in the writers (TTL expiry runs in each worker's owner thread). */
  approximate?: ApproxConfig & { now: () => number };
}

/** Blocks per task: big enough to amortise the ~50 µs round trip, small enough to pipeline. */
const BATCH_BLOCKS = 8192;

/** Words of one full batch of 16-block Stored events. */
const BUILDER_WORDS = BATCH_BLOCKS * 4 + (BATCH_BLOCKS / 16) * STORED_HEADER + 1024;
/** Spare op buffers kept per lane (one being filled, one in flight, a few sealed). */
const SPARE_BUFFERS = 4;

/**
 * Op buffers live in SharedArrayBuffers: a task shares them with its writer (no transfer, no copy,
 * no fresh zeroed allocation per batch), and they go back to their lane's spares once the task
 * has completed, so a busy pool allocates none in the steady state.
 */
const sharedWords = (n: number): Int32Array => new Int32Array(new SharedArrayBuffer(n * 4));

class OpsBuilder {
  len = 0;
  blocks = 0;
  register: [number, bigint, number][] = [];
  release: number[] = [];

  constructor(public buf: Int32Array) {}

  ensure(n: number): void {
    if (this.len + n <= this.buf.length) return;
    let cap = this.buf.length * 2;
    while (cap < this.len + n) cap *= 2;
    const b = sharedWords(cap);
    b.set(this.buf.subarray(0, this.len));
    this.buf = b;
  }
  get empty(): boolean {
    return this.len === 0 && this.register.length === 0;
  }
}

interface Batch {
  /** One or more op runs, applied in order (views of shared op buffers). */
  ops: Int32Array[];
  blocks: number;
  register: [number, bigint, number][];
  release: number[];
}

interface Lane {
  id: number;
  pool: Piscina;
  builder: OpsBuilder;
  sealed: Batch[];
  /** Op buffers no task uses any more. */
  spare: Int32Array[];
  /** An ops task is in flight. At most one at a time: piscina does not keep FIFO order. */
  busy: boolean;
  tail: Promise<void>;
  slots: Set<number>;
  workers: Set<bigint>;
}

/** One task from several sealed batches (kept in order, buffers not copied). */
function merge(batches: Batch[]): Batch {
  if (batches.length === 1) return batches[0]!;
  return {
    ops: batches.flatMap((b) => b.ops),
    blocks: batches.reduce((a, b) => a + b.blocks, 0),
    register: batches.flatMap((b) => b.register),
    release: batches.flatMap((b) => b.release),
  };
}

/**
 * The concurrent index (`--router-event-threads N > 1`): N piscina writer threads, each worker id
 * pinned to one thread on first sight (its events apply in order there), all writing one block
 * table in SharedArrayBuffer memory that the main thread reads directly — `findMatches` never
 * waits for a message. Growth is done by a drained writer into a new buffer that is then
 * published ("the snapshot"); reads continue on the old buffer meanwhile.
 */
export class PoolIndexer implements KvIndexer {
  readonly threads: number;
  private readonly lanes: Lane[] = [];
  private readonly owner = new Map<bigint, number>();
  private nextLane = 0;
  readonly slots: SlotRegistry;
  readonly reader: RadixIndexer;
  private tableRef: TableRef;
  private inflightBlocks = 0;
  private growing: Promise<void> | undefined;
  private pumpScheduled = false;
  private maxSlotNeeded = 0;
  private readonly maxBlocks: number;
  private readonly tier: StorageTier;
  private readonly approx: PoolOptions['approximate'];
  private tickTimer: NodeJS.Timeout | undefined;
  private closed = false;
  /** Test hook / metric: table generations published so far. */
  growths = 0;
  /** Which writer module the threads run (writer-entry.ts). */
  readonly writerKind: WriterEntry['kind'];

  private constructor(private readonly opts: PoolOptions) {
    this.threads = Math.max(1, opts.threads ?? 4);
    const maxSlots = Math.max(32, opts.maxSlots ?? 64);
    const table = BlockTable.createShared(opts.initialCapacity ?? 1 << 16, maxSlots);
    const treeSize = new SharedArrayBuffer(maxSlots * TREE_SIZE_STRIDE * 4);
    this.tableRef = { gen: 0, parts: table.parts(), treeSize };
    this.slots = new SlotRegistry(holderWords(maxSlots));
    this.reader = new RadixIndexer({
      table,
      slots: this.slots,
      treeSize: new Int32Array(treeSize),
      onApplied: opts.onApplied,
    });
    this.maxBlocks = opts.maxBlocksPerEvent ?? 65_536;
    this.tier = opts.tier ?? 'device';
    this.approx = opts.approximate;
    const entry = writerEntry();
    this.writerKind = entry.kind;
    for (let i = 0; i < this.threads; i++) {
      const pool = new Piscina({
        filename: entry.filename,
        minThreads: 1,
        maxThreads: 1,
        idleTimeout: 2 ** 31 - 1,
        execArgv: entry.execArgv,
      });
      this.lanes.push({
        id: i,
        pool,
        builder: new OpsBuilder(sharedWords(BUILDER_WORDS)),
        sealed: [],
        spare: [],
        busy: false,
        tail: Promise.resolve(),
        slots: new Set(),
        workers: new Set(),
      });
    }
    if (this.approx) {
      this.tickTimer = setInterval(() => void this.expireNow(), 1000);
      this.tickTimer.unref();
    }
  }

  static create(opts: PoolOptions = {}): PoolIndexer {
    return new PoolIndexer(opts);
  }

  // ---- writes (queued per lane, applied by the owner thread) ------------------------------------

  private laneOf(worker: bigint): Lane {
    let i = this.owner.get(worker);
    if (i === undefined) {
      i = this.nextLane++ % this.threads;
      this.owner.set(worker, i);
      this.lanes[i]!.workers.add(worker);
    }
    return this.lanes[i]!;
  }

  private acquire(lane: Lane, worker: bigint, rank: number): number {
    let slot = this.slots.lookup(worker, rank);
    if (slot < 0) {
      slot = this.slots.acquire(worker, rank);
      lane.builder.register.push([slot, worker, rank]);
      lane.slots.add(slot);
      if (slot + 1 > this.maxSlotNeeded) this.maxSlotNeeded = slot + 1;
    }
    return slot;
  }

  applyEvent(ev: RouterEvent): void {
    // Block values are validated while they are encoded (one pass); an invalid event is dropped
    // from the builder before anything is committed (no slot, no lane pinned).
    const c = classifyEvent(ev, this.maxBlocks, this.tier, false);
    if (c.status !== undefined) {
      this.reader.countStatus(c.status, c.kind);
      return;
    }
    const worker = ev.worker_id as bigint;
    const rank = ev.event.dp_rank ?? 0;
    if (c.kind === 'cleared') {
      const lane = this.laneOf(worker);
      const b = lane.builder;
      const slots = this.slots.slotsOf(worker);
      if (slots.length === 0) {
        this.reader.countStatus('ok', 'cleared');
        return;
      }
      b.ensure(2 + slots.length);
      b.buf[b.len++] = OP_CLEAR;
      b.buf[b.len++] = slots.length;
      for (const s of slots) b.buf[b.len++] = s;
      this.afterWrite(lane);
      return;
    }
    const lane = this.lanes[this.owner.get(worker) ?? this.nextLane % this.threads]!;
    const b = lane.builder;
    const stored = c.kind === 'stored';
    const header = stored ? STORED_HEADER : REMOVED_HEADER;
    b.ensure(header + c.words);
    const at = b.len;
    if (!encodeChecked(ev, b.buf, at + header)) {
      this.reader.countStatus('invalid_block', c.kind);
      return;
    }
    if (stored) {
      const parent = (ev.event.data as { stored: { parent_hash: bigint | null } }).stored.parent_hash ?? null;
      if (parent !== null && this.slots.lookup(worker, rank) < 0) {
        // A rank we never saw cannot hold the parent: reject without registering it.
        this.reader.countStatus('parent_block_not_found', 'stored');
        return;
      }
      this.laneOf(worker);
      b.buf[at] = OP_STORED;
      b.buf[at + 1] = this.acquire(lane, worker, rank);
      b.buf[at + 2] = c.blocks;
      b.buf[at + 3] = parent === null ? 0 : 1;
      b.buf[at + 4] = parent === null ? 0 : u64Parts.lo(parent);
      b.buf[at + 5] = parent === null ? 0 : u64Parts.hi(parent);
      b.blocks += c.blocks;
    } else {
      const slot = this.slots.lookup(worker, rank);
      if (slot < 0) {
        this.reader.countStatus(c.blocks > 0 ? 'block_not_found' : 'ok', 'removed');
        return;
      }
      b.buf[at] = OP_REMOVED;
      b.buf[at + 1] = slot;
      b.buf[at + 2] = c.blocks;
    }
    b.len = at + header + c.words;
    this.afterWrite(lane);
  }

  /** Approximate mode: records a routing decision in the owner thread of the worker. */
  recordRouting(worker: WorkerWithDpRank, local: Uint32Array, seq: Uint32Array, n = local.length >> 1): void {
    if (!this.approx)
      throw new KvrError('not_approximate', 'recordRouting needs a pool created with `approximate`');
    const lane = this.laneOf(worker.worker_id);
    const slot = this.acquire(lane, worker.worker_id, worker.dp_rank);
    const b = lane.builder;
    b.ensure(RECORD_HEADER + 4 * n);
    let at = b.len;
    b.buf[at++] = OP_RECORD;
    b.buf[at++] = slot;
    b.buf[at++] = n;
    for (let i = 0; i < n; i++) {
      b.buf[at++] = local[2 * i]!;
      b.buf[at++] = local[2 * i + 1]!;
      b.buf[at++] = seq[2 * i]!;
      b.buf[at++] = seq[2 * i + 1]!;
    }
    b.len = at;
    b.blocks += n;
    this.afterWrite(lane);
  }

  private drop(slots: number[]): void {
    for (const s of slots) {
      const w = this.slots.workers[s];
      if (!w) continue;
      const lane = this.laneOf(w.worker_id);
      this.slots.retire(s);
      const b = lane.builder;
      b.ensure(3);
      b.buf[b.len++] = OP_DROP;
      b.buf[b.len++] = 1;
      b.buf[b.len++] = s;
      b.release.push(s);
      this.afterWrite(lane);
    }
  }

  removeWorker(workerId: bigint): void {
    this.drop(this.slots.slotsOf(workerId));
  }

  removeWorkerDpRank(workerId: bigint, dpRank: number): void {
    const s = this.slots.lookup(workerId, dpRank);
    if (s >= 0) this.drop([s]);
  }

  private afterWrite(lane: Lane): void {
    if (lane.builder.blocks >= BATCH_BLOCKS) this.seal(lane);
    if (!this.pumpScheduled) {
      this.pumpScheduled = true;
      setImmediate(() => {
        this.pumpScheduled = false;
        this.pump();
      });
    }
  }

  private seal(lane: Lane): void {
    const b = lane.builder;
    if (b.empty && b.release.length === 0) return;
    // Hand the builder's own buffer over (no copy); the next builder takes a spare one.
    lane.sealed.push({
      ops: [b.buf.subarray(0, b.len)],
      blocks: b.blocks,
      register: b.register,
      release: b.release,
    });
    lane.builder = new OpsBuilder(lane.spare.pop() ?? sharedWords(BUILDER_WORDS));
  }

  private pump(): void {
    if (this.growing || this.closed) return;
    let pending = 0;
    for (const lane of this.lanes) {
      this.seal(lane);
      for (const b of lane.sealed) pending += b.blocks;
    }
    if (pending === 0 && this.lanes.every((l) => l.sealed.length === 0)) return;
    const t = this.reader.table;
    if (
      this.maxSlotNeeded > t.maxSlots ||
      t.occupied + this.inflightBlocks + pending > t.capacity * MAX_LOAD
    ) {
      this.grow(pending);
      return;
    }
    for (const lane of this.lanes) {
      if (lane.busy || lane.sealed.length === 0) continue;
      this.dispatch(lane, merge(lane.sealed.splice(0)));
    }
  }

  private dispatch(lane: Lane, batch: Batch): void {
    lane.busy = true;
    this.inflightBlocks += batch.blocks;
    const task: Task = {
      kind: 'ops',
      table: this.tableRef,
      register: batch.register,
      ops: batch.ops,
      now: this.approx ? this.approx.now() : 0,
      approx: this.approxConfig(),
      maxBlocks: this.maxBlocks,
    };
    const run = lane.pool.run(task) as Promise<OpsResult>;
    lane.tail = run
      .then((res) => {
        this.reader.addCounts(res.counts);
        if (res.error) this.opts.onError?.(KvrError.relay(res.error.code, res.error.message));
      })
      .catch((e: unknown) => this.onCrash(lane, e))
      .finally(() => {
        this.inflightBlocks -= batch.blocks;
        // The writer is done reading these (or died): reuse them.
        for (const o of batch.ops)
          if (lane.spare.length < SPARE_BUFFERS) lane.spare.push(new Int32Array(o.buffer));
        for (const s of batch.release) {
          this.slots.recycle(s);
          lane.slots.delete(s);
        }
        lane.busy = false;
        this.pump();
      });
  }

  private approxConfig(): ApproxConfig | undefined {
    if (!this.approx) return undefined;
    const { ttlSecs, maxTreeSize, pruneTargetRatio } = this.approx;
    // Each owner prunes against its share of the global budget.
    return { ttlSecs, maxTreeSize: Math.max(1, Math.floor(maxTreeSize / this.threads)), pruneTargetRatio };
  }

  private grow(pendingBlocks: number): void {
    this.growing = (async () => {
      await Promise.all(this.lanes.map((l) => l.tail));
      const t = this.reader.table;
      const needed = t.occupied + pendingBlocks;
      // At least x1.23 (GROW_LOAD for what is there), and room for every queued block at just
      // under MAX_LOAD. Queued blocks are an upper bound on inserts (blocks already in the table
      // insert nothing), so sizing them at GROW_LOAD would leave a large backlog's table far
      // emptier than GROW_LOAD once applied.
      const capacity = Math.max(
        t.capacity,
        capacityFor(t.occupied + 1, GROW_LOAD),
        capacityFor(needed + 1, MAX_LOAD - 0.05),
      );
      let maxSlots = t.maxSlots;
      while (maxSlots < this.maxSlotNeeded) maxSlots *= 2;
      const res = (await this.lanes[0]!.pool.run({
        kind: 'grow',
        table: this.tableRef,
        capacity,
        maxSlots,
      } satisfies Task)) as GrowResult;
      this.tableRef = { gen: this.tableRef.gen + 1, parts: res.parts, treeSize: res.treeSize };
      this.reader.adoptTable(BlockTable.fromParts(res.parts), new Int32Array(res.treeSize));
      this.growths++;
    })().finally(() => {
      this.growing = undefined;
      this.pump();
    });
  }

  private onCrash(lane: Lane, e: unknown): void {
    if (this.closed) return;
    const message = e instanceof Error ? e.message : String(e);
    this.opts.onError?.(new KvrError('writer_crashed', `index writer thread ${lane.id} died: ${message}`));
    // The replacement thread knows none of this lane's external hashes: drop the lane's blocks
    // from the shared table and have the event layer resync its workers.
    const slots = [...lane.slots].filter((s) => this.slots.workers[s] !== undefined);
    const register = slots.map(
      (s) =>
        [s, this.slots.workers[s]!.worker_id, this.slots.workers[s]!.dp_rank] as [number, bigint, number],
    );
    const workers = [...lane.workers];
    lane.tail = (
      lane.pool.run({
        kind: 'reset',
        table: this.tableRef,
        slots,
        register,
      } satisfies Task) as Promise<unknown>
    ).then(
      () => this.opts.onResync?.(workers),
      (err: unknown) =>
        this.opts.onError?.(
          new KvrError('writer_crashed', `reset of writer ${lane.id} failed: ${String(err)}`),
        ),
    );
  }

  async flush(): Promise<void> {
    for (;;) {
      this.pump();
      if (this.growing) {
        await this.growing;
        continue;
      }
      const tails = this.lanes.map((l) => l.tail);
      await Promise.all(tails);
      const idle =
        !this.growing &&
        this.lanes.every(
          (l, i) =>
            !l.busy &&
            l.sealed.length === 0 &&
            l.builder.empty &&
            l.builder.release.length === 0 &&
            l.tail === tails[i],
        );
      if (idle) return;
    }
  }

  /** Runs approximate-mode expiry in every owner thread now. */
  async expireNow(): Promise<void> {
    if (!this.approx || this.closed) return;
    const now = this.approx.now();
    await Promise.all(
      this.lanes.map(
        (l) =>
          (l.tail = l.tail.then(() =>
            l.pool
              .run({ kind: 'tick', table: this.tableRef, now, approx: this.approxConfig() } satisfies Task)
              .then(() => undefined),
          )),
      ),
    );
  }

  // ---- reads (main thread, straight from shared memory) -----------------------------------------

  matchSeq(seq: Uint32Array, n = seq.length >> 1, earlyExitSingle = false): MatchResult {
    return this.reader.matchSeq(seq, n, earlyExitSingle);
  }
  findMatchesBySeq(seq: Uint32Array, opts?: FindOptions): OverlapScores {
    return this.reader.findMatchesBySeq(seq, opts);
  }
  findMatches(local: readonly bigint[] | Uint32Array, opts?: FindOptions): OverlapScores {
    return this.reader.findMatches(local, opts);
  }
  treeSizes(): Map<string, number> {
    return this.reader.treeSizes();
  }
  appliedCounts(): Map<string, number> {
    return this.reader.appliedCounts();
  }
  slotOf(workerId: bigint, dpRank: number): number {
    return this.slots.lookup(workerId, dpRank);
  }
  totalPairs(): number {
    return this.reader.totalPairs();
  }
  /** Shared table bytes (writers' external-hash maps are counted by `writerBytes`). */
  bytes(): number {
    return this.reader.table.bytes();
  }

  /** Bytes of the writers' private external-hash maps. */
  async writerBytes(): Promise<number> {
    const r = (await Promise.all(this.lanes.map((l) => l.pool.run({ kind: 'stats' } satisfies Task)))) as {
      extBytes: number;
    }[];
    return r.reduce((a, b) => a + b.extBytes, 0);
  }

  /** Per-worker consistent dump: each owner thread dumps its own slots after the queue drains. */
  async dump(): Promise<RouterEvent[]> {
    await this.flush();
    const parts = await Promise.all(
      this.lanes.map((l) => {
        const register = [...l.slots]
          .filter((s) => this.slots.workers[s] !== undefined)
          .map(
            (s) =>
              [s, this.slots.workers[s]!.worker_id, this.slots.workers[s]!.dp_rank] as [
                number,
                bigint,
                number,
              ],
          );
        return l.pool.run({ kind: 'dump', table: this.tableRef, register } satisfies Task) as Promise<
          RouterEvent[]
        >;
      }),
    );
    return parts.flat();
  }

  /** Test hook: kills writer thread `lane` (the pool replaces it and resyncs its workers). */
  crashWriter(lane: number): Promise<void> {
    const l = this.lanes[lane]!;
    l.tail = l.tail.then(() => this.onCrashRun(l));
    return l.tail;
  }

  private async onCrashRun(l: Lane): Promise<void> {
    try {
      await l.pool.run({ kind: 'crash' } satisfies Task);
    } catch (e) {
      this.onCrash(l, e);
      await l.tail;
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await this.flush().catch(() => undefined);
    this.closed = true;
    if (this.tickTimer) clearInterval(this.tickTimer);
    await Promise.all(this.lanes.map((l) => l.pool.destroy()));
  }
}

/**
 * The index for `--router-event-threads N`: the single-threaded index for N = 1 (or when
 * `KVR_INDEXER_SINGLE_THREAD=1` asks for it while debugging), the pool otherwise.
 */
export function createKvIndexer(
  opts: PoolOptions = {},
): KvIndexer & { matchSeq(seq: Uint32Array, n?: number): MatchResult } {
  const single = process.env.KVR_INDEXER_SINGLE_THREAD === '1' || (opts.threads ?? 4) <= 1;
  if (single && !opts.approximate) return new RadixIndexer(opts);
  return PoolIndexer.create(single ? { ...opts, threads: 1 } : opts);
}
