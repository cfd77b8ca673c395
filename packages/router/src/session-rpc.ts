/**
 * Sessions in the request lifecycle (§12) and the `session_control` RPC (§5.6): the lookup at
 * arrival, the binding after the decision (`open` waits for the RPC, after booking), and
 * `close_session` when a request or binding ends. The bindings themselves live in `StickySessions`.
 */
import { KvrError, type WorkerWithDpRank } from '@kvrouter/protocols';
import type { Pending, SessionIntent } from './intent.js';
import type { ResolvedOptions } from './options.js';
import {
  SESSION_CAPACITY_OF_STR_LEN,
  SESSION_OPEN_GRACE_S,
  StickySessions,
  type SessionBinding,
} from './sessions.js';
import type { RouteRequest, RoutingDecision } from './types.js';
import type { WorkerSet } from './workers.js';

export interface SessionControlContext {
  readonly o: ResolvedOptions;
  readonly workers: WorkerSet;
  report(e: unknown, context: string): void;
  /** Something was bound: the maintenance tick (reaper) must run. */
  armMaintenance(): void;
  /** Frees a request whose `open_session` failed. */
  free(requestId: string): void;
  /** Makes the end of a request send `close_session` for this binding. */
  closeOnEnd(requestId: string, close: { sessionId: string; worker: WorkerWithDpRank }): void;
}

export class SessionControl {
  readonly bindings = new StickySessions();

  constructor(private readonly c: SessionControlContext) {}

  /** §12 arrival (kv mode): refreshes the binding, ends an expired one, unbinds on `close`. */
  arrive(req: RouteRequest, queryOnly: boolean, now: number): SessionIntent | null {
    const sc = req.nvext?.session_control;
    if (!sc || this.c.o.mode !== 'kv') return null;
    const { binding, expired } = this.bindings.lookup(sc.session_id, now);
    if (expired) this.end(expired);
    if (sc.action === 'close' && !queryOnly) this.bindings.unbind(sc.session_id);
    return { sessionId: sc.session_id, action: sc.action, timeoutS: sc.timeout, binding };
  }

  /** Session bookkeeping once a rank is chosen (§12); `open` waits for the RPC. */
  afterDecision(p: Pending, d: RoutingDecision): Promise<RoutingDecision> {
    const s = p.session;
    if (!s || p.intent.queryOnly) return Promise.resolve(d);
    const c = this.c;
    const clock = c.o.clock;
    if (s.action === 'bind' && !s.binding) {
      this.bindings.bind(s.sessionId, d.worker, s.timeoutS * 1000, false, clock.now());
      c.armMaintenance();
    } else if (s.action === 'close') {
      if (s.binding?.opened) c.closeOnEnd(p.intent.id, { sessionId: s.sessionId, worker: s.binding.worker });
    } else if (s.action === 'open') {
      const rpc = c.o.ports.sessionRpc;
      const payload = {
        action: 'open_session' as const,
        session_id: s.sessionId,
        timeout: s.timeoutS + SESSION_OPEN_GRACE_S,
        capacity_of_str_len: SESSION_CAPACITY_OF_STR_LEN,
      };
      const opening = rpc
        ? Promise.resolve().then(() => rpc(d.worker, payload))
        : Promise.reject(new Error('no session_control transport configured'));
      return opening.then(
        () => {
          this.bindings.bind(s.sessionId, d.worker, s.timeoutS * 1000, true, clock.now());
          c.armMaintenance();
          return d;
        },
        (e: unknown) => {
          // The request fails: its booking must not outlive it.
          c.free(p.intent.id);
          throw new KvrError(
            'session_open_failed',
            `open_session ${s.sessionId} failed: ${errText(e)}`,
            503,
            {
              session_id: s.sessionId,
            },
          );
        },
      );
    }
    return Promise.resolve(d);
  }

  /** The reaper (maintenance tick): expired bindings opened with `open` get `close_session`. */
  reap(now: number): void {
    for (const b of this.bindings.reap(now)) this.end(b);
  }

  end(b: SessionBinding): void {
    if (b.opened) this.sendClose(b.sessionId, b.worker);
  }

  sendClose(sessionId: string, worker: WorkerWithDpRank): void {
    const rpc = this.c.o.ports.sessionRpc;
    if (!rpc || !this.c.workers.get(worker.worker_id)) return;
    Promise.resolve()
      .then(() => rpc(worker, { action: 'close_session', session_id: sessionId }))
      .catch((e: unknown) => this.c.report(e, `close_session ${sessionId}`));
  }
}

function errText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
