/**
 * File discovery (§6.2 `file`): one file per key under a shared root, liveness by modification
 * time. The owner touches its files every ttl/3 (≥ 1 s); a file older than the TTL counts as
 * deleted. Watches poll. Works across processes on one host (or a shared filesystem) with no service.
 *
 * A key `a/b/c` lives in `{root}/a/b/c.kv`: the suffix lets `v1/mdc/.../{id}` and
 * `v1/mdc/.../{id}/{lora}` coexist (one a file, the other under a directory of the same name).
 */
import { mkdir, readFile, readdir, rename, stat, unlink, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KvrError, invalidArgument } from '@kvrouter/protocols';

import {
  FILE_SUFFIX,
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
import { LeaseGaps, WatchChannel, keepAliveMs, randomLeaseId } from './watch.js';

export interface FileDiscoveryOptions {
  /** Default `DYN_FILE_KV`, else `$TMPDIR/dynamo_store_kv`. */
  root?: string;
  ttlSec?: number;
  /** Watch polling period; default 500 ms. */
  pollMs?: number;
  leaseId?: bigint;
}

export const defaultFileRoot = (env: NodeJS.ProcessEnv = process.env): string =>
  env.DYN_FILE_KV && env.DYN_FILE_KV.length > 0 ? env.DYN_FILE_KV : join(tmpdir(), 'dynamo_store_kv');

/** A directory as last listed (`FileDiscovery.scan`): its subdirectories and its key files. */
interface Listing {
  dirMtimeMs: number;
  /** When the listing started (wall clock, as file system timestamps are). */
  listedAt: number;
  /** When a scan last found it valid (`now` of that scan). */
  checkedAt: number;
  dirs: string[];
  files: Map<string, { path: string; mtimeMs: number; size: number }>;
}

/** A directory whose mtime is this close to its listing's start is listed again on every poll. */
const TRUST_AFTER_MS = 2000;
/** Every listing is redone at least this often. */
const RELIST_MS = 10_000;

interface Seen {
  mtimeMs: number;
  size: number;
  value: string;
}

const isNoEnt = (e: unknown): boolean =>
  typeof e === 'object' &&
  e !== null &&
  ((e as { code?: string }).code === 'ENOENT' || (e as { code?: string }).code === 'ENOTDIR');

export class FileDiscovery implements Discovery {
  readonly backend = 'file' as const;
  private readonly ttlMs: number;
  private readonly pollMs: number;
  /** Keys this process wrote and keeps alive. */
  private readonly own = new Map<string, string>();
  private readonly watches = new Set<WatchChannel>();
  /** Directory listings shared by every scan (relative path ending in `/` -> listing). */
  private readonly listings = new Map<string, Listing>();
  private touchTimer: ReturnType<typeof setInterval> | null;
  private lastTouch = Date.now();
  private closed = false;
  private readonly gaps = new LeaseGaps();
  private tmpSeq = 0;

  private constructor(
    readonly root: string,
    readonly ttlSec: number,
    pollMs: number,
    readonly leaseId: bigint,
  ) {
    this.ttlMs = ttlSec * 1000;
    this.pollMs = pollMs;
    this.touchTimer = setInterval(() => void this.touch(), keepAliveMs(ttlSec));
    this.touchTimer.unref();
  }

  static async open(opts: FileDiscoveryOptions = {}): Promise<FileDiscovery> {
    const ttl = checkTtl(opts.ttlSec);
    const pollMs = opts.pollMs ?? 500;
    if (!Number.isInteger(pollMs) || pollMs < 10)
      throw invalidArgument('pollMs', `must be an integer >= 10, got ${pollMs}`);
    const root = opts.root ?? defaultFileRoot();
    if (typeof root !== 'string' || root.length === 0)
      throw invalidArgument('root', 'must be a non-empty path');
    try {
      await mkdir(root, { recursive: true });
    } catch (e) {
      throw new KvrError(
        'discovery_unavailable',
        `file discovery: cannot create root ${root}: ${String(e)}`,
        503,
        {
          field: 'DYN_FILE_KV',
        },
      );
    }
    const id = opts.leaseId ?? randomLeaseId();
    return new FileDiscovery(root, ttl, pollMs, id);
  }

  private pathOf(key: string): string {
    return join(this.root, key + FILE_SUFFIX);
  }

  private live(): void {
    if (this.closed) throw discoveryClosed();
  }

  private async touch(): Promise<void> {
    const now = Date.now();
    // A process that could not touch for a whole TTL (suspended, disk stalled) has been seen as
    // dead by everyone else; like a lost etcd lease, its keys are written again (issue 18).
    if (now - this.lastTouch > this.ttlMs) {
      this.gaps.lost(
        new KvrError(
          'lease_lost',
          `file discovery: keys not refreshed for ${now - this.lastTouch} ms (TTL ${this.ttlMs} ms)`,
          503,
        ),
        now,
      );
      this.lastTouch = now;
      const keys = [...this.own];
      await Promise.all(keys.map(([k, v]) => this.write(k, v).catch(() => undefined)));
      if (!this.closed && this.touchTimer) this.gaps.restored(keys.length);
      return;
    }
    this.lastTouch = now;
    const t = new Date(now);
    await Promise.all(
      [...this.own.keys()].map(async (k) => {
        try {
          await utimes(this.pathOf(k), t, t);
        } catch (e) {
          // Deleted by someone else: stop keeping it alive.
          if (isNoEnt(e)) this.own.delete(k);
        }
      }),
    );
  }

  async put(key: string, value: string): Promise<void> {
    checkKey(key);
    checkValue(value);
    this.live();
    await this.write(key, value);
    this.own.set(key, value);
  }

  private async write(key: string, value: string): Promise<void> {
    const path = this.pathOf(key);
    const dir = path.slice(0, path.lastIndexOf('/'));
    const tmp = join(dir, `.kvr-tmp-${this.leaseId.toString(16)}-${++this.tmpSeq}`);
    // Write then rename so a poller never reads half a value.
    try {
      await mkdir(dir, { recursive: true });
      await writeFile(tmp, value);
      await rename(tmp, path);
    } catch (e) {
      await unlink(tmp).catch(() => undefined);
      throw new KvrError('discovery_unavailable', `file discovery: cannot write ${key}: ${String(e)}`, 503, {
        key,
      });
    }
  }

  async get(key: string): Promise<string | null> {
    checkKey(key);
    this.live();
    const path = this.pathOf(key);
    try {
      const st = await stat(path);
      if (!st.isFile() || Date.now() - st.mtimeMs > this.ttlMs) return null;
      return await readFile(path, 'utf8');
    } catch (e) {
      if (isNoEnt(e)) return null;
      throw e;
    }
  }

  async delete(key: string): Promise<void> {
    checkKey(key);
    this.live();
    this.own.delete(key);
    await unlink(this.pathOf(key)).catch((e: unknown) => {
      if (!isNoEnt(e)) throw e;
    });
  }

  async list(prefix: string, filter?: NamespaceFilter): Promise<KvEntry[]> {
    const m = new KeyMatcher(prefix, filter);
    this.live();
    const files = await this.scan(m);
    const out: KvEntry[] = [];
    for (const [key, f] of files) {
      const value = await readFile(f.path, 'utf8').catch((e: unknown) => {
        if (isNoEnt(e)) return null;
        throw e;
      });
      if (value !== null) out.push({ key, value });
    }
    return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  /**
   * Live files under the matcher's prefix: key -> (path, mtime, size).
   *
   * Every watch polls its subtree every `pollMs`; listing each directory and stat-ing each file on
   * every poll cost ~30 ms of CPU a second for a frontend watching a fleet of 8 engines, whatever
   * the load. A directory whose modification time has not moved is not listed again (`Listing`):
   * every change of a key's existence or value is a create, rename or unlink in its directory,
   * which moves the directory's mtime (write() writes a temporary file there and renames it into
   * place). Only a touch (utimes of a file) leaves the directory alone, and a touch can only delay
   * expiry, so a known file is stat-ed again only once its last seen mtime is older than the TTL.
   * Guards: a directory modified within `TRUST_AFTER_MS` of its listing is listed again on every
   * poll (two changes within one coarse timestamp tick, clock skew), and every listing is redone
   * after `RELIST_MS` whatever its mtime says (a shared filesystem's clocks and attribute caches).
   */
  private async scan(m: KeyMatcher): Promise<Map<string, { path: string; mtimeMs: number; size: number }>> {
    const out = new Map<string, { path: string; mtimeMs: number; size: number }>();
    const now = Date.now();
    const p = m.prefix;
    const startRel = p.slice(0, p.lastIndexOf('/') + 1);
    const walk = async (rel: string): Promise<void> => {
      const l = await this.listing(rel, now);
      if (l === null) return;
      const subdirs: Promise<void>[] = [];
      for (const sub of l.dirs) if (sub.startsWith(p) || p.startsWith(sub)) subdirs.push(walk(sub));
      for (const [key, f] of l.files) {
        if (!m.matches(key)) continue;
        if (now - f.mtimeMs > this.ttlMs) {
          // Expired as last seen, unless touched since: look again.
          try {
            const st = await stat(f.path);
            f.mtimeMs = st.mtimeMs;
            f.size = st.size;
          } catch (e) {
            if (!isNoEnt(e)) throw e;
            continue;
          }
        }
        if (now - f.mtimeMs <= this.ttlMs) out.set(key, { path: f.path, mtimeMs: f.mtimeMs, size: f.size });
      }
      await Promise.all(subdirs);
    };
    await walk(startRel);
    return out;
  }

  /** Directory `rel` (relative to the root, ending in `/`): its listing, reused while valid (see `scan`); null if absent. */
  private async listing(rel: string, now: number): Promise<Listing | null> {
    const dir = join(this.root, rel);
    const known = this.listings.get(rel);
    // Checked by another watch's poll within the last half period: that answer serves this one too.
    if (known !== undefined && now - known.checkedAt < this.pollMs / 2) return known;
    let dirMtime: number;
    try {
      dirMtime = (await stat(dir)).mtimeMs;
    } catch (e) {
      this.listings.delete(rel);
      if (isNoEnt(e)) return null;
      throw e;
    }
    const old = this.listings.get(rel);
    if (
      old !== undefined &&
      old.dirMtimeMs === dirMtime &&
      dirMtime < old.listedAt - TRUST_AFTER_MS &&
      now - old.listedAt < RELIST_MS
    ) {
      old.checkedAt = now;
      return old;
    }
    const listedAt = Date.now();
    let ents;
    try {
      ents = await readdir(dir, { withFileTypes: true });
    } catch (e) {
      this.listings.delete(rel);
      if (isNoEnt(e)) return null;
      throw e;
    }
    const l: Listing = { dirMtimeMs: dirMtime, listedAt, checkedAt: now, dirs: [], files: new Map() };
    const stats: Promise<void>[] = [];
    for (const d of ents) {
      const name = d.name;
      if (name.charCodeAt(0) === 0x2e) continue;
      if (d.isDirectory()) l.dirs.push(`${rel}${name}/`);
      else if (d.isFile() && name.endsWith(FILE_SUFFIX)) {
        const key = rel + name.slice(0, -FILE_SUFFIX.length);
        const path = join(this.root, key + FILE_SUFFIX);
        stats.push(
          stat(path).then(
            (st) => void l.files.set(key, { path, mtimeMs: st.mtimeMs, size: st.size }),
            (e: unknown) => {
              if (!isNoEnt(e)) throw e;
            },
          ),
        );
      }
    }
    await Promise.all(stats);
    // Subdirectories gone since the last listing: forget their listings.
    if (old !== undefined)
      for (const gone of old.dirs)
        if (!l.dirs.includes(gone))
          for (const k of this.listings.keys()) if (k.startsWith(gone)) this.listings.delete(k);
    this.listings.set(rel, l);
    return l;
  }

  watch(prefix: string, filter?: NamespaceFilter): DiscoveryWatch {
    const m = new KeyMatcher(prefix, filter);
    this.live();
    let timer: ReturnType<typeof setTimeout> | null = null;
    const w = new WatchChannel(m, () => {
      this.watches.delete(w);
      if (timer) clearTimeout(timer);
    });
    this.watches.add(w);
    const seen = new Map<string, Seen>();
    let first = true;
    const poll = async (): Promise<void> => {
      timer = null;
      if (w.closed) return;
      try {
        const files = await this.scan(m);
        for (const [key, f] of files) {
          const s = seen.get(key);
          if (s && s.mtimeMs === f.mtimeMs && s.size === f.size) continue;
          let value: string;
          try {
            value = await readFile(f.path, 'utf8');
          } catch (e) {
            if (isNoEnt(e)) {
              files.delete(key);
              continue;
            }
            throw e;
          }
          seen.set(key, { mtimeMs: f.mtimeMs, size: f.size, value });
          // A touch changes mtime only; report a put only when the value is new or changed.
          if (!s || s.value !== value) w.push({ type: 'put', key, value });
        }
        for (const key of seen.keys())
          if (!files.has(key)) {
            seen.delete(key);
            w.push({ type: 'delete', key });
          }
        if (first) {
          first = false;
          w.push({ type: 'synced' });
        }
      } catch (e) {
        w.fail(
          new KvrError('watch_failed', `file discovery: watch of ${m.prefix} failed: ${String(e)}`, 503),
        );
        this.watches.delete(w);
        return;
      }
      if (!w.closed) {
        timer = setTimeout(() => void poll(), this.pollMs);
        timer.unref();
      }
    };
    void poll();
    return w;
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
    if (this.touchTimer) clearInterval(this.touchTimer);
    this.touchTimer = null;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.abandon();
    for (const w of this.watches) w.end();
    this.watches.clear();
    await Promise.all([...this.own.keys()].map((k) => unlink(this.pathOf(k)).catch(() => undefined)));
    this.own.clear();
  }
}
