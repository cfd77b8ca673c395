import { describe, expect, it } from 'vitest';
import { Channel } from './channel.js';

describe('Channel', () => {
  it('delivers items pushed before and after the consumer waits, in order', async () => {
    const ch = new Channel<number>();
    ch.push(1);
    const p = (async () => {
      const got: number[] = [];
      for await (const x of ch) got.push(x);
      return got;
    })();
    await Promise.resolve();
    ch.push(2);
    ch.push(3);
    ch.end();
    expect(ch.push(4)).toBe(false);
    expect(await p).toEqual([1, 2, 3]);
  });

  it('fail() delivers buffered items first, then the error once; abort() drops them', async () => {
    const a = new Channel<number>();
    a.push(1);
    a.fail(new Error('x'));
    expect(await a.next()).toEqual({ value: 1, done: false });
    await expect(a.next()).rejects.toThrow('x');
    expect(await a.next()).toEqual({ value: undefined, done: true });
    const b = new Channel<number>();
    b.push(1);
    b.abort(new Error('y'));
    await expect(b.next()).rejects.toThrow('y');
  });

  it('return() while open calls onReturn exactly once and ends a pending next()', async () => {
    const ch = new Channel<number>();
    let calls = 0;
    ch.onReturn = () => calls++;
    const pending = ch.next();
    await ch.return();
    await ch.return();
    expect(calls).toBe(1);
    expect(await pending).toEqual({ value: undefined, done: true });
    const ended = new Channel<number>();
    ended.onReturn = () => calls++;
    ended.end();
    await ended.return();
    expect(calls).toBe(1);
  });

  it('whenBelow() holds a producer until the consumer catches up or stops', async () => {
    const ch = new Channel<number>();
    ch.push(1);
    expect(ch.whenBelow(2)).toBeUndefined();
    ch.push(2);
    let released = false;
    void ch.whenBelow(2)!.then(() => (released = true));
    await Promise.resolve();
    expect(released).toBe(false);
    await ch.next(); // size 1 < 2
    await Promise.resolve();
    expect(released).toBe(true);
    ch.push(3);
    let released2 = false;
    void ch.whenBelow(1)!.then(() => (released2 = true));
    await ch.return();
    await Promise.resolve();
    expect(released2).toBe(true);
  });
});
