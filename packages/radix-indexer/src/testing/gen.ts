/** Event builders and a random workload generator for index tests (seeded, reproducible). */
import type { RouterEvent } from '@kvrouter/protocols';
import { Rng } from '@kvrouter/testkit';

export function stored(
  worker: bigint,
  blocks: readonly { ext: bigint; local: bigint }[],
  parent: bigint | null = null,
  dp = 0,
  eventId = 1n,
): RouterEvent {
  return {
    worker_id: worker,
    storage_tier: 'device',
    event: {
      event_id: eventId,
      dp_rank: dp,
      data: {
        stored: {
          parent_hash: parent,
          start_position: null,
          blocks: blocks.map((b) => ({ block_hash: b.ext, tokens_hash: b.local, mm_extra_info: null })),
        },
      },
    },
  } as unknown as RouterEvent;
}

export function removed(worker: bigint, exts: readonly bigint[], dp = 0, eventId = 1n): RouterEvent {
  return {
    worker_id: worker,
    storage_tier: 'device',
    event: { event_id: eventId, dp_rank: dp, data: { removed: { block_hashes: [...exts] } } },
  } as unknown as RouterEvent;
}

export function cleared(worker: bigint, eventId = 1n): RouterEvent {
  return {
    worker_id: worker,
    storage_tier: 'device',
    event: { event_id: eventId, dp_rank: 0, data: 'cleared' },
  } as unknown as RouterEvent;
}

export type Op =
  | { kind: 'event'; ev: RouterEvent }
  | { kind: 'removeWorker'; worker: bigint }
  | { kind: 'removeWorkerDpRank'; worker: bigint; dp: number };

/**
 * Random workload over a shared content tree: prompts share prefixes, each rank stores chains
 * (sometimes continuing a chain it holds, sometimes with an unknown parent), evicts blocks in
 * random order (middle blocks included), and occasionally clears or leaves.
 */
export class Workload {
  readonly rng: Rng;
  readonly prompts: bigint[][] = [];
  private readonly held = new Map<string, { ext: bigint; depth: number; prompt: number }[]>();
  readonly workers: bigint[];
  readonly ranks: number;

  constructor(
    seed: number,
    opts: { workers?: number; ranks?: number; prompts?: number; maxLen?: number } = {},
  ) {
    this.rng = new Rng(seed);
    const nw = opts.workers ?? 6;
    this.ranks = opts.ranks ?? 2;
    // Worker ids above 2^53 so lossy number handling would show.
    this.workers = Array.from({ length: nw }, (_, i) => (1n << 60n) + BigInt(i) * 7919n + 11n);
    const maxLen = opts.maxLen ?? 12;
    const np = opts.prompts ?? 24;
    for (let p = 0; p < np; p++) {
      // Half the prompts extend an earlier one, so prefixes are shared.
      const base = p > 0 && this.rng.bool(0.5) ? this.rng.pick(this.prompts) : [];
      const cut = base.length > 0 ? this.rng.int(1, base.length) : 0;
      const len = this.rng.int(cut + 1, cut + maxLen);
      const path = base.slice(0, cut);
      while (path.length < len) path.push(this.rng.u64());
      this.prompts.push(path);
    }
  }

  /** Deterministic external hash of a prompt prefix on a rank (engines hash content the same way). */
  extOf(worker: bigint, dp: number, prompt: number, depth: number): bigint {
    let h = (worker * 31n + BigInt(dp) * 1_000_003n) & ((1n << 64n) - 1n);
    const path = this.prompts[prompt];
    for (let i = 0; i <= depth; i++) h = (h * 6364136223846793005n + path[i]) & ((1n << 64n) - 1n);
    return h;
  }

  next(): Op {
    const r = this.rng.next();
    const worker = this.rng.pick(this.workers);
    const dp = this.rng.int(0, this.ranks - 1);
    const key = `${worker}:${dp}`;
    const list = this.held.get(key) ?? [];
    if (r < 0.55) {
      const prompt = this.rng.int(0, this.prompts.length - 1);
      const path = this.prompts[prompt];
      const start = this.rng.bool(0.4) ? 0 : this.rng.int(0, path.length - 1);
      const end = this.rng.int(start + 1, path.length);
      let parent: bigint | null = start === 0 ? null : this.extOf(worker, dp, prompt, start - 1);
      if (this.rng.bool(0.05)) parent = this.rng.u64(); // unknown parent
      const blocks = [];
      for (let d = start; d < end; d++) {
        // Rarely an engine re-uses an external hash for other content.
        const ext =
          this.rng.bool(0.02) && list.length > 0
            ? this.rng.pick(list).ext
            : this.extOf(worker, dp, prompt, d);
        blocks.push({ ext, local: path[d] });
        list.push({ ext, depth: d, prompt });
      }
      this.held.set(key, list);
      return { kind: 'event', ev: stored(worker, blocks, parent, dp) };
    }
    if (r < 0.9) {
      const n = this.rng.int(1, 4);
      const exts: bigint[] = [];
      for (let i = 0; i < n; i++) {
        if (list.length > 0 && this.rng.bool(0.9)) {
          const j = this.rng.int(0, list.length - 1);
          exts.push(list[j].ext);
          list.splice(j, 1);
        } else exts.push(this.rng.u64());
      }
      return { kind: 'event', ev: removed(worker, exts, dp) };
    }
    if (r < 0.94) {
      for (let d = 0; d < this.ranks; d++) this.held.delete(`${worker}:${d}`);
      return { kind: 'event', ev: cleared(worker) };
    }
    if (r < 0.97) {
      this.held.delete(key);
      return { kind: 'removeWorkerDpRank', worker, dp };
    }
    for (let d = 0; d < this.ranks; d++) this.held.delete(`${worker}:${d}`);
    return { kind: 'removeWorker', worker };
  }

  /** A query: a stored prompt, a prefix of one, or one with a perturbed tail. */
  query(): bigint[] {
    const path = this.rng.pick(this.prompts);
    const q = path.slice(0, this.rng.int(1, path.length));
    if (this.rng.bool(0.3)) q.push(this.rng.u64());
    if (this.rng.bool(0.1) && q.length > 1) q[this.rng.int(0, q.length - 1)] = this.rng.u64();
    return q;
  }
}
