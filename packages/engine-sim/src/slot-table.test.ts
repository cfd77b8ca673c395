import { Rng } from '@kvrouter/testkit';
import { describe, expect, it } from 'vitest';
import { SlotTable } from './slot-table.js';

describe('SlotTable', () => {
  it('agrees with a Map under random inserts and deletes, colliding keys included', () => {
    const rng = new Rng(7);
    const cap = 512;
    const lo = new Uint32Array(cap);
    const hi = new Uint32Array(cap);
    const t = new SlotTable(cap, lo, hi);
    const ref = new Map<string, number>();
    const live = new Set<number>();
    const key = (a: number, b: number): string => `${a}:${b}`;
    for (let op = 0; op < 20000; op++) {
      const s = rng.int(0, cap - 1);
      if (live.has(s)) {
        t.delete(s);
        ref.delete(key(lo[s], hi[s]));
        live.delete(s);
      } else {
        // Small key space: many equal `lo` words and long probe runs that wrap around the table.
        let a: number, b: number;
        do {
          a = rng.int(0, 40);
          b = rng.bool(0.5) ? 0 : rng.u32();
        } while (ref.has(key(a, b)));
        lo[s] = a;
        hi[s] = b;
        t.insert(s);
        ref.set(key(a, b), s);
        live.add(s);
      }
      if (op % 97 === 0) {
        for (const [k, s2] of ref) {
          const [a, b] = k.split(':').map(Number);
          expect(t.get(a, b)).toBe(s2);
        }
        expect(t.size).toBe(ref.size);
        expect(t.get(41, 0)).toBe(-1);
      }
    }
  });

  it('delete of an absent key is a no-op', () => {
    const lo = new Uint32Array([1, 2]);
    const hi = new Uint32Array([0, 0]);
    const t = new SlotTable(2, lo, hi);
    t.insert(0);
    t.delete(1);
    expect(t.size).toBe(1);
    expect(t.get(1, 0)).toBe(0);
    expect(t.get(2, 0)).toBe(-1);
  });
});
