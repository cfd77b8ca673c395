import { homeOf, type BlockTable } from './block-table.js';
import { HOLDERS, KEY_HI, KEY_LO, META, META_EMPTY, META_LIVE_ROOT, META_STATE } from './layout.js';

/** Depths probed together in `matchSeq`: the first chunk, and the most on long walks. */
const CHUNK_FIRST = 8;
export const CHUNK = 32;

/** Result buffers of one match walk, reused across calls (valid until the next call). */
export interface MatchResult {
  count: number;
  slots: Int32Array;
  depths: Int32Array;
}

/**
 * The hot path: walks `n` sequence hashes ((lo, hi) pairs), returning in `res`, for every slot
 * holding block 0, the number of leading blocks it holds contiguously. `active`, `offs` and `homes`
 * are the caller's scratch (`active`: `t.hw` words; `offs`, `homes`: CHUNK entries); `live` is the
 * slot registry's live mask. Returns the XOR of the prefetch reads (kept by the caller so they are
 * not optimised away).
 */
export function matchSeqInto(
  t: BlockTable,
  live: Int32Array,
  active: Int32Array,
  offs: Int32Array,
  homes: Int32Array,
  res: MatchResult,
  seq: Uint32Array,
  n: number,
  earlyExitSingle: boolean,
): number {
  const words = t.words;
  const stride = t.stride;
  const cap = t.capacity;
  const scale = t.scale;
  const hw = t.hw;
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
  return acc;
}
