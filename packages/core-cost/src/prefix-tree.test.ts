import { describe, expect, it } from 'vitest';
import { Rng } from '@kvrouter/testkit';
import { FRAC_UNITS } from './block-table.js';
import { PrefixTree } from './prefix-tree.js';
import { chain, familyChain } from './test-chains.js';

function refcounts(t: PrefixTree): Map<string, number> {
  const m = new Map<string, number>();
  t.forEachBlock((lo, hi, ref) => m.set(`${lo}:${hi}`, ref));
  return m;
}

describe('PrefixTree', () => {
  it('shared prefixes count once; insert / remove report the new and the departed blocks', () => {
    const t = new PrefixTree();
    const a = chain(1, 2, 3);
    const b = chain(1, 2, 4);
    // A is all new: blocks from pair index 0.
    expect(t.insert(a, a.length)).toBe(0);
    // B shares 1, 2: only block 4 (pair index 4) is new. unique = {1, 2, 3, 4} = 4
    expect(t.insert(b, b.length)).toBe(4);
    expect(t.size).toBe(4);
    expect(refcounts(t)).toEqual(
      new Map([
        ['1:7', 2],
        ['2:7', 2],
        ['3:7', 1],
        ['4:7', 1],
      ]),
    );
    // Freeing A: only block 3 leaves (pair index 4 of A).
    expect(t.remove(a, a.length)).toBe(4);
    expect(t.size).toBe(3);
    expect(t.remove(b, b.length)).toBe(0);
    expect(t.size).toBe(0);
  });

  it('a prompt that ends inside another splits it; nothing is new and nothing leaves early', () => {
    const t = new PrefixTree();
    const long = chain(1, 2, 3, 4);
    const short = chain(1, 2);
    t.insert(long, long.length);
    expect(t.insert(short, short.length)).toBe(short.length);
    expect(refcounts(t)).toEqual(
      new Map([
        ['1:7', 2],
        ['2:7', 2],
        ['3:7', 1],
        ['4:7', 1],
      ]),
    );
    expect(t.prefixDepth(chain(1, 2, 3, 9))).toBe(3);
    expect(t.prefixDepth(chain(1, 9))).toBe(1);
    expect(t.prefixDepth(chain(9))).toBe(0);
    // the high word matters
    expect(t.prefixDepth(Uint32Array.of(1, 8))).toBe(0);
    expect(t.remove(short, short.length)).toBe(short.length);
    expect(t.size).toBe(4);
    expect(t.remove(long, long.length)).toBe(0);
    expect(t.size).toBe(0);
  });

  it('children sharing a low word are told apart by the high word', () => {
    const t = new PrefixTree();
    const a = Uint32Array.of(5, 1, 6, 1);
    const b = Uint32Array.of(5, 2, 6, 2);
    t.insert(a, 4);
    expect(t.insert(b, 4)).toBe(0);
    expect(t.size).toBe(4);
    expect(t.prefixDepth(b)).toBe(2);
    t.remove(a, 4);
    expect(t.prefixDepth(a)).toBe(0);
    expect(t.prefixDepth(b)).toBe(2);
    t.remove(b, 4);
    expect(t.size).toBe(0);
  });

  it('fractions go to the blocks only that request holds and leave with them', () => {
    const t = new PrefixTree();
    const a = chain(1, 2, 3);
    const b = chain(1, 2, 4, 5);
    t.insert(a, a.length);
    t.insert(b, b.length);
    // B alone holds 4 and 5: deficit 2 · (1 − 0.25) = 1.5
    t.setFracWhereSole(b, b.length, 0.25);
    expect(t.fracBlocks).toBe(2);
    expect(t.deficitUnits / FRAC_UNITS).toBe(1.5);
    // rewrite: 2 · (1 − 0.5) = 1
    t.setFracWhereSole(b, b.length, 0.5);
    expect(t.deficitUnits / FRAC_UNITS).toBe(1);
    // A then holds 3 alone: + (1 − 0.75) = 1.25
    t.setFracWhereSole(a, a.length, 0.75);
    expect(t.fracBlocks).toBe(3);
    expect(t.deficitUnits / FRAC_UNITS).toBe(1.25);
    // B leaves with 4 and 5 → 0.25 left (block 3)
    t.remove(b, b.length);
    expect(t.fracBlocks).toBe(1);
    expect(t.deficitUnits / FRAC_UNITS).toBe(0.25);
    t.remove(a, a.length);
    expect(t.fracBlocks).toBe(0);
    expect(t.deficitUnits).toBe(0);
  });

  it('a long-lived prompt is not left cut where shorter ones ended (nodes merge back)', () => {
    const t = new PrefixTree();
    const long = chain(...Array.from({ length: 100 }, (_, i) => i + 1));
    t.insert(long, long.length);
    expect(t.nodes).toBe(1);
    // prefixes of 10, 20, ..., 90 blocks cut it into 10 runs while they live
    const shorts = Array.from({ length: 9 }, (_, k) => long.slice(0, 20 * (k + 1)));
    for (const c of shorts) t.insert(c, c.length);
    expect(t.nodes).toBe(10);
    // a prompt diverging after 5 blocks splits the first run (5 + 5) and adds its leaf: 10 + 1 + 1
    const fork = Uint32Array.from([...long.subarray(0, 10), 999, 7]);
    t.insert(fork, fork.length);
    expect(t.nodes).toBe(12);
    for (const c of shorts) t.remove(c, c.length);
    t.remove(fork, fork.length);
    expect(t.nodes).toBe(1);
    expect(t.size).toBe(100);
    expect(t.prefixDepth(long)).toBe(100);
  });

  it('a prompt extended by a later one merges back into one run when the first leaves', () => {
    const t = new PrefixTree();
    const first = chain(1, 2, 3, 4);
    const longer = chain(1, 2, 3, 4, 5, 6);
    t.insert(first, first.length);
    // 5, 6 are new and live in `longer`'s array; 1..4 in `first`'s
    expect(t.insert(longer, longer.length)).toBe(8);
    expect(t.nodes).toBe(2);
    t.remove(first, first.length);
    expect(t.nodes).toBe(1);
    expect(t.prefixDepth(longer)).toBe(6);
    expect(refcounts(t)).toEqual(new Map(['1:7', '2:7', '3:7', '4:7', '5:7', '6:7'].map((k) => [k, 1])));
    expect(t.remove(longer, longer.length)).toBe(0);
    expect(t.size).toBe(0);
  });

  it('matches a per-block refcount model for random chains (seeded)', () => {
    for (const seed of [1, 2, 3]) {
      const rng = new Rng(seed);
      const t = new PrefixTree();
      const model = new Map<string, number>();
      const live: Uint32Array[] = [];
      // Chains share a family prefix of random length, then diverge per chain (prefix-consistent,
      // as sequence hashes are); low words collide across families on purpose.
      let uid = 0;
      let wrong = 0;
      const make = (): Uint32Array => familyChain(rng, ++uid, 0, 30);
      for (let step = 0; step < 1500; step++) {
        if (live.length === 0 || rng.bool(0.55)) {
          const c = make();
          const fresh = t.insert(c, c.length);
          for (let i = 0; i < c.length; i += 2) {
            const k = `${c[i]}:${c[i + 1]}`;
            const before = model.get(k) ?? 0;
            model.set(k, before + 1);
            // New blocks are exactly the suffix from `fresh`.
            if ((before === 0) !== i >= fresh) wrong++;
          }
          live.push(c);
        } else {
          const c = live.splice(rng.int(0, live.length - 1), 1)[0];
          const gone = t.remove(c, c.length);
          for (let i = 0; i < c.length; i += 2) {
            const k = `${c[i]}:${c[i + 1]}`;
            const after = model.get(k)! - 1;
            if (after === 0) model.delete(k);
            else model.set(k, after);
            if ((after === 0) !== i >= gone) wrong++;
          }
        }
        expect(t.size).toBe(model.size);
        if (step % 50 === 0) {
          expect(wrong).toBe(0);
          expect(refcounts(t)).toEqual(model);
          const q = make();
          let want = 0;
          while (want < q.length / 2 && model.has(`${q[2 * want]}:${q[2 * want + 1]}`)) want++;
          expect(t.prefixDepth(q)).toBe(want);
        }
      }
      expect(wrong).toBe(0);
      while (live.length > 0) {
        const c = live.pop()!;
        t.remove(c, c.length);
      }
      expect(t.size).toBe(0);
    }
  });
});
