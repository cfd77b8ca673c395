import { describe, expect, it } from 'vitest';
import { Rng } from '@kvrouter/testkit';
import { BlockTable } from './block-table.js';

describe('BlockTable', () => {
  it('refcounts (lo, hi) keys exactly, including words above 2^31 and keys equal as lo + hi·2^32 floats', () => {
    const t = new BlockTable();
    expect(t.inc(1, 0x80000000)).toBe(1);
    expect(t.inc(1, 0x80000000)).toBe(2);
    // These two differ only in the lowest bit of the low word at a magnitude where
    // lo + hi·2^32 rounds them to the same double (hi·2^32 ≈ 2^64 has a 2^12 spacing).
    expect(0xfffffffe + 0xffffffff * 2 ** 32).toBe(0xffffffff + 0xffffffff * 2 ** 32);
    t.inc(0xfffffffe, 0xffffffff);
    t.inc(0xffffffff, 0xffffffff);
    expect(t.size).toBe(3);
    expect(t.refcount(0xfffffffe, 0xffffffff)).toBe(1);
    expect(t.dec(1, 0x80000000)).toBe(1);
    expect(t.dec(1, 0x80000000)).toBe(0);
    expect(t.has(1, 0x80000000)).toBe(false);
    expect(t.dec(1, 0x80000000)).toBe(-1);
    expect(t.size).toBe(2);
  });

  it('matches a Map model through growth and backward-shift deletions (seeded)', () => {
    const rng = new Rng(11);
    const t = new BlockTable(4);
    const model = new Map<string, number>();
    // A small key space forces long probe chains and many deletions in the middle of them.
    const keys: [number, number][] = Array.from({ length: 600 }, () => [rng.u32() & 0xfff, rng.u32() & 3]);
    for (let step = 0; step < 40_000; step++) {
      const [lo, hi] = rng.pick(keys);
      const k = `${lo}:${hi}`;
      const c = model.get(k) ?? 0;
      if (c > 0 && rng.bool(0.5)) {
        expect(t.dec(lo, hi)).toBe(c - 1);
        if (c === 1) model.delete(k);
        else model.set(k, c - 1);
      } else {
        expect(t.inc(lo, hi)).toBe(c + 1);
        model.set(k, c + 1);
      }
      if (step % 997 === 0) {
        expect(t.size).toBe(model.size);
        for (const [lo2, hi2] of keys) expect(t.refcount(lo2, hi2)).toBe(model.get(`${lo2}:${hi2}`) ?? 0);
      }
    }
  });

  it('tracks the fractional deficit and drops it with the block', () => {
    const t = new BlockTable();
    t.inc(1, 1);
    t.inc(2, 2);
    t.setFracAt(t.find(1, 1), 0.25); // deficit 0.75
    t.setFracAt(t.find(2, 2), 0.5); // + 0.5 = 1.25
    expect(t.deficit).toBe(1.25);
    t.setFracAt(t.find(1, 1), 0.75); // replaces 0.75 by 0.25 → 0.75
    expect(t.deficit).toBe(0.75);
    expect(t.fracOf(1, 1)).toBe(0.75);
    t.dec(2, 2); // removes 0.5 → 0.25
    expect(t.deficit).toBe(0.25);
    expect(t.fracCount).toBe(1);
    t.inc(2, 2);
    expect(t.fracOf(2, 2)).toBeUndefined();
    t.dec(1, 1);
    expect(t.deficit).toBe(0);
    expect(t.fracCount).toBe(0);
  });
});
