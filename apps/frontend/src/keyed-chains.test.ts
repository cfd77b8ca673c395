/** KeyedChains: per-key chains newest first and capped, keys out least recently used first past the size bound. */
import { describe, expect, it } from 'vitest';
import { KeyedChains } from './keyed-chains.js';

interface E {
  v: string;
  size: number;
  next: E | null;
}
const entry = (v: string, size: number): E => ({ v, size, next: null });
const chain = (c: KeyedChains<E>, key: number): string[] => {
  const out: string[] = [];
  for (let e = c.first(key); e !== null; e = e.next) out.push(e.v);
  return out;
};

describe('KeyedChains', () => {
  it('keeps at most perKey entries under a key, newest first, and uncounts the dropped one', () => {
    const c = new KeyedChains<E>(1000, 2, (e) => e.size);
    c.add(1, entry('a', 10));
    c.add(1, entry('b', 20));
    c.add(1, entry('c', 30));
    expect(chain(c, 1)).toEqual(['c', 'b']);
    // a (10) dropped: 20 + 30 held.
    expect([c.held, c.evicted, c.count]).toEqual([50, 1, 2]);
  });

  it('drops whole keys, least recently used first, until the sizes are within the limit', () => {
    const c = new KeyedChains<E>(100, 4, (e) => e.size);
    c.add(1, entry('a', 40));
    c.add(2, entry('b', 40));
    c.touch(1); // 2 is now the least recently used
    c.add(3, entry('c', 40)); // 120 > 100: key 2 goes
    expect([chain(c, 1), chain(c, 2), chain(c, 3)]).toEqual([['a'], [], ['c']]);
    expect([c.held, c.evicted]).toEqual([80, 1]);
    // An entry larger than the limit pushes out everything, itself included.
    c.add(4, entry('d', 500));
    expect([c.held, c.count, c.evicted]).toEqual([0, 0, 4]);
  });
});
