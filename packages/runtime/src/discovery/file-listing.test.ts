/**
 * File discovery's directory listings (file.ts `scan`): a directory whose mtime has not moved for
 * longer than the trust window is not listed again, yet every put, replace and delete by another
 * process is still seen within a few polls, and a key whose owner stopped touching it still
 * expires. The in-place edit below (not how keys are written) is what shows the listing is reused.
 */
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FileDiscovery } from './file.js';
import type { DiscoveryWatch, WatchEvent } from './types.js';

/** The watch's events pulled one at a time; a pull still waiting when `drain` times out is kept for the next. */
const pending = new WeakMap<DiscoveryWatch, Promise<IteratorResult<WatchEvent>>>();

/** Events of `w` that arrive within `ms`. */
async function drain(w: DiscoveryWatch, ms: number): Promise<WatchEvent[]> {
  const out: WatchEvent[] = [];
  const deadline = Date.now() + ms;
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) return out;
    let p = pending.get(w);
    if (p === undefined) {
      p = w.next();
      pending.set(w, p);
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    const r = await Promise.race([
      p,
      new Promise<'timeout'>((res) => {
        timer = setTimeout(() => res('timeout'), left);
      }),
    ]);
    clearTimeout(timer);
    if (r === 'timeout') return out;
    pending.delete(w);
    if (r.done) throw new Error('watch ended');
    out.push(r.value);
  }
}

let root = '';
const opened: FileDiscovery[] = [];
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'kvr-filelist-'));
});
afterEach(async () => {
  for (const d of opened.splice(0)) await d.close();
  rmSync(root, { recursive: true, force: true });
});
const open = async (ttlSec = 60): Promise<FileDiscovery> => {
  const d = await FileDiscovery.open({ root, ttlSec, pollMs: 50 });
  opened.push(d);
  return d;
};

describe('file discovery: listings reused while the directory is unchanged', () => {
  it('a stable directory is not listed again, and every put, replace and delete is still seen', async () => {
    const writer = await open();
    const reader = await open();
    await writer.put('v1/t/a', 'A1');
    // Make the directory's last change older than the 2 s trust window.
    const old = new Date(Date.now() - 5000);
    utimesSync(join(root, 'v1/t'), old, old);
    const w = reader.watch('v1/t/');
    const first = await drain(w, 400);
    expect(first).toEqual([{ type: 'put', key: 'v1/t/a', value: 'A1' }, { type: 'synced' }]);
    // An in-place edit moves neither the directory's mtime nor goes through a rename: a reused
    // listing does not see it (a listing made on every poll would: the file's mtime and size change).
    writeFileSync(join(root, 'v1/t/a.kv'), 'A1-edited in place');
    expect(await drain(w, 500)).toEqual([]);
    // What writers do (a temporary file renamed into place) moves the directory: seen.
    await writer.put('v1/t/a', 'A2');
    await writer.put('v1/t/b', 'B1');
    const next = await drain(w, 800);
    expect(next).toContainEqual({ type: 'put', key: 'v1/t/a', value: 'A2' });
    expect(next).toContainEqual({ type: 'put', key: 'v1/t/b', value: 'B1' });
    await writer.delete('v1/t/b');
    expect(await drain(w, 800)).toEqual([{ type: 'delete', key: 'v1/t/b' }]);
    w.close();
  });

  it('a key nobody touches expires while its directory stays unchanged; a touched one does not', async () => {
    const reader = await open(2);
    // Two keys written as a writer would, then left alone: `a` is kept fresh by hand, `b` is not.
    const dir = join(root, 'v1/x');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'a.kv'), 'A');
    writeFileSync(join(dir, 'b.kv'), 'B');
    const old = new Date(Date.now() - 5000);
    utimesSync(dir, old, old);
    const w = reader.watch('v1/x/');
    const first = await drain(w, 400);
    expect(first).toContainEqual({ type: 'put', key: 'v1/x/a', value: 'A' });
    expect(first).toContainEqual({ type: 'put', key: 'v1/x/b', value: 'B' });
    // TTL 2 s: touch `a` every 500 ms for 3 s; `b` expires, `a` stays.
    const seen: WatchEvent[] = [];
    for (let i = 0; i < 6; i++) {
      const now = new Date();
      utimesSync(join(dir, 'a.kv'), now, now);
      utimesSync(dir, old, old);
      seen.push(...(await drain(w, 500)));
    }
    expect(seen).toEqual([{ type: 'delete', key: 'v1/x/b' }]);
    w.close();
  });
});
