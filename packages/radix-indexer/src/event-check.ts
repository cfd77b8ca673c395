import { U64_MAX, type RouterEvent, type StorageTier } from '@kvrouter/protocols';
import type { ApplyStatus, EventKind } from './types.js';

// Event validation and encoding: an event is checked whole before anything is applied.

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
