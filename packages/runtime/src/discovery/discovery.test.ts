/**
 * One conformance suite for every discovery backend (mem, file, etcd against a real etcd).
 * Several "processes" are several Discovery handles on one store.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { KvrError, mdcKey, mdcPrefix } from '@kvrouter/protocols';
import { startEtcd, type ServiceHandle } from '@kvrouter/testkit';
import {
  EtcdDiscovery,
  FileDiscovery,
  MemDiscoveryHub,
  createDiscovery,
  type Discovery,
  type DiscoveryWatch,
  type WatchEvent,
} from './index.js';

interface Backend {
  name: string;
  setup(): Promise<void>;
  teardown(): Promise<void>;
  open(ttlSec?: number): Promise<Discovery>;
}

let etcd: ServiceHandle | null = null;

const backends: Backend[] = [
  (() => {
    let hub = new MemDiscoveryHub();
    return {
      name: 'mem',
      setup: async () => {
        hub = new MemDiscoveryHub();
      },
      teardown: async () => undefined,
      open: async (ttlSec?: number) => hub.connect({ ttlSec }),
    };
  })(),
  (() => {
    let root = '';
    return {
      name: 'file',
      setup: async () => {
        root = mkdtempSync(join(tmpdir(), 'kvr-filekv-'));
      },
      teardown: async () => rmSync(root, { recursive: true, force: true }),
      open: (ttlSec?: number) => FileDiscovery.open({ root, ttlSec, pollMs: 50 }),
    };
  })(),
  {
    name: 'etcd',
    setup: async () => undefined,
    teardown: async () => undefined,
    open: (ttlSec?: number) => EtcdDiscovery.connect({ endpoints: etcd!.url, ttlSec }),
  },
];

beforeAll(async () => {
  etcd = await startEtcd();
});
afterAll(async () => {
  await etcd?.stop();
});

/** Pulls events until `pred` accepts one (returned with everything before it), or fails after `ms`. */
async function until(w: DiscoveryWatch, pred: (e: WatchEvent) => boolean, ms = 5000): Promise<WatchEvent[]> {
  const seen: WatchEvent[] = [];
  const deadline = Date.now() + ms;
  for (;;) {
    const left = deadline - Date.now();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const r = await Promise.race([
      w.next(),
      new Promise<'timeout'>((res) => {
        timer = setTimeout(() => res('timeout'), Math.max(0, left));
      }),
    ]);
    clearTimeout(timer);
    if (r === 'timeout') throw new Error(`no matching event within ${ms} ms; saw ${JSON.stringify(seen)}`);
    if (r.done) throw new Error(`watch ended; saw ${JSON.stringify(seen)}`);
    seen.push(r.value);
    if (pred(r.value)) return seen;
  }
}

const isSynced = (e: WatchEvent): boolean => e.type === 'synced';
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function codeOf(f: () => unknown): string | undefined {
  try {
    f();
  } catch (e) {
    return e instanceof KvrError ? e.code : `non-KvrError: ${String(e)}`;
  }
  return undefined;
}

async function codeOfAsync(f: () => Promise<unknown>): Promise<{ code?: string; field?: unknown }> {
  try {
    await f();
  } catch (e) {
    if (e instanceof KvrError) return { code: e.code, field: e.detail?.field };
    return { code: `non-KvrError: ${String(e)}` };
  }
  return {};
}

const ID = 0x694d8a1c2b3e4f07n;

describe.each(backends)('discovery conformance: $name', (b) => {
  const opened: Discovery[] = [];
  const open = async (ttlSec?: number): Promise<Discovery> => {
    const d = await b.open(ttlSec);
    opened.push(d);
    return d;
  };

  beforeAll(() => b.setup());
  afterAll(() => b.teardown());
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((d) => d.close()));
  });

  it('put, get, list (sorted, prefix-bounded) and delete across processes', async () => {
    const a = await open();
    const c = await open();
    expect(a.leaseId).not.toBe(c.leaseId);
    expect(a.leaseId > 0n && a.leaseId < 1n << 63n).toBe(true);
    const k1 = mdcKey('dyn', 'backend', 'generate', ID);
    const k2 = mdcKey('dyn', 'backend', 'generate', ID, 'lora-a'); // k1 is both a key and a parent
    const k3 = mdcKey('dyn', 'backend', 'generatex', ID);
    await a.put(k2, '{"b":2}');
    await a.put(k1, '{"a":1}');
    await c.put(k3, 'x');
    expect(await c.get(k1)).toBe('{"a":1}');
    expect(await c.get(k2)).toBe('{"b":2}');
    expect(await c.get(mdcKey('dyn', 'backend', 'generate', 1n))).toBeNull();
    // 'generate/' must not match 'generatex'.
    expect(await c.list(mdcPrefix('dyn', 'backend', 'generate'))).toEqual([
      { key: k1, value: '{"a":1}' },
      { key: k2, value: '{"b":2}' },
    ]);
    expect((await c.list('v1/mdc/')).map((e) => e.key)).toEqual([k1, k2, k3]);
    await a.put(k1, '{"a":3}');
    expect(await c.get(k1)).toBe('{"a":3}');
    await c.delete(k1);
    expect(await a.get(k1)).toBeNull();
    expect((await a.list('v1/mdc/')).map((e) => e.key)).toEqual([k2, k3]);
    await c.delete(k1); // deleting a missing key is not an error
  });

  it('watch: initial listing, synced, then puts and deletes in order; close ends it', async () => {
    const a = await open();
    const c = await open();
    const p = 'v1/instances/w/comp/';
    await a.put(`${p}generate/1`, 'one');
    await a.put('v1/instances/other/comp/generate/9', 'elsewhere');
    const w = c.watch(p);
    expect(await until(w, isSynced)).toEqual([
      { type: 'put', key: `${p}generate/1`, value: 'one' },
      { type: 'synced' },
    ]);
    await a.put(`${p}generate/2`, 'two');
    expect(await until(w, () => true)).toEqual([{ type: 'put', key: `${p}generate/2`, value: 'two' }]);
    await a.put(`${p}generate/2`, 'two-b');
    expect(await until(w, () => true)).toEqual([{ type: 'put', key: `${p}generate/2`, value: 'two-b' }]);
    await c.delete(`${p}generate/1`);
    expect(await until(w, () => true)).toEqual([{ type: 'delete', key: `${p}generate/1` }]);
    w.close();
    expect(await w.next()).toEqual({ value: undefined, done: true });
  });

  it('close revokes the lease: every key of that process is deleted at once and watchers see it', async () => {
    const a = await open();
    const c = await open();
    const p = 'v1/instances/rv/';
    await a.put(`${p}c/generate/1`, 'x');
    await a.put(`${p}c/generate/2`, 'y');
    await c.put(`${p}c/generate/3`, 'mine');
    const w = c.watch(p);
    await until(w, isSynced);
    await a.close();
    const ev = await until(w, (e) => e.type === 'delete' && e.key.endsWith('/2'));
    const ev2 = ev.length === 2 ? ev : [...ev, ...(await until(w, (e) => e.type === 'delete'))];
    expect(new Set(ev2.map((e) => (e.type === 'delete' ? e.key : e.type)))).toEqual(
      new Set([`${p}c/generate/1`, `${p}c/generate/2`]),
    );
    expect(await c.list(p)).toEqual([{ key: `${p}c/generate/3`, value: 'mine' }]);
    const closed = await codeOfAsync(() => a.put(`${p}c/generate/4`, 'late'));
    expect(closed.code).toBe('discovery_closed');
    w.close();
  });

  it('a process that stops keeping its lease alive loses its keys after the TTL; a live one keeps them', async () => {
    // The file backend judges staleness by the reader's TTL, so every process uses the same one.
    const live = await open(2);
    const dead = await open(2);
    const watcher = await open(2);
    const p = 'v1/instances/lease/c/generate/';
    await live.put(`${p}live`, 'L');
    await sleep(300);
    await dead.put(`${p}dead`, 'D');
    const w = watcher.watch(p);
    await until(w, isSynced);
    dead.abandon();
    // Abandoning is a crash, not a revoke: the key is still there right after.
    expect(await watcher.get(`${p}dead`)).toBe('D');
    const t0 = Date.now();
    const ev = await until(w, (e) => e.type === 'delete', 9000);
    // `live` was written 300 ms before `dead`, so without keep-alive it would have vanished first.
    expect(ev).toEqual([{ type: 'delete', key: `${p}dead` }]);
    expect(Date.now() - t0).toBeGreaterThan(500);
    expect(await watcher.list(p)).toEqual([{ key: `${p}live`, value: 'L' }]);
    w.close();
  });

  it('namespace and namespace-prefix filters on list and watch (prefix wins)', async () => {
    const a = await open();
    const keys = ['ns', 'ns-abc123', 'nsx', 'other', 'xns'].map((ns) =>
      mdcKey(ns, 'backend', 'generate', ID),
    );
    for (const k of keys) await a.put(k, k);
    const root = mdcPrefix();
    expect((await a.list(root, { namespace: 'ns' })).map((e) => e.key)).toEqual([keys[0]]);
    // Sorted by key: '-' (0x2d) sorts before '/' (0x2f), so ns-abc123 comes first.
    expect((await a.list(root, { namespacePrefix: 'ns' })).map((e) => e.key)).toEqual([
      keys[1],
      keys[0],
      keys[2],
    ]);
    expect((await a.list(root, { namespace: 'other', namespacePrefix: 'ns-' })).map((e) => e.key)).toEqual([
      keys[1],
    ]);
    // The filter also applies below the namespace level.
    expect(await a.list(mdcPrefix('other', 'backend'), { namespace: 'ns' })).toEqual([]);
    const w = a.watch(root, { namespacePrefix: 'ns-' });
    expect(await until(w, isSynced)).toEqual([
      { type: 'put', key: keys[1], value: keys[1] },
      { type: 'synced' },
    ]);
    await a.delete(keys[3]);
    await a.delete(keys[0]);
    await a.delete(keys[1]);
    // Only the matching delete arrives, and nothing before it.
    expect(await until(w, () => true)).toEqual([{ type: 'delete', key: keys[1] }]);
    w.close();
    expect((await codeOfAsync(() => a.list(root, { namespace: 'a/b' }))).field).toBe('namespace');
  });

  it('rejects bad keys and values with a typed error naming the field, without writing anything', async () => {
    const a = await open();
    for (const bad of ['', '/v1/x', 'v1//x', 'v1/./x', 'v1/.hidden', 'v1/x.kv/y', 'v1/x\\y']) {
      expect(await codeOfAsync(() => a.put(bad, 'v'))).toEqual({ code: 'invalid_argument', field: 'key' });
    }
    expect(await codeOfAsync(() => a.put('v1/ok', 5 as unknown as string))).toEqual({
      code: 'invalid_argument',
      field: 'value',
    });
    expect(codeOf(() => a.watch(7 as unknown as string))).toBe('invalid_argument');
    expect(await a.list('')).toEqual([]);
  });
});

describe('createDiscovery', () => {
  it('kubernetes is a clear not-supported error; unknown names are invalid', async () => {
    const k = await codeOfAsync(() => createDiscovery({ backend: 'kubernetes' }));
    expect(k).toEqual({ code: 'not_supported', field: 'discovery_backend' });
    const u = await codeOfAsync(() => createDiscovery({ backend: 'zookeeper' as 'mem' }));
    expect(u).toEqual({ code: 'invalid_argument', field: 'discovery_backend' });
  });

  it('mem shares one hub per process by default; ttl is validated', async () => {
    const a = await createDiscovery({ backend: 'mem' });
    const b = await createDiscovery({ backend: 'mem' });
    await a.put('v1/shared/x', '1');
    expect(await b.get('v1/shared/x')).toBe('1');
    await a.close();
    expect(await b.get('v1/shared/x')).toBeNull();
    await b.close();
    expect((await codeOfAsync(() => createDiscovery({ backend: 'mem', ttlSec: 0 }))).field).toBe('ttlSec');
  });

  it('etcd: the lease id is exact (int64 decoded losslessly) and is the lease etcd attached to the keys', async () => {
    const d = await EtcdDiscovery.connect({ endpoints: etcd!.url });
    await d.put('v1/lease-check/k', 'v');
    // etcd's own JSON gateway (int64 as decimal strings) is independent of the gRPC client's decoding.
    const r = await fetch(`${etcd!.url}/v3/kv/range`, {
      method: 'POST',
      body: JSON.stringify({ key: Buffer.from('v1/lease-check/k').toString('base64') }),
    });
    const body = (await r.json()) as { kvs: { lease: string }[] };
    expect(body.kvs[0]!.lease).toBe(d.leaseId.toString());
    await d.close();
  });

  it('etcd that nobody serves fails with cannot_connect naming ETCD_ENDPOINTS', async () => {
    const r = await codeOfAsync(() =>
      EtcdDiscovery.connect({ endpoints: 'http://127.0.0.1:1', connectTimeoutMs: 1000 }),
    );
    expect(r).toEqual({ code: 'cannot_connect', field: 'ETCD_ENDPOINTS' });
  });
});
