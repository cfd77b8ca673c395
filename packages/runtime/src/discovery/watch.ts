import { Channel } from '../channel.js';
import type { DiscoveryWatch, KeyMatcher, WatchEvent } from './types.js';

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
