/**
 * Messages between the pool (main thread) and its writer threads. Ops travel as one Int32Array
 * per batch (a view of a SharedArrayBuffer the pool reuses once the task completes); each op
 * starts with its code:
 *
 *   OP_STORED   slot, n, hasParent, parentExtLo, parentExtHi, then n × (extLo, extHi, localLo, localHi)
 *   OP_REMOVED  slot, n, then n × (extLo, extHi, 0, 0)
 *   OP_CLEAR    count, slots...          (Cleared: drop blocks, keep the slots)
 *   OP_DROP     count, slots...          (removeWorker / removeWorkerDpRank: drop and forget)
 *   OP_RECORD   slot, n, then n × (localLo, localHi, seqLo, seqHi)   (approximate mode)
 */
import type { SharedTableParts } from '../block-table.js';

export const OP_STORED = 1;
export const OP_REMOVED = 2;
export const OP_CLEAR = 3;
export const OP_DROP = 4;
export const OP_RECORD = 5;

export const STORED_HEADER = 6;
export const REMOVED_HEADER = 3;
export const RECORD_HEADER = 3;

export interface ApproxConfig {
  ttlSecs: number;
  maxTreeSize: number;
  pruneTargetRatio: number;
}

export interface TableRef {
  gen: number;
  parts: SharedTableParts;
  /** Per-slot block counts (Int32Array over it, maxSlots long). */
  treeSize: SharedArrayBuffer;
}

export type Task =
  | {
      kind: 'ops';
      table: TableRef;
      /** Slots first seen since the last task: [slot, worker_id, dp_rank]. */
      register: [number, bigint, number][];
      /** Op runs applied in order. */
      ops: Int32Array[];
      now: number;
      approx?: ApproxConfig;
      maxBlocks: number;
    }
  | { kind: 'grow'; table: TableRef; capacity: number; maxSlots: number }
  | { kind: 'dump'; table: TableRef; register: [number, bigint, number][] }
  | { kind: 'reset'; table: TableRef; slots: number[]; register: [number, bigint, number][] }
  | { kind: 'tick'; table: TableRef; now: number; approx?: ApproxConfig }
  | { kind: 'stats' }
  | { kind: 'crash' };

export interface OpsResult {
  /** Applied-event counters, STATUSES × KINDS (see indexer.ts). */
  counts: Float64Array;
  error?: { code: string; message: string };
}

export interface GrowResult {
  parts: SharedTableParts;
  treeSize: SharedArrayBuffer;
  entries: number;
}
