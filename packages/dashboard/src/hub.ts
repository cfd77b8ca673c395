/**
 * The HTTP side: `GET /dashboard` (the page), `GET /dashboard/events` (SSE: one snapshot per tick)
 * and `GET /dashboard/snapshot.json`. One timer runs only while a page is connected; each tick
 * builds one snapshot and writes the same bytes to every viewer. A slow viewer (its socket buffer
 * over `maxBufferedBytes`) skips ticks instead of growing memory.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { KvrError } from '@kvrouter/protocols';
import { DecisionTap } from './decisions.js';
import { PAGE_HTML } from './page.js';
import { SnapshotBuilder, type SnapshotOptions } from './snapshot.js';
import type { DashboardSnapshot, DashboardSource } from './types.js';

/** `--dashboard`: `auto` serves loopback clients only, `on` every client, `off` nobody. */
export const DASHBOARD_MODES = ['auto', 'on', 'off'] as const;
export type DashboardMode = (typeof DASHBOARD_MODES)[number];

export const DASHBOARD_PATH = '/dashboard';

export interface DashboardHubOptions extends SnapshotOptions {
  source: DashboardSource;
  mode: DashboardMode;
  /** Tap for the "last decisions" table (default: a new one; wire it with `decisionLogWithTap`). */
  tap?: DecisionTap;
  /** Bytes a viewer may have queued before ticks are skipped for it (default 1 MiB). */
  maxBufferedBytes?: number;
  onError?: (err: unknown) => void;
}

/** True for 127.0.0.0/8, ::1 and their IPv4-mapped forms. */
export function isLoopback(addr: string | undefined): boolean {
  if (!addr) return false;
  const a = addr.startsWith('::ffff:') ? addr.slice(7) : addr;
  return a === '::1' || a.startsWith('127.');
}

const PATHS = new Set([
  DASHBOARD_PATH,
  `${DASHBOARD_PATH}/`,
  `${DASHBOARD_PATH}/events`,
  `${DASHBOARD_PATH}/snapshot.json`,
]);

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(JSON.stringify(body));
}

export class DashboardHub {
  readonly tap: DecisionTap;
  private readonly builder: SnapshotBuilder;
  private readonly viewers = new Set<ServerResponse>();
  private timer: NodeJS.Timeout | null = null;
  private readonly intervalMs: number;
  private readonly maxBuffered: number;
  private ticking = false;
  private lastTickMs: number | null = null;
  private closed = false;
  /** Ticks run and bytes written (diagnostics, tests). */
  readonly stats = { ticks: 0, bytes: 0, skipped: 0 };

  constructor(private readonly o: DashboardHubOptions) {
    if (!(DASHBOARD_MODES as readonly string[]).includes(o.mode))
      throw new KvrError(
        'invalid_argument',
        `--dashboard must be one of ${DASHBOARD_MODES.join(', ')}, got ${String(o.mode)}`,
        400,
        { field: 'dashboard' },
      );
    this.tap = o.tap ?? new DecisionTap();
    this.intervalMs = o.intervalMs ?? 1000;
    this.maxBuffered = o.maxBufferedBytes ?? 1 << 20;
    this.builder = new SnapshotBuilder(o.source, this.tap, o);
  }

  get viewerCount(): number {
    return this.viewers.size;
  }

  snapshot(): Promise<DashboardSnapshot> {
    return this.builder.build();
  }

  /**
   * Serves the request when it is one of the dashboard's (true), else leaves it alone (false).
   * With `mode` off nothing is served: the app answers 404 as for any unknown path.
   */
  handle(req: IncomingMessage, res: ServerResponse): boolean {
    if (this.o.mode === 'off' || req.method !== 'GET') return false;
    const url = req.url ?? '';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    if (!PATHS.has(path)) return false;
    if (this.o.mode === 'auto' && !isLoopback(req.socket.remoteAddress)) {
      sendJson(res, 403, {
        error: {
          message:
            'the dashboard is served to loopback clients only (--dashboard auto); start with --dashboard on (KVR_DASHBOARD=on) to serve it on every interface',
          type: 'permission_denied',
          code: 'dashboard_loopback_only',
        },
      });
      return true;
    }
    if (path === `${DASHBOARD_PATH}/events`) this.addViewer(req, res);
    else if (path === `${DASHBOARD_PATH}/snapshot.json`)
      this.snapshot().then(
        (s) => sendJson(res, 200, s),
        (e: unknown) =>
          sendJson(res, 500, {
            error: { message: (e as Error).message, type: 'internal', code: 'internal' },
          }),
      );
    else {
      res.writeHead(200, {
        'content-type': 'text/html; charset=utf-8',
        'cache-control': 'no-store',
        // Everything the page needs is inline: nothing may load from elsewhere.
        'content-security-policy':
          "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:",
      });
      res.end(PAGE_HTML);
    }
    return true;
  }

  /** Express / connect style: `app.use(hub.middleware)`. */
  readonly middleware = (req: IncomingMessage, res: ServerResponse, next: () => void): void => {
    if (!this.handle(req, res)) next();
  };

  private addViewer(req: IncomingMessage, res: ServerResponse): void {
    if (this.closed)
      return void sendJson(res, 503, {
        error: { message: 'shutting down', type: 'unavailable', code: 'closing' },
      });
    res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    res.write(`retry: ${this.intervalMs * 2}\n\n`);
    this.viewers.add(res);
    this.tap.active = true;
    const gone = () => {
      this.viewers.delete(res);
      if (this.viewers.size === 0) this.stop();
    };
    req.on('close', gone);
    res.on('close', gone);
    if (!this.timer) {
      this.timer = setInterval(() => void this.tick(), this.intervalMs);
      this.timer.unref();
    }
    void this.tick();
  }

  private stop(): void {
    this.tap.active = false;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Builds one snapshot and writes it to every viewer (a tick still running makes this one a no-op). */
  private async tick(): Promise<void> {
    if (this.ticking || this.viewers.size === 0) return;
    this.ticking = true;
    const t0 = performance.now();
    try {
      const s = await this.builder.build();
      s.tick_ms = this.lastTickMs;
      const frame = `data: ${JSON.stringify(s)}\n\n`;
      this.stats.ticks++;
      for (const v of this.viewers) {
        if (v.writableLength > this.maxBuffered) {
          this.stats.skipped++;
          continue;
        }
        v.write(frame);
        this.stats.bytes += frame.length;
      }
      this.lastTickMs = performance.now() - t0;
    } catch (e) {
      this.o.onError?.(e);
    } finally {
      this.ticking = false;
    }
  }

  close(): void {
    this.closed = true;
    this.stop();
    for (const v of this.viewers) v.end();
    this.viewers.clear();
  }
}
