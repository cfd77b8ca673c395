/**
 * Test helpers shared by this package's tests (not exported from the package): event builders,
 * manual timers, and index comparison through dumps.
 */
import type {
  ExternalSequenceBlockHash,
  KvCacheEventData,
  LocalBlockHash,
  RouterEvent,
} from '@kvrouter/protocols';
import type { Timers } from './publisher/publisher.js';

export const stored = (parent: bigint | null, blocks: Array<[bigint, bigint]>): KvCacheEventData => ({
  stored: {
    parent_hash: parent as ExternalSequenceBlockHash | null,
    start_position: null,
    blocks: blocks.map(([b, t]) => ({
      block_hash: b as ExternalSequenceBlockHash,
      tokens_hash: t as LocalBlockHash,
      mm_extra_info: null,
    })),
  },
});

/** A chain of blocks whose external hash is 1000 + its token hash (easy to read in failures). */
export const chain = (parent: bigint | null, tokens: bigint[]): KvCacheEventData =>
  stored(
    parent,
    tokens.map((t) => [1000n + t, t]),
  );

export const removed = (hashes: bigint[]): KvCacheEventData => ({
  removed: { block_hashes: hashes as ExternalSequenceBlockHash[] },
});

/** Timers fired by hand: `advance(ms)` runs every timer due by then, in due order. */
export class ManualTimers implements Timers {
  now = 0;
  private seq = 0;
  readonly pending = new Map<number, { at: number; ms: number; fn: () => void }>();

  setTimeout = (fn: () => void, ms: number): unknown => {
    const id = ++this.seq;
    this.pending.set(id, { at: this.now + ms, ms, fn });
    return id;
  };

  clearTimeout = (h: unknown): void => {
    this.pending.delete(h as number);
  };

  /** Delays of the timers now pending, in creation order. */
  delays(): number[] {
    return [...this.pending.values()].map((t) => t.ms);
  }

  advance(ms: number): void {
    const end = this.now + ms;
    for (;;) {
      let next: [number, { at: number; fn: () => void }] | null = null;
      for (const e of this.pending) if (e[1].at <= end && (next === null || e[1].at < next[1].at)) next = e;
      if (next === null) break;
      this.pending.delete(next[0]);
      this.now = next[1].at;
      next[1].fn();
    }
    this.now = end;
  }
}

/** `worker:rank:parent->block` lines of a dump, sorted: equal sets mean equal indexes (§3.7). */
export function dumpKey(events: readonly RouterEvent[]): string[] {
  const out: string[] = [];
  for (const e of events) {
    const d = e.event.data;
    if (d === 'cleared' || !('stored' in d)) continue;
    let parent = d.stored.parent_hash as bigint | null;
    for (const b of d.stored.blocks) {
      out.push(`${e.worker_id}:${e.event.dp_rank}:${parent ?? '-'}->${b.block_hash}/${b.tokens_hash}`);
      parent = b.block_hash;
    }
  }
  return out.sort();
}

export const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

export async function waitFor(
  cond: () => boolean | Promise<boolean>,
  timeoutMs = 5000,
  stepMs = 5,
): Promise<boolean> {
  const end = performance.now() + timeoutMs;
  for (;;) {
    if (await cond()) return true;
    if (performance.now() > end) return false;
    await new Promise((r) => setTimeout(r, stepMs));
  }
}
