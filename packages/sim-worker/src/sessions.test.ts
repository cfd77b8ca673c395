import { VirtualClock } from '@kvrouter/protocols';
import { describe, expect, it } from 'vitest';
import { EngineSessions, type SessionEvent } from './sessions.js';

const open = (id: string, timeout: unknown) => ({
  action: 'open_session',
  session_id: id,
  timeout,
  capacity_of_str_len: 65536,
});

describe('EngineSessions (worker side of session_control, §5.6)', () => {
  it('opens, refreshes on re-open, closes, and expires at open time + timeout', () => {
    const clock = new VirtualClock();
    const events: SessionEvent[] = [];
    const s = new EngineSessions(clock, (e) => void events.push(e));
    expect(s.handle(open('a', 30))).toEqual({ status: 'ok' });
    expect(s.handle(open('b', 2))).toEqual({ status: 'ok' });
    expect(s.ids).toEqual(['a', 'b']);
    clock.advance(1000);
    // Re-opened at t = 1 s with 2 s: lives until t = 3 s, not 2 s.
    expect(s.handle(open('b', 2))).toEqual({ status: 'ok' });
    clock.advance(1999);
    expect(s.ids).toEqual(['a', 'b']);
    clock.advance(1);
    expect(s.ids).toEqual(['a']);
    expect(s.handle({ action: 'close_session', session_id: 'a' })).toEqual({ status: 'ok' });
    expect(s.ids).toEqual([]);
    // A closed session never expires later.
    clock.advance(60_000);
    expect(events).toEqual([
      { kind: 'opened', sessionId: 'a', timeoutS: 30, reopened: false },
      { kind: 'opened', sessionId: 'b', timeoutS: 2, reopened: false },
      { kind: 'opened', sessionId: 'b', timeoutS: 2, reopened: true },
      { kind: 'expired', sessionId: 'b', timeoutS: 2 },
      { kind: 'closed', sessionId: 'a' },
    ]);
    expect(clock.pending).toBe(0);
  });

  it('a timeout beyond one Node timer (2^31 − 1 ms, ~24.8 days) expires at its deadline, not at once', () => {
    const clock = new VirtualClock();
    const asked: number[] = [];
    const timers = {
      now: () => clock.now(),
      setTimeout: (fn: () => void, ms: number) => (asked.push(ms), clock.setTimeout(fn, ms)),
      clearTimeout: (h: unknown) => clock.clearTimeout(h as never),
    };
    const s = new EngineSessions(timers);
    // 5,000,000 s = 5e9 ms: two full timers of 2,147,483,647 ms, then 705,032,706 ms.
    expect(s.handle(open('long', 5_000_000))).toEqual({ status: 'ok' });
    clock.advance(5e9 - 1);
    expect(s.ids).toEqual(['long']);
    clock.advance(1);
    expect(s.ids).toEqual([]);
    expect(asked).toEqual([2_147_483_647, 2_147_483_647, 705_032_706]);
  });

  it('answers every bad request with {"error"} naming what is wrong', () => {
    const s = new EngineSessions(new VirtualClock());
    expect(s.handle(null)).toEqual({ error: 'session_control: expected a map with action and session_id' });
    expect(s.handle({ action: 'open_session', session_id: '' })).toEqual({
      error: 'session_control: session_id must be a non-empty string of at most 1024 characters',
    });
    expect(s.handle(open('x', 0))).toEqual({
      error: 'open_session x: timeout must be a number of seconds > 0, got 0',
    });
    expect(s.handle({ action: 'close_session', session_id: 'x' })).toEqual({
      error: 'close_session x: no such session (never opened, closed, or expired)',
    });
    expect(s.handle({ action: 'pause', session_id: 'x' })).toEqual({
      error: 'session_control: action must be open_session or close_session, got "pause"',
    });
    s.close();
    expect(s.handle(open('y', 1))).toEqual({ error: 'the worker is shutting down' });
  });
});
