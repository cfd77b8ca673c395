import { describe, expect, it } from 'vitest';
import { VirtualClock } from './clock.js';

describe('VirtualClock', () => {
  it('runs due timers in (due time, creation order), each at its due time; cancelled ones never', () => {
    const c = new VirtualClock(100);
    const log: string[] = [];
    c.setTimeout(() => log.push(`b@${c.now()}`), 20);
    c.setTimeout(() => log.push(`a@${c.now()}`), 10);
    const x = c.setTimeout(() => log.push('x'), 10);
    c.setTimeout(() => log.push(`c@${c.now()}`), 20);
    c.clearTimeout(x);
    expect(c.pending).toBe(3);
    expect(c.advance(15)).toBe(115);
    expect(log).toEqual(['a@110']);
    c.advance(100);
    expect(log).toEqual(['a@110', 'b@120', 'c@120']);
    expect(c.now()).toBe(215);
  });

  it('timers created while advancing run in the same call when they fall due before the target', () => {
    const c = new VirtualClock();
    const log: number[] = [];
    const tick = () => {
      log.push(c.now());
      c.setTimeout(tick, 30);
    };
    c.setTimeout(tick, 30);
    c.advance(100);
    expect(log).toEqual([30, 60, 90]);
    expect(c.nextDue()).toBe(120);
    expect(() => c.advance(-1)).toThrow(RangeError);
  });
});
