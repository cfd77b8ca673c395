/**
 * A lost etcd lease is re-acquired under the same id and every key put again (issue 18), against a
 * real etcd: the lease is revoked behind the process's back through etcd's JSON gateway (what
 * etcd does itself when a paused process misses its TTL), another "process" watches the keys go
 * and come back, and `/health`'s probe reports the gap while it lasts and the gap after it ended.
 * The file backend does the same for a process stalled past its TTL.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startEtcd, type ServiceHandle } from '@kvrouter/testkit';
import { probeHealth, type HealthReport } from '../health.js';
import { EtcdDiscovery, FileDiscovery, type LeaseStatus, type WatchEvent } from './index.js';

let etcd: ServiceHandle;
beforeAll(async () => {
  etcd = await startEtcd();
}, 30_000);
afterAll(async () => {
  await etcd?.stop();
});

const gateway = async (path: string, body: unknown): Promise<Record<string, unknown>> => {
  const r = await fetch(`${etcd.url}${path}`, { method: 'POST', body: JSON.stringify(body) });
  return (await r.json()) as Record<string, unknown>;
};
const b64 = (s: string): string => Buffer.from(s).toString('base64');

it('re-grants a revoked lease under the same id, puts every key again, and /health shows the gap', async () => {
  const d = await EtcdDiscovery.connect({ endpoints: etcd.url, ttlSec: 3 });
  const other = await EtcdDiscovery.connect({ endpoints: etcd.url });
  try {
    await d.put('v1/test/a', 'A');
    await d.put('v1/test/b', 'B');
    await d.put('v1/test/c', 'C');
    await d.delete('v1/test/c'); // deleted by its owner: must not come back
    const seen: WatchEvent[] = [];
    const w = other.watch('v1/test/');
    void (async () => {
      for await (const ev of w) seen.push(ev);
    })();
    // The watch's initial listing first: listed after the revocation and the puts again, it would
    // see the two keys once and no delete (seen on a loaded machine).
    await expect.poll(() => seen.some((e) => e.type === 'synced'), { timeout: 10_000 }).toBe(true);

    let during: Promise<HealthReport> | null = null;
    const lostErrors: string[] = [];
    d.onLeaseLost((e) => {
      lostErrors.push(e.code);
      // Synchronously at the loss: the gap is open.
      during = probeHealth({ discovery: d });
    });
    const restored = new Promise<LeaseStatus>((r) => d.onLeaseRestored(r));

    const id = d.leaseId.toString();
    expect(await gateway('/v3/lease/revoke', { ID: id })).not.toHaveProperty('error');
    const st = await restored;

    expect(lostErrors).toEqual(['lease_lost']);
    const h = await during!;
    expect(h.healthy).toBe(false);
    expect(h.checks.lease).toMatch(/^discovery lease lost \d+ ms ago .*re-registering$/);
    expect(h.lease?.state).toBe('lost');

    expect(st.state).toBe('held');
    expect(st.reacquired).toBe(1);
    expect(st.lastGap?.keys).toBe(2);
    expect(st.lastGap!.restoredAt).toBeGreaterThanOrEqual(st.lastGap!.lostAt);

    // Same lease id, and it holds exactly the two live keys again.
    const ttl = await gateway('/v3/lease/timetolive', { ID: id, keys: true });
    expect(Number(ttl.TTL)).toBeGreaterThan(0);
    expect([...((ttl.keys as string[]) ?? [])].sort()).toEqual([b64('v1/test/a'), b64('v1/test/b')]);
    expect(await other.get('v1/test/a')).toBe('A');
    expect(await other.get('v1/test/c')).toBeNull();

    // The watcher saw both keys deleted by the revocation, then put again.
    await expect.poll(() => seen.filter((e) => e.type === 'put').length).toBe(4);
    const keys = (t: string) => seen.flatMap((e) => (e.type === t && 'key' in e ? [e.key] : []));
    expect(keys('delete').sort()).toEqual(['v1/test/a', 'v1/test/b']);

    const after = await probeHealth({ discovery: d });
    expect(after.healthy).toBe(true);
    expect(after.checks.lease).toBe('ok');
    expect(after.lease?.reacquired).toBe(1);

    // Puts after the gap go under the re-acquired lease (revoking it removes them too).
    await d.put('v1/test/d', 'D');
    await d.close();
    expect(await other.get('v1/test/a')).toBeNull();
    expect(await other.get('v1/test/d')).toBeNull();
    w.close();
  } finally {
    await d.close();
    await other.close();
  }
}, 30_000);

it('file discovery: a process stalled past its TTL writes its keys again (same id), reporting the gap', async () => {
  const root = mkdtempSync(join(tmpdir(), 'kvr-lease-'));
  const d = await FileDiscovery.open({ root, ttlSec: 1, pollMs: 50 });
  const other = await FileDiscovery.open({ root, ttlSec: 1, pollMs: 50 });
  try {
    await d.put('v1/test/a', 'A');
    const lost: string[] = [];
    d.onLeaseLost((e) => lost.push(e.code));
    const restored = new Promise<LeaseStatus>((r) => d.onLeaseRestored(r));
    // Stall the event loop past the 1 s TTL, as a paused process would be.
    const until = Date.now() + 1600;
    while (Date.now() < until);
    const st = await restored;
    expect(lost).toEqual(['lease_lost']);
    expect(st.reacquired).toBe(1);
    expect(st.lastGap?.keys).toBe(1);
    expect(await other.get('v1/test/a')).toBe('A');
    expect(d.leaseStatus().state).toBe('held');
  } finally {
    await d.close();
    await other.close();
    rmSync(root, { recursive: true, force: true });
  }
});
