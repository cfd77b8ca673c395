/**
 * The worker side of `session_control` (docs/protocol.md §5.6, §12): engine-side streaming sessions
 * as SGLang's `--enable-streaming-session` keeps them, simulated. `open_session {session_id,
 * timeout, capacity_of_str_len}` opens (or re-opens, refreshing the deadline) a session that lives
 * `timeout` seconds unless closed; `close_session {session_id}` ends it. Replies `{"status": "ok"}`
 * or `{"error": str}` (never a transport error, so the router can tell "the engine said no" from
 * "the engine is unreachable"). A session that reaches its deadline expires on its own (the engine
 * frees it), reported like a close. The simulated engine keeps no per-session KV state: prefix
 * caching already keeps a session's blocks while they are in use.
 */
import type { Clock, TimerHandle } from '@kvrouter/protocols';

export type SessionEvent =
  | { kind: 'opened'; sessionId: string; timeoutS: number; reopened: boolean }
  | { kind: 'closed'; sessionId: string }
  | { kind: 'expired'; sessionId: string; timeoutS: number };

interface Session {
  timeoutS: number;
  /** Clock time (ms) the session expires at. */
  deadline: number;
  /** Set by `arm` right after the session is created. */
  timer: TimerHandle;
}

/** Sessions a worker holds at most (an `open_session` beyond it gets an error). */
const MAX_SESSIONS = 65_536;

/** Longest single timer: Node runs a longer one after 1 ms; a later deadline is reached in steps. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export class EngineSessions {
  private readonly open = new Map<string, Session>();
  private closed = false;

  constructor(
    private readonly clock: Clock,
    private readonly onEvent: (e: SessionEvent) => void = () => undefined,
  ) {}

  /** Ids of the open sessions. */
  get ids(): string[] {
    return [...this.open.keys()].sort();
  }

  /** The `session_control` handler body. */
  handle(payload: unknown): { status: 'ok' } | { error: string } {
    if (this.closed) return { error: 'the worker is shutting down' };
    if (payload === null || typeof payload !== 'object' || Array.isArray(payload))
      return { error: 'session_control: expected a map with action and session_id' };
    const p = payload as Record<string, unknown>;
    const id = p.session_id;
    if (typeof id !== 'string' || id.length === 0 || id.length > 1024)
      return { error: 'session_control: session_id must be a non-empty string of at most 1024 characters' };
    switch (p.action) {
      case 'open_session': {
        const t = p.timeout;
        if (typeof t !== 'number' || !Number.isFinite(t) || t <= 0)
          return {
            error: `open_session ${id}: timeout must be a number of seconds > 0, got ${JSON.stringify(t)}`,
          };
        const prev = this.open.get(id);
        if (!prev && this.open.size >= MAX_SESSIONS)
          return { error: `open_session ${id}: the worker already holds ${MAX_SESSIONS} sessions` };
        if (prev) this.clock.clearTimeout(prev.timer);
        const s: Session = { timeoutS: t, deadline: this.clock.now() + t * 1000, timer: undefined };
        this.open.set(id, s);
        this.arm(id, s);
        this.onEvent({ kind: 'opened', sessionId: id, timeoutS: t, reopened: prev !== undefined });
        return { status: 'ok' };
      }
      case 'close_session': {
        const s = this.open.get(id);
        if (!s) return { error: `close_session ${id}: no such session (never opened, closed, or expired)` };
        this.clock.clearTimeout(s.timer);
        this.open.delete(id);
        this.onEvent({ kind: 'closed', sessionId: id });
        return { status: 'ok' };
      }
      default:
        return {
          error: `session_control: action must be open_session or close_session, got ${JSON.stringify(p.action)}`,
        };
    }
  }

  /** The session's timer, up to `MAX_TIMER_MS` at a time until its deadline. */
  private arm(id: string, s: Session): void {
    const left = s.deadline - this.clock.now();
    s.timer = this.clock.setTimeout(
      () => (left > MAX_TIMER_MS ? this.arm(id, s) : this.expire(id, s)),
      Math.min(Math.max(0, left), MAX_TIMER_MS),
    );
  }

  private expire(id: string, s: Session): void {
    if (this.open.get(id) !== s) return;
    this.open.delete(id);
    this.onEvent({ kind: 'expired', sessionId: id, timeoutS: s.timeoutS });
  }

  /** Drops every session (worker stop); no events. */
  close(): void {
    this.closed = true;
    for (const s of this.open.values()) this.clock.clearTimeout(s.timer);
    this.open.clear();
  }
}
