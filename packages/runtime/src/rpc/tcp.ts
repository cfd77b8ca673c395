/**
 * tcp request plane (§5.7): length-prefixed msgpack frames over persistent connections, many
 * concurrent streams per connection (by id), up to 50 pooled connections per peer.
 */
import { invalidArgument } from '@kvrouter/protocols';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { networkInterfaces } from 'node:os';
import type { KvrError } from '@kvrouter/protocols';
import { RpcCode, remoteError, rpcError } from '../errors.js';
import { PendingStream, checkSignal, failedStream, cancelledError, unaryOverStream } from './client-core.js';
import { ServerCore, type ActiveStream, type ServerCoreOptions, type Sink } from './server-core.js';
import {
  checkEndpoint,
  targetOf,
  type CloseOptions,
  type Handler,
  type RequestClient,
  type RequestServer,
  type StreamOptions,
  type Transport,
  type UnaryOptions,
} from './types.js';
import { FrameDecoder, TCP_MAX_FRAME, encodeFrame, parseMsg, type RpcMsg } from './wire.js';

/** Corks the socket for the rest of this tick so a burst of small frames leaves in one write. */
class FrameWriter {
  private corked = false;
  private drainWait: Promise<void> | null = null;
  constructor(private readonly socket: Socket) {}

  /** Returns a promise when the socket's buffer is full; callers that stream should await it. */
  write(frame: Uint8Array[]): Promise<void> | undefined {
    const s = this.socket;
    if (s.destroyed) return undefined;
    if (!this.corked) {
      this.corked = true;
      s.cork();
      process.nextTick(() => {
        this.corked = false;
        s.uncork();
      });
    }
    let ok = true;
    for (const part of frame) ok = s.write(part);
    if (ok) return undefined;
    return (this.drainWait ??= new Promise<void>((resolve) => {
      const done = (): void => {
        this.drainWait = null;
        s.off('drain', done);
        s.off('close', done);
        resolve();
      };
      s.on('drain', done);
      s.on('close', done);
    }));
  }
}

export function tcpPortFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.DYN_TCP_RPC_PORT;
  if (raw === undefined || raw === '') return 0;
  if (!/^[0-9]{1,5}$/.test(raw) || Number(raw) > 65535)
    throw invalidArgument('DYN_TCP_RPC_PORT', `must be a port number 0-65535, got "${raw}"`);
  return Number(raw);
}

function hostFromEnv(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return undefined;
  const v = raw.trim();
  if (
    !/^(\[[0-9A-Fa-f:.]+\]|[0-9A-Fa-f:.]+|[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*)$/.test(
      v,
    )
  )
    throw invalidArgument(name, `must be an IP address or a host name, got "${raw}"`);
  return v.startsWith('[') ? v.slice(1, -1) : v;
}

/**
 * The tcp request plane's addresses from the environment (issue 18): `DYN_TCP_RPC_HOST` is the
 * address published in discovery and, as in Dynamo, the bind address too; `KVR_TCP_RPC_BIND_HOST`
 * (a kvrouter addition) binds elsewhere, e.g. `0.0.0.0` behind a NAT whose address is published.
 */
function tcpHostsFromEnv(env: NodeJS.ProcessEnv = process.env): {
  bind: string | undefined;
  advertise: string | undefined;
} {
  const advertise = hostFromEnv(env, 'DYN_TCP_RPC_HOST');
  return { bind: hostFromEnv(env, 'KVR_TCP_RPC_BIND_HOST') ?? advertise, advertise };
}

/** The first non-internal IPv4 address, for advertising a wildcard listener. */
function localAddress(): string {
  for (const list of Object.values(networkInterfaces()))
    for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  return '127.0.0.1';
}

export interface TcpServerOptions extends ServerCoreOptions {
  /** Bind address; default `KVR_TCP_RPC_BIND_HOST`, else `DYN_TCP_RPC_HOST`, else `0.0.0.0`. */
  host?: string;
  /** Default `DYN_TCP_RPC_PORT`, else OS-assigned. */
  port?: number;
  /**
   * Host published in the transport; default `DYN_TCP_RPC_HOST`, else the bind host, or this
   * machine's first IPv4 for a wildcard.
   */
  advertiseHost?: string;
  /** Where the defaults above are read (default `process.env`). */
  env?: NodeJS.ProcessEnv;
  maxFrameBytes?: number;
}

export class TcpRequestServer implements RequestServer {
  private readonly core: ServerCore;
  private readonly conns = new Set<Socket>();
  readonly transport: { tcp: string };

  private constructor(
    private readonly server: Server,
    core: ServerCore,
    readonly port: number,
    host: string,
    private readonly maxFrame: number,
  ) {
    this.core = core;
    this.transport = { tcp: `${host.includes(':') ? `[${host}]` : host}:${port}` };
    server.on('connection', (s) => this.accept(s));
  }

  static async listen(opts: TcpServerOptions = {}): Promise<TcpRequestServer> {
    const env = tcpHostsFromEnv(opts.env);
    const host = opts.host ?? env.bind ?? '0.0.0.0';
    const port = opts.port ?? tcpPortFromEnv(opts.env);
    if (!Number.isInteger(port) || port < 0 || port > 65535)
      throw invalidArgument('port', `must be 0-65535, got ${port}`);
    const maxFrame = opts.maxFrameBytes ?? TCP_MAX_FRAME;
    if (!Number.isInteger(maxFrame) || maxFrame < 64)
      throw invalidArgument('maxFrameBytes', `must be an integer >= 64`);
    const core = new ServerCore(opts);
    const server = createServer({ noDelay: true });
    await new Promise<void>((resolve, reject) => {
      server.once('error', (e) =>
        reject(
          rpcError('listen_failed', `tcp request plane: cannot listen on ${host}:${port}: ${e.message}`, {
            field: 'port',
          }),
        ),
      );
      server.listen(port, host, () => resolve());
    });
    const addr = server.address();
    const bound = typeof addr === 'object' && addr ? addr.port : port;
    const wildcard = host === '0.0.0.0' || host === '::';
    const adv = opts.advertiseHost ?? env.advertise ?? (wildcard ? localAddress() : host);
    return new TcpRequestServer(server, core, bound, adv, maxFrame);
  }

  get activeStreams(): number {
    return this.core.activeStreams;
  }

  serve<P = unknown, I = unknown>(endpoint: string, handler: Handler<P, I>): void {
    this.core.serve(endpoint, handler as Handler);
  }

  unserve(endpoint: string): boolean {
    return this.core.unserve(endpoint);
  }

  private accept(socket: Socket): void {
    this.conns.add(socket);
    socket.setNoDelay(true);
    const w = new FrameWriter(socket);
    const streams = new Map<number, ActiveStream>();
    const max = this.maxFrame;
    const send = (m: RpcMsg): Promise<void> | undefined => w.write(encodeFrame(m, max, 'item'));
    const dec = new FrameDecoder(max, (body) => {
      const m = parseMsg(body, max);
      if (m.t === 'req') {
        const id = m.id;
        if (streams.has(id)) {
          void send({
            t: 'err',
            id,
            code: RpcCode.ProtocolError,
            message: `stream id ${id} is already in use`,
          });
          return;
        }
        const sink: Sink = {
          data: (item) => send({ t: 'data', id, payload: item }),
          end: () => {
            streams.delete(id);
            // Only data waits for drain; a stream's last frame needs no backpressure.
            void send({ t: 'end', id });
          },
          error: (e) => {
            streams.delete(id);
            void send({ t: 'err', id, code: e.code, message: e.message, status: e.status });
          },
        };
        const s = this.core.start(m.endpoint, m.payload, sink);
        if (s) streams.set(id, s);
      } else if (m.t === 'cancel') {
        const s = streams.get(m.id);
        streams.delete(m.id);
        s?.cancel();
      }
      // A caller never sends data/end/err/hb; ignore rather than drop its other streams.
    });
    socket.on('data', (chunk: Buffer) => {
      try {
        dec.push(chunk);
      } catch {
        // Oversize or malformed frame: the byte stream cannot be trusted any more.
        socket.destroy();
      }
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      this.conns.delete(socket);
      for (const s of streams.values()) s.cancel();
      streams.clear();
    });
  }

  async close(opts: CloseOptions = {}): Promise<void> {
    const closed = new Promise<void>((r) => this.server.close(() => r()));
    await this.core.shutdown(opts.graceMs ?? 0);
    // Let the engine_shutdown frames flush, then close; a peer that never reads is cut off.
    for (const s of this.conns) s.end();
    const deadline = setTimeout(() => {
      for (const s of this.conns) s.destroy();
    }, 1000);
    await closed;
    clearTimeout(deadline);
  }

  abort(): void {
    this.core.abortAll();
    this.server.close();
    for (const s of this.conns) s.destroy();
  }
}

export interface TcpClientOptions {
  maxFrameBytes?: number;
  /** Default 3000 ms (§5.7). */
  connectTimeoutMs?: number;
  /** A connection with no stream for this long is closed; default 60 000 ms. */
  idleTimeoutMs?: number;
  /** Default 50 (§5.7). */
  maxConnectionsPerPeer?: number;
  /** A new pooled connection opens only when every one carries this many streams; default 256. */
  streamsPerConnection?: number;
}

const CONNECT_CODES = new Set([
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EADDRNOTAVAIL',
]);

class TcpConn {
  readonly socket: Socket;
  readonly streams = new Map<number, PendingStream>();
  private readonly w: FrameWriter;
  private nextId = 1;
  private connected = false;
  private dead = false;
  private idle: ReturnType<typeof setTimeout> | null = null;
  private connectTimer: ReturnType<typeof setTimeout> | null;

  constructor(
    readonly peer: string,
    host: string,
    port: number,
    private readonly client: TcpRequestClient,
    private readonly o: Required<TcpClientOptions>,
  ) {
    this.socket = connect({ host, port, noDelay: true });
    this.w = new FrameWriter(this.socket);
    this.connectTimer = setTimeout(
      () =>
        this.die(
          rpcError(RpcCode.ConnectionTimeout, `tcp ${peer}: no connection within ${o.connectTimeoutMs} ms`),
        ),
      o.connectTimeoutMs,
    );
    this.socket.once('connect', () => {
      this.connected = true;
      if (this.connectTimer) clearTimeout(this.connectTimer);
      this.connectTimer = null;
    });
    const dec = new FrameDecoder(o.maxFrameBytes, (body) => this.onMsg(parseMsg(body, o.maxFrameBytes)));
    this.socket.on('data', (chunk: Buffer) => {
      try {
        dec.push(chunk);
      } catch (e) {
        this.die(e as KvrError);
      }
    });
    this.socket.on('error', (e: NodeJS.ErrnoException) => {
      if (!this.connected && CONNECT_CODES.has(e.code ?? ''))
        this.die(rpcError(RpcCode.CannotConnect, `tcp ${peer}: ${e.code}`, { peer }));
      else this.die(rpcError(RpcCode.Disconnected, `tcp ${peer}: ${e.message}`, { peer }));
    });
    this.socket.on('close', () =>
      this.die(
        this.connected
          ? rpcError(RpcCode.Disconnected, `tcp ${peer}: connection closed before the stream ended`, { peer })
          : rpcError(RpcCode.CannotConnect, `tcp ${peer}: connection closed while connecting`, { peer }),
      ),
    );
  }

  get isDead(): boolean {
    return this.dead;
  }

  private onMsg(m: RpcMsg): void {
    const p = this.streams.get(m.id);
    if (!p) return; // cancelled or finished on our side
    switch (m.t) {
      case 'data':
        p.data(m.payload, 0);
        break;
      case 'end':
        p.end();
        break;
      case 'err':
        p.fail(remoteError(m.code, m.message, m.status));
        break;
      default:
        break;
    }
  }

  open(endpoint: string, payload: unknown, signal: AbortSignal | undefined): PendingStream {
    let id = this.nextId;
    while (this.streams.has(id)) id = (id + 1) >>> 0 || 1;
    this.nextId = (id + 1) >>> 0 || 1;
    // Encode first: a payload over the limit throws before anything is registered or sent.
    const frame = encodeFrame({ t: 'req', id, endpoint, payload }, this.o.maxFrameBytes, 'payload');
    const p = new PendingStream(
      id,
      (x) => this.release(x),
      (x) => {
        if (!this.dead)
          void this.w.write(encodeFrame({ t: 'cancel', id: x.id }, this.o.maxFrameBytes, 'cancel'));
      },
      signal,
      0,
    );
    this.streams.set(id, p);
    if (this.idle) {
      clearTimeout(this.idle);
      this.idle = null;
    }
    // Writes before 'connect' are queued by the socket.
    void this.w.write(frame);
    return p;
  }

  private release(p: PendingStream): void {
    if (this.streams.get(p.id) !== p) return;
    this.streams.delete(p.id);
    if (this.streams.size === 0 && !this.dead) {
      this.idle = setTimeout(() => this.close(), this.o.idleTimeoutMs);
      this.idle.unref();
    }
  }

  private die(e: KvrError): void {
    if (this.dead) return;
    this.dead = true;
    if (this.connectTimer) clearTimeout(this.connectTimer);
    if (this.idle) clearTimeout(this.idle);
    this.client.forget(this);
    const ps = [...this.streams.values()];
    this.streams.clear();
    for (const p of ps) p.fail(e);
    this.socket.destroy();
  }

  close(): void {
    this.die(rpcError(RpcCode.Disconnected, `tcp ${this.peer}: client closed the connection`));
  }
}

function parseHostPort(addr: string): { host: string; port: number } {
  const i = addr.lastIndexOf(':');
  let host = i > 0 ? addr.slice(0, i) : '';
  const portStr = i > 0 ? addr.slice(i + 1) : '';
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  const port = Number(portStr);
  if (!host || !/^[0-9]{1,5}$/.test(portStr) || port < 1 || port > 65535)
    throw invalidArgument('target', `tcp address must be host:port, got "${addr}"`);
  return { host, port };
}

export class TcpRequestClient implements RequestClient {
  private readonly o: Required<TcpClientOptions>;
  private readonly pools = new Map<string, TcpConn[]>();
  private closed = false;

  constructor(opts: TcpClientOptions = {}) {
    this.o = {
      maxFrameBytes: opts.maxFrameBytes ?? TCP_MAX_FRAME,
      connectTimeoutMs: opts.connectTimeoutMs ?? 3000,
      idleTimeoutMs: opts.idleTimeoutMs ?? 60_000,
      maxConnectionsPerPeer: opts.maxConnectionsPerPeer ?? 50,
      streamsPerConnection: opts.streamsPerConnection ?? 256,
    };
    for (const [k, v] of Object.entries(this.o))
      if (!Number.isInteger(v) || v < 1) throw invalidArgument(k, `must be a positive integer, got ${v}`);
  }

  /** Open connections per peer (tests, metrics). */
  connectionCount(peer?: string): number {
    if (peer !== undefined) return this.pools.get(peer)?.length ?? 0;
    let n = 0;
    for (const p of this.pools.values()) n += p.length;
    return n;
  }

  /** @internal */
  forget(c: TcpConn): void {
    const pool = this.pools.get(c.peer);
    if (!pool) return;
    const i = pool.indexOf(c);
    if (i >= 0) pool.splice(i, 1);
    if (pool.length === 0) this.pools.delete(c.peer);
  }

  /** The least-loaded connection, or a new one when all carry a full share and the pool has room. */
  private pick(peer: string): { conn: TcpConn; fresh: boolean } {
    let pool = this.pools.get(peer);
    if (!pool) this.pools.set(peer, (pool = []));
    let best: TcpConn | null = null;
    for (const c of pool) if (!best || c.streams.size < best.streams.size) best = c;
    if (
      best &&
      (best.streams.size < this.o.streamsPerConnection || pool.length >= this.o.maxConnectionsPerPeer)
    )
      return { conn: best, fresh: false };
    const { host, port } = parseHostPort(peer);
    const c = new TcpConn(peer, host, port, this, this.o);
    pool.push(c);
    return { conn: c, fresh: true };
  }

  stream<T = unknown>(
    target: Transport,
    endpoint: string,
    payload: unknown,
    opts: StreamOptions = {},
  ): AsyncIterableIterator<T> {
    const peer = targetOf(target, 'tcp');
    parseHostPort(peer);
    checkEndpoint(endpoint);
    const signal = checkSignal(opts.signal);
    if (this.closed) return failedStream(rpcError(RpcCode.CannotConnect, 'tcp client is closed'));
    if (signal?.aborted) return failedStream(cancelledError());
    const { conn, fresh } = this.pick(peer);
    try {
      return conn.open(endpoint, payload, signal).ch as AsyncIterableIterator<T>;
    } catch (e) {
      // A rejected payload must not leave a fresh, unused connection behind.
      if (fresh) conn.close();
      throw e;
    }
  }

  unary<T = unknown>(target: Transport, endpoint: string, payload: unknown, opts?: UnaryOptions): Promise<T> {
    return unaryOverStream<T>(this, target, endpoint, payload, opts);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const pool of [...this.pools.values()]) for (const c of [...pool]) c.close();
    this.pools.clear();
  }
}
