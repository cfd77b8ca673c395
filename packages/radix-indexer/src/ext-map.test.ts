import { describe, expect, it } from 'vitest';
import { Rng } from '@kvrouter/testkit';
import { ExtMap, ExtTable } from './ext-map.js';
import { EXT_SEQ_HI, EXT_SEQ_LO, EXT_WORDS } from './layout.js';

const seqOf = (t: ExtTable, lo: number, hi: number): [number, number] | undefined => {
  const off = t.find(lo, hi);
  return off < 0 ? undefined : [t.words[off + EXT_SEQ_LO]! >>> 0, t.words[off + EXT_SEQ_HI]! >>> 0];
};

describe('ExtTable', () => {
  it('agrees with a Map through random sets, overwrites and deletes (sequential and zero keys included)', () => {
    const rng = new Rng(11);
    const t = new ExtTable(16, true);
    const ref = new Map<string, [number, number]>();
    const keyOf = (i: number): [number, number] =>
      i % 3 === 0 ? [i, 0] : i % 3 === 1 ? [rng.u32(), rng.u32()] : [0, i];
    const keys: [number, number][] = [[0, 0]];
    for (let i = 1; i < 4000; i++) keys.push(keyOf(i));
    for (let step = 0; step < 40_000; step++) {
      const [lo, hi] = rng.pick(keys);
      const k = `${lo}:${hi}`;
      if (rng.int(0, 2) === 0) {
        const off = t.find(lo, hi);
        expect(off >= 0, `find ${k} at step ${step}`).toBe(ref.has(k));
        if (off >= 0) t.deleteAt(off);
        ref.delete(k);
      } else {
        const v: [number, number] = [rng.u32(), rng.u32()];
        const off = t.set(lo, hi, v[0], v[1]);
        t.aux![off / EXT_WORDS] = v[0];
        ref.set(k, v);
      }
      if (step % 97 === 0) expect(t.size).toBe(ref.size);
    }
    for (const [lo, hi] of keys) {
      const want = ref.get(`${lo}:${hi}`);
      expect(seqOf(t, lo, hi)).toEqual(want);
      // The aux column moved with its entry through displacements, shifts and rehashes.
      if (want) expect(t.aux![t.find(lo, hi) / EXT_WORDS]).toBe(want[0]);
    }
    let seen = 0;
    t.forEach(() => seen++);
    expect(seen).toBe(ref.size);
  });

  it('stays at most EXT_MAX_LOAD (0.9) full; past 1024 entries it grows by about 1/0.68 ≈ 1.32x, not to a power of two', () => {
    const t = new ExtTable(16, false);
    const caps = new Set<number>();
    for (let i = 1; i <= 10_000; i++) {
      t.set(i, 0, i, i);
      caps.add(t.capacity);
      expect(t.size / t.capacity).toBeLessThanOrEqual(0.9);
    }
    // Doubling up to 2048 (grown at 0.9 x 1024 ≈ 922 entries); then at 0.9 load to 0.68 load:
    // with 10 000 entries the capacity is between 10 000 / 0.9 ≈ 11 112 and 10 000 / 0.68 ≈ 14 706.
    expect(t.capacity).toBeGreaterThanOrEqual(11_112);
    expect(t.capacity).toBeLessThanOrEqual(14_706);
    expect([...caps].some((c) => (c & (c - 1)) !== 0)).toBe(true);
  });
});

describe('ExtMap', () => {
  it('keeps one table per slot and drops a slot without touching the others', () => {
    const m = new ExtMap();
    m.of(0).set(5, 0, 50, 0);
    m.of(3).set(5, 0, 53, 0);
    expect(m.size).toBe(2);
    m.removeSlots([0]);
    expect(m.get(0)).toBeUndefined();
    expect(seqOf(m.get(3)!, 5, 0)).toEqual([53, 0]);
    expect(m.size).toBe(1);
  });
});
