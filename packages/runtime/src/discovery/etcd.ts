/**
 * etcd discovery (§6.2 `etcd`): one lease per process (TTL 10 s, kept alive by etcd3 at ttl/3),
 * every key written under it; list-then-watch from the listing's revision so no change between
 * the two is lost. A lease lost behind the process's back (paused past its TTL, etcd unreachable)
 * is granted again under the same id (etcd's `LeaseGrant` takes a requested ID) and every key this
 * process put is put again, so instance ids, worker ids and `router_id`s survive the gap (issue 18).
 */
// Must run before etcd3 (and so protobufjs) is evaluated.
import './long-shim.js';
import { Etcd3, Lease, type Watcher } from 'etcd3';
import { KvrError, errorMessage, invalidArgument } from '@kvrouter/protocols';

import {
  KeyMatcher,
  checkKey,
  checkTtl,
  checkValue,
  discoveryClosed,
  type Discovery,
  type DiscoveryWatch,
  type KvEntry,
  type LeaseStatus,
  type NamespaceFilter,
} from './types.js';
import { LeaseGaps, WatchChannel } from './watch.js';

export interface EtcdDiscoveryOptions {
  /** Default `ETCD_ENDPOINTS` (comma-separated), else `http://localhost:2379`. */
  endpoints?: string | string[];
  ttlSec?: number;
  /** Give up on the first lease grant after this long; default 5000 ms. */
  connectTimeoutMs?: number;
}

export function etcdEndpointsFromEnv(env: NodeJS.ProcessEnv = process.env): string[] {
  const raw =
    env.ETCD_ENDPOINTS && env.ETCD_ENDPOINTS.trim() !== '' ? env.ETCD_ENDPOINTS : 'http://localhost:2379';
  return parseEndpoints(raw, 'ETCD_ENDPOINTS');
}

function parseEndpoints(v: string | string[], field: string): string[] {
  const list = (Array.isArray(v) ? v : v.split(',')).map((s) => String(s).trim()).filter((s) => s.length > 0);
  if (list.length === 0) throw invalidArgument(field, 'needs at least one URL');
  for (const u of list)
    if (!/^https?:\/\/[^/\s]+\/?$/.test(u))
      throw invalidArgument(field, `not an http(s)://host:port URL: "${u}"`);
  return list;
}

const unavailable = (what: string, e: unknown): KvrError =>
  new KvrError('discovery_unavailable', `etcd: ${what}: ${e instanceof Error ? e.message : String(e)}`, 503);

/** The part of etcd3's (internal) connection pool a `Lease` calls. */
interface LeasePool {
  exec(service: string, method: string, payload: unknown, options?: unknown): Promise<unknown>;
  markFailed(host: unknown, err: unknown): void;
  withConnection(service: string, fn: unknown): Promise<unknown>;
  readonly callOptionsFactory: unknown;
}

/**
 * A `Lease` whose grant asks for `id` (etcd3's `client.lease()` always lets etcd choose). When the
 * lease still exists (the loss was seen by the client only) the grant's "already exists" answer
 * counts as granted: keep-alive resumes on it.
 */
function leaseWithId(client: Etcd3, id: bigint, ttl: number): Lease {
  const inner = client as unknown as { pool: LeasePool; nsApplicator: unknown };
  const pool = inner.pool;
  const granting: LeasePool = {
    exec: (service, method, payload, options) =>
      method !== 'leaseGrant'
        ? pool.exec(service, method, payload, options)
        : pool
            .exec(service, method, { ...(payload as object), ID: id.toString() }, options)
            .catch((e: unknown) => {
              if (/lease already exists/i.test(errorMessage(e)))
                return { ID: id.toString(), TTL: String(ttl) };
              throw e;
            }),
    markFailed: (host, err) => pool.markFailed(host, err),
    withConnection: (service, fn) => pool.withConnection(service, fn),
    get callOptionsFactory() {
      return pool.callOptionsFactory;
    },
  };
  type LeaseCtor = new (pool: LeasePool, ns: unknown, ttl: number) => Lease;
  return new (Lease as unknown as LeaseCtor)(granting, inner.nsApplicator, ttl);
}

const PAUSE_TICK_MS = 500;

const sleep = (ms: number): Promise<void> =>
  new Promise((r) => {
    setTimeout(r, ms).unref();
  });

export class EtcdDiscovery implements Discovery {
  readonly backend = 'etcd' as const;
  private closed = false;
  private readonly watches = new Set<WatchChannel>();
  private readonly watchers = new Map<WatchChannel, Promise<Watcher | null>>();
  /** Every key this process put and did not delete, with its value: what a re-acquired lease puts again. */
  private readonly own = new Map<string, string>();
  private readonly gaps = new LeaseGaps();
  /** Resolves when the current gap ends (null while the lease is held). */
  private restoring: Promise<void> | null = null;
  private abandoned = false;
  /** Notices the process was paused (SIGSTOP, a VM freeze): see `checkAfterPause`. */
  private readonly pauseTimer: ReturnType<typeof setInterval>;
  private lastTick = Date.now();

  private constructor(
    private readonly client: Etcd3,
    private lease: Lease,
    readonly leaseId: bigint,
    readonly ttlSec: number,
    readonly endpoints: string[],
  ) {
    this.watchLease(lease);
    this.pauseTimer = setInterval(() => this.checkAfterPause(), PAUSE_TICK_MS);
    this.pauseTimer.unref();
  }

  /**
   * A tick that comes far too late means the process was not running: if that lasted near the
   * TTL, the lease may be gone. Asking etcd at once (instead of at the next keep-alive, up to ttl/3
   * later) starts the re-registration within a round trip of the process's return.
   */
  private checkAfterPause(): void {
    const now = Date.now();
    const late = now - this.lastTick - PAUSE_TICK_MS;
    this.lastTick = now;
    if (late < (this.ttlSec * 1000) / 2 || this.closed || this.abandoned || this.restoring) return;
    this.lease.keepaliveOnce().catch(() => undefined);
  }

  private watchLease(lease: Lease): void {
    lease.on('lost', (e: Error) => {
      if (this.closed || this.abandoned || lease !== this.lease) return;
      this.gaps.lost(new KvrError('lease_lost', `etcd: lease ${this.leaseId} lost: ${e.message}`, 503));
      this.restoring ??= this.reacquire();
    });
  }

  /**
   * Grants the lease again under the same id and puts every key back, retrying (100 ms doubling
   * to 2 s) until it works or the process closes. Puts made meanwhile wait for it.
   */
  private async reacquire(): Promise<void> {
    let delay = 100;
    while (!this.closed && !this.abandoned) {
      const lease = leaseWithId(this.client, this.leaseId, this.ttlSec);
      lease.on('lost', () => undefined);
      try {
        await lease.grant();
        const keys = [...this.own];
        for (const [k, v] of keys) await lease.put(k).value(v).exec();
        if (this.closed || this.abandoned) {
          lease.release();
          return;
        }
        this.lease = lease;
        this.watchLease(lease);
        this.restoring = null;
        this.gaps.restored(keys.length);
        return;
      } catch {
        lease.release();
        await sleep(delay);
        delay = Math.min(2000, delay * 2);
      }
    }
  }

  static async connect(opts: EtcdDiscoveryOptions = {}): Promise<EtcdDiscovery> {
    const ttl = checkTtl(opts.ttlSec);
    const endpoints =
      opts.endpoints === undefined ? etcdEndpointsFromEnv() : parseEndpoints(opts.endpoints, 'endpoints');
    const timeoutMs = opts.connectTimeoutMs ?? 5000;
    const client = new Etcd3({ hosts: endpoints, dialTimeout: timeoutMs });
    const lease = client.lease(ttl);
    // A grant failure also fires 'lost'; without a listener EventEmitter would throw it.
    lease.on('lost', () => undefined);
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      const id = await Promise.race([
        lease.grant(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new KvrError('connection_timeout', `no lease grant within ${timeoutMs} ms`)),
            timeoutMs,
          );
        }),
      ]);
      return new EtcdDiscovery(client, lease, BigInt(id), ttl, endpoints);
    } catch (e) {
      lease.release();
      client.close();
      throw new KvrError(
        'cannot_connect',
        `etcd at ${endpoints.join(',')}: ${errorMessage(e)}`,
        undefined,
        { field: 'ETCD_ENDPOINTS' },
        { cause: e },
      );
    } finally {
      clearTimeout(timer);
    }
  }

  private live(): void {
    if (this.closed) throw discoveryClosed();
  }

  async put(key: string, value: string): Promise<void> {
    checkKey(key);
    checkValue(value);
    this.live();
    const prev = this.own.get(key);
    // Recorded first: a lease lost while this put is in flight puts it again with the others.
    this.own.set(key, value);
    try {
      // A put during a gap waits for the lease to be back (its snapshot of keys may predate this one).
      if (this.restoring) await this.restoring;
      await this.lease.put(key).value(value).exec();
    } catch (e) {
      // The lease went away under this put: the re-acquisition puts every recorded key.
      if (this.restoring) return this.restoring;
      if (prev === undefined) this.own.delete(key);
      else this.own.set(key, prev);
      throw unavailable(`put ${key}`, e);
    }
  }

  async get(key: string): Promise<string | null> {
    checkKey(key);
    this.live();
    try {
      return await this.client.get(key).string();
    } catch (e) {
      throw unavailable(`get ${key}`, e);
    }
  }

  async delete(key: string): Promise<void> {
    checkKey(key);
    this.live();
    this.own.delete(key);
    try {
      await this.client.delete().key(key).exec();
    } catch (e) {
      throw unavailable(`delete ${key}`, e);
    }
  }

  private async range(m: KeyMatcher): Promise<{ entries: KvEntry[]; revision: string }> {
    const res = await this.client.getAll().prefix(m.prefix).sort('Key', 'Ascend').exec();
    const entries: KvEntry[] = [];
    for (const kv of res.kvs) {
      const key = kv.key.toString('utf8');
      if (m.matches(key)) entries.push({ key, value: kv.value.toString('utf8') });
    }
    return { entries, revision: res.header.revision };
  }

  async list(prefix: string, filter?: NamespaceFilter): Promise<KvEntry[]> {
    const m = new KeyMatcher(prefix, filter);
    this.live();
    try {
      return (await this.range(m)).entries;
    } catch (e) {
      throw unavailable(`list ${m.prefix}`, e);
    }
  }

  watch(prefix: string, filter?: NamespaceFilter): DiscoveryWatch {
    const m = new KeyMatcher(prefix, filter);
    this.live();
    const w = new WatchChannel(m, () => this.unwatch(w));
    this.watches.add(w);
    this.watchers.set(w, this.startWatch(w, m));
    return w;
  }

  private async startWatch(w: WatchChannel, m: KeyMatcher): Promise<Watcher | null> {
    let watcher: Watcher;
    try {
      const { entries, revision } = await this.range(m);
      if (w.closed) return null;
      for (const e of entries) w.push({ type: 'put', key: e.key, value: e.value });
      w.push({ type: 'synced' });
      watcher = await this.client
        .watch()
        .prefix(m.prefix)
        .startRevision((BigInt(revision) + 1n).toString())
        .create();
    } catch (e) {
      w.fail(unavailable(`watch ${m.prefix}`, e));
      this.watches.delete(w);
      return null;
    }
    if (w.closed) {
      await watcher.cancel().catch(() => undefined);
      return null;
    }
    watcher.on('put', (kv) => {
      const key = kv.key.toString('utf8');
      if (m.matches(key)) w.push({ type: 'put', key, value: kv.value.toString('utf8') });
    });
    watcher.on('delete', (kv) => {
      const key = kv.key.toString('utf8');
      if (m.matches(key)) w.push({ type: 'delete', key });
    });
    // etcd3 resumes watches across reconnects by itself; an error here is final (e.g. compaction).
    watcher.on('error', (e) => {
      w.fail(new KvrError('watch_failed', `etcd: watch of ${m.prefix} failed: ${e.message}`, 503));
      this.unwatch(w);
    });
    return watcher;
  }

  private unwatch(w: WatchChannel): void {
    this.watches.delete(w);
    const p = this.watchers.get(w);
    this.watchers.delete(w);
    void p?.then((watcher) => watcher?.cancel()).catch(() => undefined);
  }

  onLeaseLost(listener: (err: KvrError) => void): void {
    this.gaps.onLost(listener);
  }

  onLeaseRestored(listener: (status: LeaseStatus) => void): void {
    this.gaps.onRestored(listener);
  }

  leaseStatus(): LeaseStatus {
    return this.gaps.status();
  }

  abandon(): void {
    this.abandoned = true;
    clearInterval(this.pauseTimer);
    this.lease.release();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.pauseTimer);
    for (const w of [...this.watches]) {
      w.end();
      this.unwatch(w);
    }
    await Promise.all([...this.watchers.values()]).catch(() => undefined);
    try {
      await this.lease.revoke();
    } catch {
      // The lease may already be gone (expired or etcd down); its keys go with it either way.
    }
    this.client.close();
  }
}
