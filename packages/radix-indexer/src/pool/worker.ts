/**
 * A writer thread of the pool. It owns the external-hash maps of the workers pinned to it and
 * applies their events to the shared block table; the main thread only reads that table.
 * State survives between tasks (piscina keeps the thread); a crash loses it, and the pool then
 * resets this thread's slots and asks for resyncs.
 */
import type { RouterEvent } from '@kvrouter/protocols';
import { ApproxIndexer } from '../approximate.js';
import { BlockTable } from '../block-table.js';
import { RadixIndexer } from '../indexer.js';
import { SlotRegistry } from '../slots.js';
import { TREE_SIZE_STRIDE, holderWords } from '../layout.js';
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

let gen = -1;
let table: BlockTable | undefined;
let ix: RadixIndexer | undefined;
let approx: ApproxIndexer | undefined;
let now = 0;
const slots = new SlotRegistry(1);

function attach(ref: TableRef, approxCfg?: ApproxConfig): RadixIndexer {
  if (ref.gen !== gen || !ix) {
    table = BlockTable.fromParts(ref.parts);
    const ts = new Int32Array(ref.treeSize);
    slots.ensureWords(holderWords(table.maxSlots));
    if (!ix) {
      if (approxCfg) {
        approx = new ApproxIndexer({ ...approxCfg, now: () => now, table, slots, treeSize: ts });
        ix = approx.inner;
      } else {
        ix = new RadixIndexer({ table, slots, treeSize: ts });
      }
    } else {
      ix.adoptTable(table, ts);
    }
    gen = ref.gen;
  }
  return ix;
}

function register(list: [number, bigint, number][]): void {
  for (const [slot, worker, rank] of list) slots.assign(slot, worker, rank);
}

function runOps(t: Extract<Task, { kind: 'ops' }>): OpsResult {
  const index = attach(t.table, t.approx);
  register(t.register);
  now = t.now;
  approx?.expire(now);
  const before = index.countsSnapshot();
  try {
    for (const ops of t.ops) applyOps(index, ops);
  } catch (e) {
    const err = e as { code?: string; message?: string };
    return {
      counts: index.countsSince(before),
      error: { code: err.code ?? 'internal', message: err.message ?? String(e) },
    };
  } finally {
    index.table.publishInserts();
  }
  return { counts: index.countsSince(before) };
}

function applyOps(index: RadixIndexer, ops: Int32Array): void {
  let i = 0;
  {
    while (i < ops.length) {
      const op = ops[i]!;
      if (op === OP_STORED) {
        const slot = ops[i + 1]!;
        const n = ops[i + 2]!;
        const w = slots.workers[slot];
        // A slot this thread never saw registered (events queued before a reset after a crash)
        // is skipped; the resync that follows restores it.
        if (w)
          index.applyStoredRaw(
            slot,
            w.worker_id,
            w.dp_rank,
            ops[i + 3] === 1,
            ops[i + 4]!,
            ops[i + 5]!,
            ops,
            i + STORED_HEADER,
            n,
          );
        i += STORED_HEADER + 4 * n;
      } else if (op === OP_REMOVED) {
        const n = ops[i + 2]!;
        index.applyRemovedRaw(ops[i + 1]!, ops, i + REMOVED_HEADER, n);
        i += REMOVED_HEADER + 4 * n;
      } else if (op === OP_CLEAR || op === OP_DROP) {
        // Consecutive drops (a fleet leaving) share one O(table) pass instead of one each.
        const set = new Set<number>();
        let clears = 0;
        while (i < ops.length && ops[i] === op) {
          const count = ops[i + 1]!;
          for (let k = 0; k < count; k++) set.add(ops[i + 2 + k]!);
          i += 2 + count;
          clears++;
        }
        index.clearSlots(set, op === OP_DROP);
        if (op === OP_CLEAR) for (let k = 0; k < clears; k++) index.countCleared();
      } else if (op === OP_RECORD) {
        const slot = ops[i + 1]!;
        const n = ops[i + 2]!;
        const local = new Uint32Array(2 * n);
        const seq = new Uint32Array(2 * n);
        for (let k = 0, at = i + RECORD_HEADER; k < n; k++, at += 4) {
          local[2 * k] = ops[at]!;
          local[2 * k + 1] = ops[at + 1]!;
          seq[2 * k] = ops[at + 2]!;
          seq[2 * k + 1] = ops[at + 3]!;
        }
        const w = slots.workers[slot];
        if (w) approx?.recordRouting(w, local, seq, n);
        i += RECORD_HEADER + 4 * n;
      } else {
        throw new Error(`unknown op ${op} at ${i}`);
      }
    }
  }
}

function grow(t: Extract<Task, { kind: 'grow' }>): GrowResult {
  const old = BlockTable.fromParts(t.table.parts);
  const next = BlockTable.createShared(t.capacity, t.maxSlots);
  old.copyInto(next, true);
  const oldTs = new Int32Array(t.table.treeSize);
  let treeSize = t.table.treeSize;
  if (t.maxSlots !== old.maxSlots) {
    treeSize = new SharedArrayBuffer(t.maxSlots * TREE_SIZE_STRIDE * 4);
    new Int32Array(treeSize).set(oldTs.subarray(0, Math.min(oldTs.length, t.maxSlots * TREE_SIZE_STRIDE)));
  }
  return { parts: next.parts(), treeSize, entries: Atomics.load(next.ctrl, 0) };
}

function dump(t: Extract<Task, { kind: 'dump' }>): RouterEvent[] {
  const index = attach(t.table);
  register(t.register);
  const out: RouterEvent[] = [];
  for (const [slot] of t.register) {
    const w = slots.workers[slot];
    if (w) index.dumpSlot(slot, w, out);
  }
  return out;
}

export default function handle(t: Task): unknown {
  switch (t.kind) {
    case 'ops':
      return runOps(t);
    case 'grow':
      return grow(t);
    case 'dump':
      return dump(t);
    case 'reset': {
      const index = attach(t.table);
      register(t.register);
      index.clearSlots(new Set(t.slots), false);
      return true;
    }
    case 'tick': {
      attach(t.table, t.approx);
      now = t.now;
      approx?.expire(now);
      return true;
    }
    case 'stats':
      return { extBytes: ix ? ix.ext.bytes() : 0 };
    case 'crash':
      // Test hook: end this thread the hard way.
      process.exit(1);
  }
}
