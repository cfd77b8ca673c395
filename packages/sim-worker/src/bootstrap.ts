/**
 * The bootstrap rendezvous of disaggregated serving (PROTOCOL §14 "bootstrap variant", §17
 * `--bootstrap-ports`): a prefill worker listens on its bootstrap port; a decode worker that got a
 * request with `disagg.bootstrap_room` connects there and waits until the prefill of that room has
 * finished its KV transfer, then decodes. So the frontend can dispatch decode at once while prefill
 * runs in the background.
 *
 * Wire (one connection per wait, newline-delimited JSON): client → `{"room": "..."}`; server →
 * `{"ok": true, "transfer_ms": n}` or `{"ok": false, "error": "..."}` once the room is done (at once
 * if it already is), then closes. A finished room is remembered for `retainMs` so a late decode
 * still finds it.
 */
import net from 'node:net';
import { createInterface } from 'node:readline';
import { KvrError } from '@kvrouter/protocols';

export type RoomResult = { ok: true; transfer_ms: number } | { ok: false; error: string };

interface Room {
  result: RoomResult | null;
  waiters: net.Socket[];
  timer: ReturnType<typeof setTimeout> | null;
}

export class BootstrapServer {
  private readonly rooms = new Map<string, Room>();
  private readonly sockets = new Set<net.Socket>();

  private constructor(
    private readonly server: net.Server,
    /** Advertised in `disaggregated_endpoint` and the transfer parameters. */
    readonly host: string,
    readonly port: number,
    private readonly retainMs: number,
  ) {}

  /** Port 0 = OS-assigned (read `port` afterwards). */
  static async listen(
    o: { host?: string; port?: number; advertiseHost?: string; retainMs?: number } = {},
  ): Promise<BootstrapServer> {
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', (e) =>
        reject(new KvrError('bootstrap_listen_failed', `bootstrap port ${o.port ?? 0}: ${e.message}`, 500)),
      );
      server.listen(o.port ?? 0, o.host ?? '0.0.0.0', () => resolve());
    });
    const port = (server.address() as net.AddressInfo).port;
    const b = new BootstrapServer(server, o.advertiseHost ?? '127.0.0.1', port, o.retainMs ?? 60_000);
    server.on('connection', (s) => b.accept(s));
    return b;
  }

  private room(id: string): Room {
    let r = this.rooms.get(id);
    if (!r) this.rooms.set(id, (r = { result: null, waiters: [], timer: null }));
    return r;
  }

  private accept(s: net.Socket): void {
    this.sockets.add(s);
    s.on('close', () => this.sockets.delete(s));
    s.on('error', () => s.destroy());
    const rl = createInterface({ input: s });
    // readline re-emits the socket's errors; the socket handler above already deals with them.
    rl.on('error', () => undefined);
    rl.once('line', (line) => {
      let id: unknown;
      try {
        id = (JSON.parse(line) as { room?: unknown }).room;
      } catch {
        id = undefined;
      }
      if (typeof id !== 'string' || id.length === 0) {
        s.end(`${JSON.stringify({ ok: false, error: 'bootstrap: expected {"room": string}' })}\n`);
        return;
      }
      const r = this.room(id);
      if (r.result) s.end(`${JSON.stringify(r.result)}\n`);
      else {
        r.waiters.push(s);
        // A waiter whose prefill never comes is closed with the room's expiry (see `complete`) or by its own timeout.
        s.on('close', () => {
          const i = r.waiters.indexOf(s);
          if (i >= 0) r.waiters.splice(i, 1);
          if (!r.result && r.waiters.length === 0) this.rooms.delete(id);
        });
      }
    });
  }

  /** The prefill of `room` is done (KV transferred) or failed: answer its waiters, remember it a while. */
  complete(room: string, result: RoomResult): void {
    const r = this.room(room);
    if (r.result) return;
    r.result = result;
    const line = `${JSON.stringify(result)}\n`;
    for (const s of r.waiters.splice(0)) s.end(line);
    r.timer = setTimeout(() => this.rooms.delete(room), this.retainMs);
    r.timer.unref();
  }

  /** Rooms known (waiting or finished), for tests. */
  get size(): number {
    return this.rooms.size;
  }

  async close(): Promise<void> {
    for (const r of this.rooms.values()) if (r.timer) clearTimeout(r.timer);
    this.rooms.clear();
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/**
 * Decode side: waits at `host:port` until the prefill of `room` is done. Rejects with
 * `prefill_failed` (502) when the prefill failed, `cannot_connect` / `disconnected` (503) on
 * transport problems, `bootstrap_timeout` (504) after `timeoutMs`; an abort rejects with `cancelled`.
 */
export function waitForPrefillPeer(o: {
  host: string;
  port: number;
  room: string;
  signal?: AbortSignal;
  timeoutMs?: number;
}): Promise<RoomResult & { ok: true }> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: o.host, port: o.port });
    let done = false;
    const finish = (e: KvrError | null, r?: RoomResult & { ok: true }): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      o.signal?.removeEventListener('abort', onAbort);
      s.destroy();
      if (e) reject(e);
      else resolve(r!);
    };
    const onAbort = (): void =>
      finish(new KvrError('cancelled', 'request cancelled while waiting for the prefill peer', 499));
    if (o.signal?.aborted) return onAbort();
    o.signal?.addEventListener('abort', onAbort, { once: true });
    const timer = setTimeout(
      () =>
        finish(
          new KvrError(
            'bootstrap_timeout',
            `prefill peer ${o.host}:${o.port} did not finish room ${o.room} within ${o.timeoutMs ?? 30_000} ms`,
            504,
          ),
        ),
      o.timeoutMs ?? 30_000,
    );
    s.once('connect', () => s.write(`${JSON.stringify({ room: o.room })}\n`));
    s.on('error', (e) =>
      finish(new KvrError('cannot_connect', `bootstrap ${o.host}:${o.port}: ${e.message}`, 503)),
    );
    s.once('close', () =>
      finish(new KvrError('disconnected', `bootstrap ${o.host}:${o.port} closed before answering`, 502)),
    );
    const rl = createInterface({ input: s });
    rl.on('error', () => undefined);
    rl.once('line', (line) => {
      let r: RoomResult;
      try {
        r = JSON.parse(line) as RoomResult;
      } catch {
        return finish(new KvrError('protocol_error', `bootstrap ${o.host}:${o.port}: malformed answer`, 502));
      }
      if (r.ok) finish(null, r);
      else finish(new KvrError('prefill_failed', `prefill peer failed room ${o.room}: ${r.error}`, 502));
    });
  });
}
