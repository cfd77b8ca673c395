/**
 * In-process discovery (§6.2 `mem`). A `MemDiscoveryHub` is the shared store; each `MemDiscovery`
 * is one "process" with its own lease, so several simulated workers and a frontend can share one
 * hub inside a test or a single-process deployment.
 */
import { invalidArgument } from '@kvrouter/protocols';
import type { KvrError } from '@kvrouter/protocols';

import {
  KeyMatcher,
  checkKey,
  checkTtl,
  checkValue,
  discoveryClosed,
  type Discovery,
  type DiscoveryWatch,
  heldLease,
  type KvEntry,
  type LeaseStatus,
  type NamespaceFilter,
} from './types.js';
import { WatchChannel, keepAliveMs, randomLeaseId } from './watch.js';

interface Lease {
  ttlMs: number;
  keys: Set<string>;
  timer: ReturnType<typeof setTimeout> | null;
}

export class MemDiscoveryHub {
  private readonly entries = new Map<string, { value: string; lease: bigint }>();
  private readonly leases = new Map<bigint, Lease>();
  private readonly watches = new Set<WatchChannel>();

  /** Starts a new "process" holding its own lease. */
  connect(opts: { ttlSec?: number; leaseId?: bigint } = {}): MemDiscovery {
    const ttlSec = checkTtl(opts.ttlSec);
    let id = opts.leaseId;
    if (id !== undefined) {
      if (typeof id !== 'bigint' || id <= 0n || id >= 1n << 63n)
        throw invalidArgument('leaseId', 'must be a bigint in [1, 2^63)');
      if (this.leases.has(id)) throw invalidArgument('leaseId', `${id} is already held`);
    } else {
      do id = randomLeaseId();
      while (this.leases.has(id));
    }
    this.leases.set(id, { ttlMs: ttlSec * 1000, keys: new Set(), timer: null });
    this.renew(id);
    return new MemDiscovery(this, id, ttlSec);
  }

  /** Number of live leases (tests). */
  get leaseCount(): number {
    return this.leases.size;
  }

  /** @internal */
  renew(id: bigint): boolean {
    const l = this.leases.get(id);
    if (!l) return false;
    if (l.timer) clearTimeout(l.timer);
    l.timer = setTimeout(() => this.revoke(id), l.ttlMs);
    l.timer.unref();
    return true;
  }

  /** @internal Deletes every key of the lease, then forgets it. */
  revoke(id: bigint): void {
    const l = this.leases.get(id);
    if (!l) return;
    if (l.timer) clearTimeout(l.timer);
    this.leases.delete(id);
    for (const k of l.keys) {
      this.entries.delete(k);
      this.emit(k, null);
    }
  }

  /** @internal */
  put(id: bigint, key: string, value: string): void {
    const l = this.leases.get(id);
    if (!l) throw discoveryClosed();
    const prev = this.entries.get(key);
    if (prev && prev.lease !== id) this.leases.get(prev.lease)?.keys.delete(key);
    this.entries.set(key, { value, lease: id });
    l.keys.add(key);
    this.emit(key, value);
  }

  /** @internal */
  get(key: string): string | null {
    return this.entries.get(key)?.value ?? null;
  }

  /** @internal */
  delete(key: string): void {
    const prev = this.entries.get(key);
    if (!prev) return;
    this.entries.delete(key);
    this.leases.get(prev.lease)?.keys.delete(key);
    this.emit(key, null);
  }

  /** @internal */
  list(m: KeyMatcher): KvEntry[] {
    const out: KvEntry[] = [];
    for (const [key, e] of this.entries) if (m.matches(key)) out.push({ key, value: e.value });
    return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  /** @internal The listing and the registration happen in one synchronous step, so nothing is missed. */
  watch(m: KeyMatcher): WatchChannel {
    const w = new WatchChannel(m, () => this.watches.delete(w));
    for (const e of this.list(m)) w.push({ type: 'put', key: e.key, value: e.value });
    w.push({ type: 'synced' });
    this.watches.add(w);
    return w;
  }

  /** @internal */
  unwatch(w: WatchChannel): void {
    this.watches.delete(w);
    w.end();
  }

  private emit(key: string, value: string | null): void {
    for (const w of this.watches) {
      if (!w.matcher.matches(key)) continue;
      w.push(value === null ? { type: 'delete', key } : { type: 'put', key, value });
    }
  }
}

let defaultHub: MemDiscoveryHub | null = null;
/** The process-wide hub used when `createDiscovery({backend: 'mem'})` gets none. */
export function defaultMemHub(): MemDiscoveryHub {
  return (defaultHub ??= new MemDiscoveryHub());
}

export class MemDiscovery implements Discovery {
  readonly backend = 'mem' as const;
  private keepAlive: ReturnType<typeof setInterval> | null;
  private closed = false;
  private readonly watches = new Set<WatchChannel>();

  constructor(
    private readonly hub: MemDiscoveryHub,
    readonly leaseId: bigint,
    readonly ttlSec: number,
  ) {
    this.keepAlive = setInterval(() => hub.renew(leaseId), keepAliveMs(ttlSec));
    this.keepAlive.unref();
  }

  private live(): void {
    if (this.closed) throw discoveryClosed();
  }

  async put(key: string, value: string): Promise<void> {
    checkKey(key);
    checkValue(value);
    this.live();
    this.hub.put(this.leaseId, key, value);
  }

  async get(key: string): Promise<string | null> {
    checkKey(key);
    this.live();
    return this.hub.get(key);
  }

  async delete(key: string): Promise<void> {
    checkKey(key);
    this.live();
    this.hub.delete(key);
  }

  async list(prefix: string, filter?: NamespaceFilter): Promise<KvEntry[]> {
    const m = new KeyMatcher(prefix, filter);
    this.live();
    return this.hub.list(m);
  }

  watch(prefix: string, filter?: NamespaceFilter): DiscoveryWatch {
    const m = new KeyMatcher(prefix, filter);
    this.live();
    const w = this.hub.watch(m);
    this.watches.add(w);
    const detach = w.onReturn;
    w.onReturn = () => {
      this.watches.delete(w);
      detach?.();
    };
    return w;
  }

  onLeaseLost(_listener: (err: KvrError) => void): void {
    // An in-process lease only ends through close() or abandon(); neither reports a loss.
  }

  onLeaseRestored(_listener: (status: LeaseStatus) => void): void {}

  leaseStatus(): LeaseStatus {
    return heldLease();
  }

  abandon(): void {
    if (this.keepAlive) clearInterval(this.keepAlive);
    this.keepAlive = null;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.abandon();
    for (const w of this.watches) this.hub.unwatch(w);
    this.watches.clear();
    this.hub.revoke(this.leaseId);
  }
}
