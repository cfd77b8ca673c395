import type { KvrError } from '@kvrouter/protocols';
import { Channel } from '../channel.js';
import {
  heldLease,
  type DiscoveryWatch,
  type KeyMatcher,
  type LeaseStatus,
  type WatchEvent,
} from './types.js';

/** A watch as its consumer sees it; the backend pushes already-filtered events into it. */
export class WatchChannel extends Channel<WatchEvent> implements DiscoveryWatch {
  constructor(
    readonly matcher: KeyMatcher,
    onClose: () => void,
  ) {
    super();
    this.onReturn = onClose;
  }

  close(): void {
    void this.return();
  }
}

/** A random lease id in [1, 2^63): positive as an i64 too, like etcd's. */
export function randomLeaseId(): bigint {
  const w = new BigUint64Array(1);
  for (;;) {
    crypto.getRandomValues(w);
    const id = w[0]! >> 1n;
    if (id !== 0n) return id;
  }
}

/** Keep-alive period: a third of the TTL, at least one second (§6.2). */
export const keepAliveMs = (ttlSec: number): number => Math.max(1000, Math.floor((ttlSec * 1000) / 3));

/** The lost / restored bookkeeping of a lease that is re-acquired after a loss (etcd, file). */
export class LeaseGaps {
  private s: LeaseStatus = heldLease();
  private readonly lostListeners: ((e: KvrError) => void)[] = [];
  private readonly restoredListeners: ((s: LeaseStatus) => void)[] = [];

  status(): LeaseStatus {
    return { ...this.s, lastGap: this.s.lastGap ? { ...this.s.lastGap } : null };
  }

  onLost(l: (e: KvrError) => void): void {
    this.lostListeners.push(l);
  }

  onRestored(l: (s: LeaseStatus) => void): void {
    this.restoredListeners.push(l);
  }

  /** A gap begins (false when one is already open). Listeners run synchronously, here. */
  lost(err: KvrError, now = Date.now()): boolean {
    if (this.s.state === 'lost') return false;
    this.s = { ...this.s, state: 'lost', lostAt: now, lastError: err.message };
    for (const l of this.lostListeners) l(err);
    return true;
  }

  restored(keys: number, now = Date.now()): void {
    if (this.s.state !== 'lost') return;
    this.s = {
      ...this.s,
      state: 'held',
      lostAt: null,
      reacquired: this.s.reacquired + 1,
      lastGap: { lostAt: this.s.lostAt!, restoredAt: now, keys },
    };
    const st = this.status();
    for (const l of this.restoredListeners) l(st);
  }
}
