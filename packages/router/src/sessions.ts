/**
 * Sticky sessions (docs/protocol.md §12): `session_id → (worker, dp_rank, ttl, expires_at)` in memory,
 * with a sliding window refreshed on every lookup. Time is an argument; the router runs the reaper.
 */
import { invalidArgument, type WorkerWithDpRank } from '@kvrouter/protocols';

export const SESSION_REAP_INTERVAL_MS = 30_000;
/** `open_session` asks the engine to keep the session this much longer than the router (§5.6). */
export const SESSION_OPEN_GRACE_S = 30;
export const SESSION_CAPACITY_OF_STR_LEN = 65_536;
/**
 * Bindings one router holds at most (issue 17, bounded memory): session ids are client input, so a
 * client inventing ids cannot grow the table past this. Binding a new id when full drops the
 * binding refreshed longest ago (no `close_session`: an engine-side session ends at its own timeout).
 * ~100 bytes + the id per binding; docs/memory.md.
 */
export const MAX_SESSION_BINDINGS = 100_000;

export interface SessionBinding {
  sessionId: string;
  worker: WorkerWithDpRank;
  ttlMs: number;
  expiresAt: number;
  /** Opened with `open` (engine-side session): its expiry or close sends `close_session`. */
  opened: boolean;
}

/** `session_control` RPC payloads (§5.6). */
export type SessionRpcPayload =
  | { action: 'open_session'; session_id: string; timeout: number; capacity_of_str_len: number }
  | { action: 'close_session'; session_id: string };

export class StickySessions {
  /** In refresh order: the first binding is the one refreshed longest ago. */
  private readonly map = new Map<string, SessionBinding>();
  private evicted_ = 0;

  constructor(readonly maxBindings: number = MAX_SESSION_BINDINGS) {
    if (!Number.isSafeInteger(maxBindings) || maxBindings < 1)
      throw invalidArgument('maxBindings', 'must be an integer >= 1', maxBindings);
  }

  get size(): number {
    return this.map.size;
  }

  /** Bindings dropped to stay within `maxBindings`. */
  get evicted(): number {
    return this.evicted_;
  }

  /** The live binding (refreshed: `expires_at = now + ttl`); an expired one is removed and returned in `expired`. */
  lookup(sessionId: string, now: number): { binding?: SessionBinding; expired?: SessionBinding } {
    const b = this.map.get(sessionId);
    if (!b) return {};
    if (now >= b.expiresAt) {
      this.map.delete(sessionId);
      return { expired: b };
    }
    b.expiresAt = now + b.ttlMs;
    // Move to the end: the first binding stays the least recently refreshed.
    this.map.delete(sessionId);
    this.map.set(sessionId, b);
    return { binding: b };
  }

  /** Binding without refreshing it (inspection, tests). */
  peek(sessionId: string): SessionBinding | undefined {
    return this.map.get(sessionId);
  }

  bind(
    sessionId: string,
    worker: WorkerWithDpRank,
    ttlMs: number,
    opened: boolean,
    now: number,
  ): SessionBinding {
    const b: SessionBinding = { sessionId, worker, ttlMs, expiresAt: now + ttlMs, opened };
    if (!this.map.delete(sessionId) && this.map.size >= this.maxBindings) {
      const oldest = this.map.keys().next().value as string;
      this.map.delete(oldest);
      this.evicted_++;
    }
    this.map.set(sessionId, b);
    return b;
  }

  unbind(sessionId: string): SessionBinding | undefined {
    const b = this.map.get(sessionId);
    if (b) this.map.delete(sessionId);
    return b;
  }

  /** Removes and returns every binding with `expires_at <= now`. */
  reap(now: number): SessionBinding[] {
    const out: SessionBinding[] = [];
    for (const b of this.map.values()) if (now >= b.expiresAt) out.push(b);
    for (const b of out) this.map.delete(b.sessionId);
    return out;
  }

  /** Drops the bindings of a worker that left (no RPC: it is gone). */
  dropWorker(workerId: bigint, dpRanks?: ReadonlySet<number>): number {
    let n = 0;
    for (const [id, b] of this.map) {
      if (b.worker.worker_id === workerId && (!dpRanks || dpRanks.has(b.worker.dp_rank))) {
        this.map.delete(id);
        n++;
      }
    }
    return n;
  }
}
