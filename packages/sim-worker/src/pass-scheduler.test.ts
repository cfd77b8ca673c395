import { describe, expect, it } from 'vitest';
import { VirtualClock, type Clock } from '@kvrouter/protocols';
import { PassScheduler } from './pass-scheduler.js';

/** A manual clock that counts live timers, to check that the scheduler keeps only one. */
function countingClock(): {
  clock: Clock & { advanceTo(t: number): void };
  live: () => number;
  created: () => number;
} {
  const inner = new VirtualClock();
  const liveSet = new Set<unknown>();
  let created = 0;
  const clock = {
    now: inner.now,
    setTimeout: (fn: () => void, ms: number) => {
      created++;
      const h: unknown = inner.setTimeout(() => {
        liveSet.delete(h);
        fn();
      }, ms);
      liveSet.add(h);
      return h;
    },
    clearTimeout: (h: unknown) => {
      liveSet.delete(h);
      inner.clearTimeout(h);
    },
    advanceTo: (t: number) => inner.advanceTo(t),
  };
  return { clock, live: () => liveSet.size, created: () => created };
}

describe('PassScheduler', () => {
  it('runs callbacks in due order (ties in scheduling order) at their due times, with one timer armed', () => {
    const { clock, live } = countingClock();
    const s = new PassScheduler({ clock });
    const log: string[] = [];
    const dues = [7, 3, 9, 3, 1, 12, 5];
    dues.forEach((d, i) => s.at(d, () => log.push(`${i}@${clock.now()}`)));
    expect(live()).toBe(1);
    clock.advanceTo(100);
    // Sorted by due; the two entries due at 3 keep their order (1 before 3).
    expect(log).toEqual(['4@1', '1@3', '3@3', '6@5', '0@7', '2@9', '5@12']);
    expect(live()).toBe(0);
  });

  it('cancel drops a callback; a cancelled head does not hold back later entries', () => {
    const { clock } = countingClock();
    const s = new PassScheduler({ clock });
    const log: number[] = [];
    const a = s.at(2, () => log.push(2));
    s.at(4, () => log.push(4));
    a.cancel();
    clock.advanceTo(3);
    expect(log).toEqual([]);
    clock.advanceTo(4);
    expect(log).toEqual([4]);
  });

  it('an earlier entry scheduled later re-arms the timer for itself', () => {
    const { clock, live } = countingClock();
    const s = new PassScheduler({ clock });
    const log: number[] = [];
    s.at(50, () => log.push(50));
    s.at(10, () => log.push(10));
    expect(live()).toBe(1);
    clock.advanceTo(10);
    expect(log).toEqual([10]);
    expect(live()).toBe(1);
  });

  it('a callback may schedule the next pass; entries already due run in the same wake-up', () => {
    const { clock, created } = countingClock();
    const s = new PassScheduler({ clock });
    const times: number[] = [];
    let n = 0;
    const chain = (due: number) =>
      s.at(due, () => {
        times.push(clock.now());
        if (++n < 3) chain(due + 5);
      });
    chain(5);
    clock.advanceTo(30);
    expect(times).toEqual([5, 10, 15]);
    // Jump past several dues at once: they all run in one wake-up (model times are in the past).
    const late: number[] = [];
    s.at(40, () => late.push(40));
    s.at(41, () => late.push(41));
    const before = created();
    clock.advanceTo(45);
    expect(late).toEqual([40, 41]);
    expect(created() - before).toBeLessThanOrEqual(1);
  });

  it('yields after maxPerWake callbacks and resumes on a fresh timer', () => {
    const { clock } = countingClock();
    const s = new PassScheduler({ clock, maxPerWake: 2 });
    const log: number[] = [];
    for (let i = 0; i < 5; i++) s.at(1, () => log.push(i));
    clock.advanceTo(1);
    expect(log).toEqual([0, 1, 2, 3, 4]);
    expect(s.size).toBe(0);
  });

  it('slackMs runs entries due that close to now early; none by default on an injected clock', () => {
    const { clock } = countingClock();
    const strict = new PassScheduler({ clock });
    const log: string[] = [];
    strict.at(10, () => log.push('a'));
    strict.at(10.4, () => log.push('b'));
    clock.advanceTo(10);
    expect(log).toEqual(['a']);
    clock.advanceTo(10.4);
    expect(log).toEqual(['a', 'b']);

    const c2 = countingClock();
    const slack = new PassScheduler({ clock: c2.clock, slackMs: 0.5 });
    const log2: string[] = [];
    slack.at(10, () => log2.push('a'));
    slack.at(10.4, () => log2.push('b'));
    c2.clock.advanceTo(10);
    expect(log2).toEqual(['a', 'b']);
  });

  it('rejects bad options naming the field', () => {
    expect(() => new PassScheduler({ slackMs: -1 })).toThrow(/slackMs/);
    expect(() => new PassScheduler({ maxPerWake: 0 })).toThrow(/maxPerWake/);
    expect(() => new PassScheduler().at(Number.NaN, () => undefined)).toThrow(/due/);
  });
});
