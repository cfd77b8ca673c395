import { describe, expect, it } from 'vitest';
import { VirtualClock } from './clock.js';

describe('VirtualClock', () => {
  it('runs timers in (due time, creation order), each seeing now() = its due time', () => {
    const c = new VirtualClock(1000);
    const seen: string[] = [];
    c.setTimeout(() => seen.push(`b@${c.now()}`), 20);
    c.setTimeout(() => seen.push(`a@${c.now()}`), 10);
    c.setTimeout(() => seen.push(`c@${c.now()}`), 20); // same due time as b, created later
    c.setTimeout(() => seen.push(`z@${c.now()}`), 0);
    expect(c.pending).toBe(4);
    expect(c.nextDue()).toBe(1000);
    expect(c.advance(15)).toBe(1015);
    expect(seen).toEqual(['z@1000', 'a@1010']);
    expect(c.advanceTo(1020)).toBe(1020);
    expect(seen).toEqual(['z@1000', 'a@1010', 'b@1020', 'c@1020']);
    expect(c.pending).toBe(0);
    expect(c.nextDue()).toBeUndefined();
  });

  it('runs timers created while advancing in the same call when they fall due by the target', () => {
    const c = new VirtualClock();
    const seen: number[] = [];
    c.setTimeout(() => {
      seen.push(c.now());
      c.setTimeout(() => seen.push(c.now()), 5); // due at 15 <= 20
      c.setTimeout(() => seen.push(c.now()), 50); // due at 60 > 20
    }, 10);
    c.advance(20);
    expect(seen).toEqual([10, 15]);
    expect(c.now()).toBe(20);
    expect(c.pendingDelays()).toEqual([50]);
    c.advance(40);
    expect(seen).toEqual([10, 15, 60]);
  });

  it('clearTimeout cancels; negative and NaN delays are due now; time never goes back', () => {
    const c = new VirtualClock(50);
    const seen: string[] = [];
    const h = c.setTimeout(() => seen.push('cancelled'), 1);
    c.setTimeout(() => seen.push('neg'), -5);
    c.setTimeout(() => seen.push('nan'), Number.NaN);
    c.clearTimeout(h);
    c.clearTimeout(undefined); // foreign handles are ignored
    expect(c.pendingDelays()).toEqual([-5, Number.NaN]);
    expect(c.advanceTo(10)).toBe(50); // an earlier target only runs what is due
    expect(seen).toEqual(['neg', 'nan']);
    expect(() => c.advance(-1)).toThrow(RangeError);
    expect(() => c.advance(Infinity)).toThrow(/finite number >= 0/);
  });
});
