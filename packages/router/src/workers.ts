/**
 * The worker set of one router: instances with their runtime config (docs/protocol.md §6.4), their
 * (worker, dp_rank) candidates in ascending (id, rank) order, per-rank busy state (§11) and the
 * frontend's in-flight counts (§8.8).
 */
import { DEFAULT_MAX_NUM_BATCHED_TOKENS, RankBusyState } from '@kvrouter/core-cost';
import {
  invalidArgument,
  parseU64,
  workerKey,
  type WorkerId,
  type WorkerWithDpRank,
} from '@kvrouter/protocols';

/** What discovery knows about one worker instance. */
export interface WorkerConfig {
  workerId: bigint | number | string;
  /** `data_parallel_start_rank` (default 0). */
  dpStart?: number;
  /** `data_parallel_size` (default 1). */
  dpSize?: number;
  /** `total_kv_blocks`; null/absent = unknown (decode busy check skipped). */
  totalKvBlocks?: number | null;
  /** `max_num_batched_tokens`; null/absent = 10 000 000. */
  maxNumBatchedTokens?: number | null;
  /** `cpu` | `cuda` | …; absent counts as non-CPU (§6.3). */
  deviceType?: string | null;
  /** Extra taints (`runtime_config.taints`). */
  taints?: Iterable<string> | null;
  /** `topology_domains`: each `{d: v}` becomes the taint `dynamo.topology/d=v` (§13). */
  topologyDomains?: Record<string, string> | null;
}

export class RankEntry {
  readonly key: string;
  readonly busy = new RankBusyState();
  /** Position in the current decision's candidate list, valid while `candEpoch` is that decision's. */
  candIndex = -1;
  candEpoch = -1;
  /** This rank's slot in the load model and its generation (`MultiWorkerSequences.slotOf`); −1 = look up. */
  loadSlot = -1;
  loadGen = 0;
  constructor(
    readonly worker: WorkerWithDpRank,
    readonly owner: WorkerEntry,
  ) {
    this.key = workerKey(worker);
  }
}

export class WorkerEntry {
  ranks: RankEntry[] = [];
  dpStart = 0;
  dpSize = 1;
  totalKvBlocks: number | null = null;
  maxNumBatchedTokens = DEFAULT_MAX_NUM_BATCHED_TOKENS;
  deviceType: string | undefined;
  taints: ReadonlySet<string> = new Set();
  /** Requests dispatched to it and not yet freed (§8.8). */
  inflight = 0;
  /** Memo of the §11 verdict for one routing decision (`epoch`). */
  busyEpoch = -1;
  busyNow = false;
  /** Truth check (`truth.ts`): the index is wrong or silent for it; its overlap counts as 0. */
  loadOnly = false;
  constructor(readonly id: WorkerId) {}
}

const intIn = (field: string, v: unknown, min: number): number => {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min)
    throw invalidArgument(field, `must be an integer >= ${min}`, v);
  return v;
};

interface NormalizedConfig {
  id: WorkerId;
  dpStart: number;
  dpSize: number;
  totalKvBlocks: number | null;
  maxNumBatchedTokens: number;
  deviceType: string | undefined;
  taints: Set<string>;
}

/** Checks every field before anything is applied. */
export function normalizeWorkerConfig(c: WorkerConfig): NormalizedConfig {
  if (!c || typeof c !== 'object') throw invalidArgument('worker', 'must be an object', c);
  let id: bigint;
  try {
    id = parseU64(c.workerId);
  } catch {
    throw invalidArgument('workerId', 'must be a u64', c.workerId);
  }
  const dpStart = intIn('dpStart', c.dpStart ?? 0, 0);
  const dpSize = intIn('dpSize', c.dpSize ?? 1, 1);
  if (dpStart + dpSize > 0xffffffff + 1)
    throw invalidArgument('dpSize', 'must keep ranks within u32', dpSize);
  const totalKvBlocks = c.totalKvBlocks == null ? null : intIn('totalKvBlocks', c.totalKvBlocks, 0);
  const maxNumBatchedTokens =
    c.maxNumBatchedTokens == null
      ? DEFAULT_MAX_NUM_BATCHED_TOKENS
      : intIn('maxNumBatchedTokens', c.maxNumBatchedTokens, 1);
  if (c.deviceType != null && typeof c.deviceType !== 'string')
    throw invalidArgument('deviceType', 'must be a string', c.deviceType);
  const taints = new Set<string>();
  if (c.taints != null) {
    for (const t of c.taints) {
      if (typeof t !== 'string') throw invalidArgument('taints', 'must contain strings only', t);
      taints.add(t);
    }
  }
  if (c.topologyDomains != null) {
    if (typeof c.topologyDomains !== 'object')
      throw invalidArgument('topologyDomains', 'must be an object', c.topologyDomains);
    for (const [d, v] of Object.entries(c.topologyDomains)) {
      if (typeof v !== 'string') throw invalidArgument(`topologyDomains.${d}`, 'must be a string', v);
      taints.add(`dynamo.topology/${d}=${v}`);
    }
  }
  return {
    id: id as WorkerId,
    dpStart,
    dpSize,
    totalKvBlocks,
    maxNumBatchedTokens,
    deviceType: c.deviceType ?? undefined,
    taints,
  };
}

export interface WorkerChange {
  added: boolean;
  /** Ranks that existed before and are gone now (their bookings and index entries must go). */
  removedRanks: number[];
}

/** Instances by id plus the flattened, ordered candidate list. */
export class WorkerSet {
  private readonly byId = new Map<bigint, WorkerEntry>();
  /** Workers in ascending id order. */
  workers: WorkerEntry[] = [];
  /** Every (worker, rank) in ascending (id, rank) order. */
  ranks: RankEntry[] = [];
  /** Rank by `"<worker_id>:<dp_rank>"`, the key of `OverlapScores`. */
  readonly byKey = new Map<string, RankEntry>();

  get size(): number {
    return this.byId.size;
  }

  get(id: bigint): WorkerEntry | undefined {
    return this.byId.get(id);
  }

  rank(id: bigint, dpRank: number): RankEntry | undefined {
    const w = this.byId.get(id);
    if (!w) return undefined;
    const i = dpRank - w.dpStart;
    return i >= 0 && i < w.ranks.length ? w.ranks[i] : undefined;
  }

  /** Adds or updates a worker; keeps busy state of ranks that survive. */
  upsert(cfg: NormalizedConfig): WorkerChange {
    let w = this.byId.get(cfg.id);
    const added = !w;
    if (!w) {
      w = new WorkerEntry(cfg.id);
      this.byId.set(cfg.id, w);
    }
    const old = new Map<number, RankEntry>();
    for (const r of w.ranks) old.set(r.worker.dp_rank, r);
    const ranks: RankEntry[] = [];
    for (let d = cfg.dpStart; d < cfg.dpStart + cfg.dpSize; d++) {
      ranks.push(old.get(d) ?? new RankEntry({ worker_id: cfg.id, dp_rank: d }, w));
      old.delete(d);
    }
    w.ranks = ranks;
    w.dpStart = cfg.dpStart;
    w.dpSize = cfg.dpSize;
    w.totalKvBlocks = cfg.totalKvBlocks;
    w.maxNumBatchedTokens = cfg.maxNumBatchedTokens;
    w.deviceType = cfg.deviceType;
    w.taints = cfg.taints;
    this.reorder();
    return { added, removedRanks: [...old.keys()] };
  }

  remove(id: bigint): WorkerEntry | undefined {
    const w = this.byId.get(id);
    if (!w) return undefined;
    this.byId.delete(id);
    this.reorder();
    return w;
  }

  private reorder(): void {
    this.workers = [...this.byId.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    this.ranks = this.workers.flatMap((w) => w.ranks);
    this.byKey.clear();
    for (const r of this.ranks) this.byKey.set(r.key, r);
  }
}
