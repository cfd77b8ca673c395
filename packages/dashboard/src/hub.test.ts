import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { DashboardHub, isLoopback } from './hub.js';
import type { DashboardSource } from './types.js';

const source: DashboardSource = { app: 'router', sets: () => [], registry: null };

let closers: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of closers.reverse()) await c();
  closers = [];
});

async function serve(hub: DashboardHub, host = '127.0.0.1'): Promise<string> {
  const srv = http.createServer((req, res) => {
    if (!hub.handle(req, res)) {
      res.writeHead(404);
      res.end('not found');
    }
  });
  await new Promise<void>((r) => srv.listen(0, host, r));
  closers.push(
    () => new Promise((r) => srv.close(r)),
    () => hub.close(),
  );
  closers.push(() => srv.closeAllConnections());
  return `http://${host}:${(srv.address() as AddressInfo).port}`;
}

describe('isLoopback', () => {
  it('accepts 127/8, ::1 and mapped forms only', () => {
    expect(['127.0.0.1', '127.3.2.1', '::1', '::ffff:127.0.0.1'].map(isLoopback)).toEqual([
      true,
      true,
      true,
      true,
    ]);
    expect(['10.0.0.1', '::ffff:10.0.0.1', '', undefined, '::'].map(isLoopback)).toEqual([
      false,
      false,
      false,
      false,
      false,
    ]);
  });
});

describe('DashboardHub', () => {
  it('serves the page, a snapshot and an SSE stream; the timer stops with the last viewer', async () => {
    const hub = new DashboardHub({ source, mode: 'auto', intervalMs: 50 });
    const url = await serve(hub);
    const page = await fetch(`${url}/dashboard`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const html = await page.text();
    expect(html).toContain('/dashboard/events');
    expect(html).not.toMatch(/<script[^>]+src=|<link[^>]+href=/); // nothing loaded from elsewhere
    const snap = (await (await fetch(`${url}/dashboard/snapshot.json`)).json()) as {
      app: string;
      models: unknown[];
    };
    expect(snap.app).toBe('router');
    expect(snap.models).toEqual([]);

    const ac = new AbortController();
    const r = await fetch(`${url}/dashboard/events`, { signal: ac.signal });
    expect(r.headers.get('content-type')).toBe('text/event-stream');
    const reader = r.body!.getReader();
    let text = '';
    while ((text.match(/^data: /gm) ?? []).length < 2)
      text += new TextDecoder().decode(((await reader.read()) as { value?: Uint8Array }).value);
    expect(hub.viewerCount).toBe(1);
    expect(hub.tap.active).toBe(true);
    const frames = text
      .split('\n')
      .filter((l) => l.startsWith('data: '))
      .map((l) => JSON.parse(l.slice(6)) as { app: string; tick_ms: number | null });
    expect(frames[0].app).toBe('router');
    // Each frame carries the previous tick's cost; the first has none.
    expect(frames[0].tick_ms).toBeNull();
    expect(frames[1].tick_ms).toBeGreaterThanOrEqual(0);
    ac.abort();
    while (hub.viewerCount > 0) await new Promise((res) => setTimeout(res, 5));
    expect(hub.tap.active).toBe(false);
    expect((await fetch(`${url}/other`)).status).toBe(404);
  });

  it('auto refuses other clients with 403 naming the flag', () => {
    const hub = new DashboardHub({ source, mode: 'auto' });
    let status = 0;
    let body = '';
    const res = {
      writeHead: (s: number) => void (status = s),
      end: (b: string) => void (body = b),
    } as unknown as http.ServerResponse;
    const req = {
      method: 'GET',
      url: '/dashboard',
      socket: { remoteAddress: '10.1.2.3' },
    } as http.IncomingMessage;
    expect(hub.handle(req, res)).toBe(true);
    expect(status).toBe(403);
    expect(body).toContain('--dashboard on');
    const on = new DashboardHub({ source, mode: 'on' });
    let onStatus = 0;
    const res2 = {
      writeHead: (s: number) => void (onStatus = s),
      end: () => undefined,
    } as unknown as http.ServerResponse;
    expect(on.handle(req, res2)).toBe(true);
    expect(onStatus).toBe(200);
  });

  it('off serves nothing; a bad mode names the flag', async () => {
    const hub = new DashboardHub({ source, mode: 'off' });
    const url = await serve(hub);
    expect((await fetch(`${url}/dashboard`)).status).toBe(404);
    expect(() => new DashboardHub({ source, mode: 'yes' as 'on' })).toThrow(
      '--dashboard must be one of auto, on, off, got yes',
    );
  });
});
