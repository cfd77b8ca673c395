/**
 * Queue driver (§10): parks a request the gate refused, admits from the head whenever something
 * may have freed capacity (`drain`), runs the periodic re-check only while something is parked,
 * and fails parked requests on cancel or close. The admission itself is the router's (`admit`:
 * gate then booking, synchronously).
 */
import { KvrError, type TimerHandle } from '@kvrouter/protocols';
import { RouterQueue, allWorkersBusy } from '@kvrouter/core-cost';
import type { Pending } from './intent.js';
import type { ResolvedOptions } from './options.js';
import type { RoutingDecision } from './types.js';

export interface QueueContext {
  readonly o: ResolvedOptions;
  /** Gate + booking for a parked request; null when it must stay parked. */
  admit(p: Pending): RoutingDecision | null;
  /** What follows a decision (sessions); the parked promise resolves with it. */
  afterDecision(p: Pending, d: RoutingDecision): Promise<RoutingDecision>;
  /** Best device overlap of the last gate's candidates (wspt key, §10). */
  bestOverlap(): number;
}

/**
 * Requests one router keeps parked at most (issue 17, bounded memory): past it a request that would
 * park is refused as `all_workers_busy` (503, overload) instead. Each parked request holds its own
 * hash copies (16 bytes per prompt block) and a promise; docs/memory.md.
 */
export const MAX_PARKED_REQUESTS = 10_000;

export class QueueDriver {
  private readonly q: RouterQueue<Pending>;
  private draining = false;
  /** The re-check timer while armed (boxed: the kernel's `TimerHandle` is opaque). */
  private timer: { handle: TimerHandle } | null = null;

  constructor(private readonly c: QueueContext) {
    const o = c.o;
    this.q = new RouterQueue<Pending>(o.queuePolicy, o.clock.now(), { strictPriority: o.strictPriority });
  }

  get size(): number {
    return this.q.size;
  }

  has(requestId: string): boolean {
    return this.q.has(requestId);
  }

  park(p: Pending, signal: AbortSignal | undefined, cancel: (id: string) => void): Promise<RoutingDecision> {
    const it = p.intent;
    if (signal?.aborted) throw cancelled(it.id);
    if (this.q.size >= MAX_PARKED_REQUESTS) throw allWorkersBusy();
    // The hashes live in scratch until now; a parked request needs its own copies.
    p.prompt.local = p.prompt.local.slice();
    p.prompt.seq = p.prompt.seq.slice();
    const o = this.c.o;
    const now = o.clock.now();
    const best = this.c.bestOverlap();
    const promise = new Promise<RoutingDecision>((resolve, reject) => {
      p.wait = {
        queuedAt: now,
        refreshed: false,
        settle: (d) => resolve(this.c.afterDecision(p, d)),
        fail: reject,
        unlisten: null,
      };
    });
    this.q.push(
      {
        id: it.id,
        now,
        priorityJump: it.priority,
        isl: it.isl,
        cachedTokens: Math.min(it.isl, best * o.blockSize),
        strictPriority: it.strictPriority,
      },
      p,
    );
    if (signal) {
      const onAbort = () => cancel(it.id);
      signal.addEventListener('abort', onAbort, { once: true });
      p.wait!.unlisten = () => signal.removeEventListener('abort', onAbort);
    }
    this.changed();
    return promise;
  }

  /** `update()`: admit from the head until the head must still park (head-of-line blocking accepted). */
  drain(): void {
    const q = this.q;
    if (q.size === 0 || this.draining) return;
    this.draining = true;
    let changed = false;
    try {
      while (q.size > 0) {
        const head = q.peek()!;
        const w = head.wait!;
        let d: RoutingDecision | null;
        try {
          d = this.c.admit(head);
        } catch (e) {
          q.pop();
          changed = true;
          w.unlisten?.();
          w.fail(e);
          continue;
        }
        if (!d) break;
        q.pop();
        changed = true;
        w.unlisten?.();
        w.settle(d);
      }
    } finally {
      this.draining = false;
    }
    if (changed) this.changed();
  }

  /** Removes a parked request (it never books) and fails it with `cancelled`; false if not parked. */
  cancel(requestId: string): boolean {
    const parked = this.q.remove(requestId);
    if (!parked) return false;
    parked.wait!.unlisten?.();
    parked.wait!.fail(cancelled(requestId));
    this.changed();
    return true;
  }

  /** Stops the re-check timer and fails every parked request (`router_closed`, 503). */
  close(): void {
    if (this.timer !== null) this.c.o.clock.clearTimeout(this.timer.handle);
    this.timer = null;
    const q = this.q;
    while (q.size > 0) {
      const w = q.pop()!.wait!;
      w.unlisten?.();
      w.fail(new KvrError('router_closed', 'router is closed', 503));
    }
  }

  private changed(): void {
    const q = this.q;
    const o = this.c.o;
    o.hooks.onQueueChange?.(q.size);
    if (q.size > 0 && this.timer === null) {
      const handle = o.clock.setTimeout(() => {
        this.timer = null;
        this.drain();
        if (q.size > 0) this.changed();
      }, o.queueRecheckMs);
      this.timer = { handle };
    } else if (q.size === 0 && this.timer !== null) {
      o.clock.clearTimeout(this.timer.handle);
      this.timer = null;
    }
  }
}

function cancelled(id: string): KvrError {
  return new KvrError('cancelled', `request ${id} was cancelled while queued`, 499, { request_id: id });
}
