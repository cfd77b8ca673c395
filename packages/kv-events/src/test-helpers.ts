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
