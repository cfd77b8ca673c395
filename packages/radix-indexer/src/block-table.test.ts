import { describe, expect, it } from 'vitest';
import { Rng } from '@kvrouter/testkit';
import { BlockTable, homeOf } from './block-table.js';
import { HOLDERS, MAX_LOAD, META, META_HINT, META_LIVE_CHILD, META_STATE } from './layout.js';

describe('BlockTable', () => {
  it('homes spread keys over any capacity (fastrange) and never reach it', () => {
    // capacity 1000: scale = 1000 / 2^32; the largest mix (2^32 − 1) maps to floor(999.99…) = 999.
    const scale = 1000 * 2 ** -32;
    const counts = new Int32Array(1000);
    let outside = 0;
    for (let k = 0; k < 100_000; k++) {
      const h = homeOf(k, 0, scale); // sequential keys: the mix must spread them
      if (h < 0 || h >= 1000) outside++;
      else counts[h]!++;
    }
    expect(outside).toBe(0);
    expect(homeOf(-1, -1, scale)).toBeLessThan(1000);
    // 100 per bucket on average; a multiplicative mix keeps every bucket within 2x of that.
    expect(Math.min(...counts)).toBeGreaterThan(50);
    expect(Math.max(...counts)).toBeLessThan(200);
  });

  it('private mode: holds, releases and grows past MAX_LOAD keeping every key', () => {
    const rng = new Rng(3);
    const t = new BlockTable(16, 64);
    const keys: [number, number][] = [];
    for (let i = 0; i < 5000; i++) {
      const k: [number, number] = [rng.u32() | 0, rng.u32() | 0];
      keys.push(k);
      expect(t.hold(k[0], k[1], 7, 8, false, 0, i % 64)).toBe(true);
      expect(t.hold(k[0], k[1], 7, 8, false, 0, i % 64)).toBe(false); // already held
      expect(t.occupied / t.capacity).toBeLessThanOrEqual(MAX_LOAD);
    }
    expect(t.capacity & (t.capacity - 1)).not.toBe(0); // not a power of two
    keys.forEach(([lo, hi], i) => {
      const off = t.find(lo, hi);
      expect(off).toBeGreaterThanOrEqual(0);
      expect(t.words[off + HOLDERS + ((i % 64) >> 5)]! & (1 << ((i % 64) & 31))).not.toBe(0);
    });
    // Releasing the only holder leaves a tombstone: the key is gone, its neighbours are not.
    const off = t.find(keys[0]![0], keys[0]![1]);
    expect(t.clearBit(off, 0)).toBe(true);
    expect(t.find(keys[0]![0], keys[0]![1])).toBe(-1);
    expect(t.find(keys[1]![0], keys[1]![1])).toBeGreaterThanOrEqual(0);
  });

  it('stores the parent hint in META above the state bits', () => {
    const t = new BlockTable(64, 32);
    // parent low word 0x12345677: the hint keeps 0x12345670 (low 3 bits are the state).
    t.hold(1, 2, 3, 4, true, 0x12345677, 5);
    const m = t.words[t.find(1, 2) + META]!;
    expect(m & META_STATE).toBe(META_LIVE_CHILD);
    expect((m & META_HINT) >>> 0).toBe(0x12345670);
    expect([t.words[t.find(1, 2) + t.local], t.words[t.find(1, 2) + t.local + 1]]).toEqual([3, 4]);
  });

  it('shared mode: publishes inserts to the shared count once per call, compaction drops unheld entries', () => {
    const t = BlockTable.createShared(100, 64);
    for (let i = 1; i <= 10; i++) t.hold(i, i, 0, 0, false, 0, 1);
    expect(t.occupied).toBe(0); // not published yet
    t.publishInserts();
    expect(t.occupied).toBe(10);
    t.clearBit(t.find(3, 3), 1); // shared: stays, matching nothing
    expect(t.occupied).toBe(10);
    const next = BlockTable.createShared(200, 64);
    t.copyInto(next, true);
    expect(next.occupied).toBe(9);
    expect(next.find(3, 3)).toBe(-1);
    expect(next.find(4, 4)).toBeGreaterThanOrEqual(0);
  });
});
