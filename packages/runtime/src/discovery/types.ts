/**
 * The discovery interface (docs/protocol.md §6.2) shared by the mem, file and etcd backends, plus the
 * key rules and namespace filters every backend applies the same way.
 */
import { KvrError, invalidArgument } from '@kvrouter/protocols';

export interface KvEntry {
  key: string;
  value: string;
}

export type WatchEvent =
  | { type: 'put'; key: string; value: string }
  | { type: 'delete'; key: string }
  /** Emitted once, after the puts of the initial listing. */
  | { type: 'synced' };

/**
 * Namespace filter on discovery keys `v1/{kind}/{ns}/...` (docs/configuration.md `--namespace`,
 * `--namespace-prefix`). A prefix wins over an exact namespace; `ns` matches `ns` and `ns-abc123`.
 */
export interface NamespaceFilter {
  namespace?: string | undefined;
  namespacePrefix?: string | undefined;
}

export interface DiscoveryWatch extends AsyncIterableIterator<WatchEvent> {
  /** Stops the watch; the iterator ends. */
  close(): void;
}

/**
 * The process lease as this process sees it (issue 18). etcd and file re-acquire a lost lease under
 * the same id and put every key of this process again; `/health` reports the gap while it lasts.
 */
export interface LeaseStatus {
  /** `held`, or `lost` from the moment the loss is noticed until every key is back. */
  state: 'held' | 'lost';
  /** When the current gap began (ms since the epoch; null while held). */
  lostAt: number | null;
  /** Why the lease was lost (the current gap, else the last one). */
  lastError: string | null;
  /** Gaps that ended with the lease re-acquired and the keys put again. */
  reacquired: number;
  /** The last gap that ended: when it began and ended (ms since the epoch) and how many keys came back. */
  lastGap: { lostAt: number; restoredAt: number; keys: number } | null;
}

export const heldLease = (): LeaseStatus => ({
  state: 'held',
  lostAt: null,
  lastError: null,
  reacquired: 0,
  lastGap: null,
});

export interface Discovery {
  readonly backend: 'mem' | 'file' | 'etcd';
  /** The process lease id, which is also its `instance_id` / `worker_id` (§1, §6.2). */
  readonly leaseId: bigint;
  readonly ttlSec: number;
  /** Writes `key` under this process's lease: it vanishes when the lease ends. */
  put(key: string, value: string): Promise<void>;
  get(key: string): Promise<string | null>;
  delete(key: string): Promise<void>;
  /** Live entries under `prefix`, sorted by key. */
  list(prefix: string, filter?: NamespaceFilter): Promise<KvEntry[]>;
  /** The initial listing as puts, one `synced`, then every change under `prefix`. */
  watch(prefix: string, filter?: NamespaceFilter): DiscoveryWatch;
  /**
   * Called each time the lease ended without `close()` (e.g. the process was paused or etcd could
   * not be reached for a TTL). etcd and file then re-acquire it under the same id and put every key
   * again (`onLeaseRestored` when done); nothing else has to re-register.
   */
  onLeaseLost(listener: (err: KvrError) => void): void;
  /** Called when a lost lease was re-acquired and every key of this process is back. */
  onLeaseRestored(listener: (status: LeaseStatus) => void): void;
  leaseStatus(): LeaseStatus;
  /** Stops keep-alive without revoking, as a crashed process would: the keys expire after the TTL. */
  abandon(): void;
  /** Revokes the lease (its keys are deleted at once) and ends this process's watches. */
  close(): Promise<void>;
}

export const DEFAULT_TTL_SEC = 10;
/** Stays valid as an etcd lease TTL (etcd rounds anything shorter up to its minimum). */
export const MIN_TTL_SEC = 1;

export function checkTtl(ttlSec: number | undefined): number {
  const t = ttlSec ?? DEFAULT_TTL_SEC;
  if (typeof t !== 'number' || !Number.isInteger(t) || t < MIN_TTL_SEC || t > 86_400)
    throw invalidArgument('ttlSec', `must be an integer in [${MIN_TTL_SEC}, 86400], got ${String(t)}`);
  return t;
}

/** Suffix of value files in the file backend; a key segment ending with it would collide. */
export const FILE_SUFFIX = '.kv';

/**
 * One key grammar for every backend so a key valid on `mem` never fails on `file`: `/`-separated
 * non-empty segments, none starting with `.` (temp files, `.` and `..`) or ending with `.kv`, no NUL
 * or backslash, at most 4096 characters.
 */
export function checkKey(key: unknown, field = 'key'): string {
  if (typeof key !== 'string' || key.length === 0) throw invalidArgument(field, 'must be a non-empty string');
  if (key.length > 4096) throw invalidArgument(field, `longer than 4096 characters`);
  if (/[\0\\]/.test(key)) throw invalidArgument(field, `must not contain NUL or '\\': "${key}"`);
  for (const s of key.split('/')) {
    if (s.length === 0) throw invalidArgument(field, `has an empty segment: "${key}"`);
    if (s.charCodeAt(0) === 0x2e) throw invalidArgument(field, `has a segment starting with '.': "${key}"`);
    if (s.endsWith(FILE_SUFFIX))
      throw invalidArgument(field, `has a segment ending with '${FILE_SUFFIX}': "${key}"`);
  }
  return key;
}

export function checkValue(value: unknown): string {
  if (typeof value !== 'string') throw invalidArgument('value', 'must be a string');
  return value;
}

/** A prefix is a key prefix: empty (everything) or anything a key could start with. */
export function checkPrefix(prefix: unknown): string {
  if (typeof prefix !== 'string') throw invalidArgument('prefix', 'must be a string');
  if (prefix.startsWith('/') || /[\0\\]/.test(prefix))
    throw invalidArgument('prefix', `must not start with '/' or contain NUL or '\\': "${prefix}"`);
  return prefix;
}

function checkFilter(f: NamespaceFilter | undefined): NamespaceFilter | undefined {
  if (!f) return undefined;
  for (const field of ['namespace', 'namespacePrefix'] as const) {
    const v = f[field];
    if (v !== undefined && (typeof v !== 'string' || v.length === 0 || v.includes('/')))
      throw invalidArgument(field, `must be a non-empty string without '/', got ${JSON.stringify(v)}`);
  }
  return f.namespace === undefined && f.namespacePrefix === undefined ? undefined : f;
}

/**
 * A compiled prefix + namespace filter. When the prefix stops right at the namespace level
 * (`v1/{kind}/`), the namespace narrows the prefix itself so backends scan less.
 */
export class KeyMatcher {
  readonly prefix: string;
  private readonly exact: string | undefined;
  private readonly nsPrefix: string | undefined;

  constructor(prefix: string, filter?: NamespaceFilter) {
    let p = checkPrefix(prefix);
    const f = checkFilter(filter);
    this.nsPrefix = f?.namespacePrefix;
    this.exact = this.nsPrefix === undefined ? f?.namespace : undefined;
    if (/^[^/]+\/[^/]+\/$/.test(p)) {
      if (this.nsPrefix !== undefined) p += this.nsPrefix;
      else if (this.exact !== undefined) p += `${this.exact}/`;
    }
    this.prefix = p;
  }

  matches(key: string): boolean {
    if (!key.startsWith(this.prefix)) return false;
    if (this.exact === undefined && this.nsPrefix === undefined) return true;
    // Namespace = third segment of `v1/{kind}/{ns}/...`; keys without one never match a filter.
    const a = key.indexOf('/');
    const b = a < 0 ? -1 : key.indexOf('/', a + 1);
    if (b < 0) return false;
    const c = key.indexOf('/', b + 1);
    const ns = c < 0 ? key.slice(b + 1) : key.slice(b + 1, c);
    if (this.nsPrefix !== undefined) return ns.startsWith(this.nsPrefix);
    return ns === this.exact;
  }
}

export const discoveryClosed = (): KvrError =>
  new KvrError('discovery_closed', 'discovery: this process already closed its lease', 500);
