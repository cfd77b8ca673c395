import { describe, expect, it } from 'vitest';
import { CLS_PASS, EventQueue } from './event-queue.js';

describe('EventQueue', () => {
  it('runs events by time, then class (deliveries before passes), then insertion order', () => {
    const q = new EventQueue();
    const log: string[] = [];
    q.at(5, () => log.push('pass@5'), CLS_PASS);
    q.at(5, () => {
      log.push('a@5');
      // Scheduled while handling t = 5: still before the pass at 5.
      q.at(5, () => log.push('c@5'));
    });
    q.at(1, () => log.push('x@1'));
    q.at(5, () => log.push('b@5'));
    while (q.step()) {
      /* drain */
    }
    expect(log).toEqual(['x@1', 'a@5', 'b@5', 'c@5', 'pass@5']);
    expect(q.now()).toBe(5);
  });

  it('never goes back in time and skips cancelled events', () => {
    const q = new EventQueue();
    const log: number[] = [];
    q.at(10, () => {
      log.push(q.now());
      q.at(3, () => log.push(q.now())); // in the past: runs at 10
    });
    const h = q.at(4, () => log.push(-1));
    q.cancel(h);
    q.cancel(h);
    expect(q.size).toBe(1);
    expect(q.peekTime()).toBe(10);
    while (q.step()) {
      /* drain */
    }
    expect(log).toEqual([10, 10]);
  });

  it('serves the router Clock contract with timers on the same queue', () => {
    const q = new EventQueue();
    const log: string[] = [];
    const t1 = q.clock.setTimeout(() => log.push(`t1@${q.clock.now()}`), 30);
    q.clock.setTimeout(() => log.push(`t2@${q.clock.now()}`), 20);
    q.clock.clearTimeout(t1);
    q.at(25, () => log.push('e@25'));
    expect(q.step(10)).toBe(false); // nothing due by 10
    while (q.step()) {
      /* drain */
    }
    expect(log).toEqual(['t2@20', 'e@25']);
    expect(() => q.at(Infinity, () => {})).toThrow(RangeError);
  });
});
