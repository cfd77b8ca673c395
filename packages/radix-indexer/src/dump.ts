import {
  sequenceHashOf,
  u64FromParts,
  type RouterEvent,
  type StorageTier,
  type WorkerWithDpRank,
} from '@kvrouter/protocols';
import type { BlockTable } from './block-table.js';
import type { ExtMap } from './ext-map.js';
import {
  EXT_HI,
  EXT_LO,
  EXT_SEQ_HI,
  EXT_SEQ_LO,
  HOLDERS,
  KEY_HI,
  KEY_LO,
  META,
  META_HINT,
  META_LIVE_CHILD,
  META_STATE,
} from './layout.js';

/**
 * Single-block Stored events for one slot of `t` (its external map in `ext`), parents before
 * children; blocks whose parent the slot does not hold (transitively) are unreachable and skipped
 * (PROTOCOL §3.7).
 */
export function dumpSlotEvents(
  t: BlockTable,
  ext: ExtMap,
  tier: StorageTier,
  slot: number,
  w: WorkerWithDpRank,
  out: RouterEvent[],
): void {
  const words = t.words;
  const wi = HOLDERS + (slot >> 5);
  const bit = 1 << (slot & 31);
  // Block identity -> one external hash of this slot that maps to it.
  const extOf = new Map<bigint, bigint>();
  const xt = ext.get(slot);
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
        storage_tier: tier,
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
