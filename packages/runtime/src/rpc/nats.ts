/**
 * nats request plane (§5.7): a request goes to the server's subject with a per-stream reply subject
 * `{inbox}.{id}`, on which the same maps stream back. What a socket gives tcp for free is rebuilt:
 * - unknown target: the NATS server's no-responders status (503) on the reply subject -> `cannot_connect`;
 * - server death: a quiet stream gets `{t:"hb"}` every `heartbeatMs`; a client that hears nothing for
 *   `livenessMs` fails it (`connection_timeout` if nothing ever came, else `disconnected`);
 * - client death: every server message carries a reply subject of the server's own, so a gone
 *   client inbox comes back as a 503 and the stream is stopped;
 * - messages above the server's max_payload (1 MiB by default) travel in fragments (header
 *   `Kvr-Frag: i/n`), up to 16 MiB per message.
 */
import { invalidArgument } from '@kvrouter/protocols';
import { createInbox, headers, type Msg, type Subscription } from '@nats-io/transport-node';
import type { KvrError } from '@kvrouter/protocols';
import type { NatsConnection } from '../nats-connection.js';
import { RpcCode, remoteError, rpcError } from '../errors.js';
import { PendingStream, cancelledError, checkSignal, failedStream, unaryOverStream } from './client-core.js';
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
import { NATS_MAX_MESSAGE, encodeOwned, parseMsg, type RpcMsg } from './wire.js';

const FRAG = 'Kvr-Frag';
/** Room left in each NATS message for headers and protocol overhead. */
const HEADROOM = 1024;

function checkSubject(s: string, field: string): string {
  if (s.length === 0 || /[\s*>]/.test(s) || s.split('.').some((t) => t.length === 0))
    throw invalidArgument(field, `not a NATS subject without wildcards: "${s}"`);
  return s;
}

function chunkSize(nc: NatsConnection): number {
  return Math.max(4096, (nc.info?.max_payload ?? 1024 * 1024) - HEADROOM);
}

/** Publishes one encoded message, split into fragments when it exceeds the server's max_payload. */
function publishBytes(
  nc: NatsConnection,
  subject: string,
  bytes: Uint8Array,
  reply: string | undefined,
): void {
  const chunk = chunkSize(nc);
  if (bytes.length <= chunk) {
    nc.publish(subject, bytes, reply === undefined ? undefined : { reply });
    return;
  }
  const n = Math.ceil(bytes.length / chunk);
  for (let i = 0; i < n; i++) {
    const h = headers();
    h.set(FRAG, `${i}/${n}`);
    nc.publish(subject, bytes.subarray(i * chunk, Math.min(bytes.length, (i + 1) * chunk)), {
      headers: h,
      ...(reply === undefined ? {} : { reply }),
    });
  }
}

function send(
  nc: NatsConnection,
  subject: string,
  m: RpcMsg,
  max: number,
  what: string,
  reply?: string,
): void {
  // nats.js may hold the buffer until its next flush, so it must not be the encoder's shared one.
  publishBytes(nc, subject, encodeOwned(m, max, what), reply);
}

/**
 * Reassembles fragments per key (the stream's reply subject). Fragments of one message come from
 * one publisher in order, and a publisher never interleaves two messages of the same stream.
 */
class Reassembler {
  private readonly parts = new Map<string, { bufs: Uint8Array[]; n: number; size: number }>();
  constructor(private readonly max: number) {}

  /** The whole message, or null while incomplete; throws `payload_too_large` / `protocol_error`. */
  add(key: string, msg: Msg): Uint8Array | null {
    const tag = msg.headers?.get(FRAG);
    if (!tag) return msg.data;
    const m = /^(\d+)\/(\d+)$/.exec(tag);
    const i = m ? Number(m[1]) : -1;
    const n = m ? Number(m[2]) : -1;
    let e = this.parts.get(key);
    if (
      !m ||
      n < 2 ||
      i >= n ||
      (i === 0) === (e !== undefined) ||
      (e && (e.n !== n || e.bufs.length !== i))
    ) {
      this.parts.delete(key);
      throw rpcError(RpcCode.ProtocolError, `fragment ${tag} out of sequence`);
    }
    if (!e) {
      if ((n - 1) * msg.data.length > this.max)
        throw rpcError(
          RpcCode.PayloadTooLarge,
          `message of ${n} fragments exceeds the limit of ${this.max} bytes`,
        );
      this.parts.set(key, (e = { bufs: [], n, size: 0 }));
    }
    e.bufs.push(msg.data);
    e.size += msg.data.length;
    if (e.size > this.max) {
      this.parts.delete(key);
      throw rpcError(RpcCode.PayloadTooLarge, `message exceeds the limit of ${this.max} bytes`);
    }
    if (e.bufs.length < n) return null;
    this.parts.delete(key);
    const out = new Uint8Array(e.size);
    let off = 0;
    for (const b of e.bufs) {
      out.set(b, off);
      off += b.length;
    }
    return out;
  }

  drop(key: string): void {
    this.parts.delete(key);
  }
}

/** Stops at the first `disconnect` or `close` of the shared connection. */
function onConnectionLoss(nc: NatsConnection, cb: () => void): { stop(): void } {
  const it = nc.status() as AsyncIterable<{ type: string }> & { stop?: () => void };
  void (async () => {
    for await (const s of it) if (s.type === 'disconnect' || s.type === 'close') cb();
  })().catch(() => undefined);
  void nc.closed().then(cb, cb);
  return { stop: () => it.stop?.() };
}

export interface NatsServerOptions extends ServerCoreOptions {
  /** The subject this server listens on, published as `{nats_tcp: subject}`. */
  subject: string;
  /** Keep-alive period on a stream that sent nothing for this long; default 1000 ms. */
  heartbeatMs?: number;
  maxMessageBytes?: number;
}

interface NatsServerStream {
  sid: number;
  reply: string;
  active: ActiveStream | null;
  lastSent: number;
}

export class NatsRequestServer implements RequestServer {
  readonly transport: { nats_tcp: string };
  private readonly core: ServerCore;
  private readonly byReply = new Map<string, NatsServerStream>();
  private readonly bySid = new Map<number, NatsServerStream>();
  private readonly frags: Reassembler;
  private readonly statusInbox = createInbox();
  private nextSid = 1;
  private reqSub: Subscription | null = null;
  private statusSub: Subscription | null = null;
  private readonly hbTimer: ReturnType<typeof setInterval>;
  private readonly loss: { stop(): void };
  private readonly max: number;

  private constructor(
    private readonly nc: NatsConnection,
    readonly subject: string,
    opts: NatsServerOptions,
  ) {
    this.core = new ServerCore(opts);
    this.transport = { nats_tcp: subject };
    this.max = opts.maxMessageBytes ?? NATS_MAX_MESSAGE;
    this.frags = new Reassembler(this.max);
    const hb = opts.heartbeatMs ?? 1000;
    if (!Number.isInteger(hb) || hb < 10)
      throw invalidArgument('heartbeatMs', `must be an integer >= 10, got ${hb}`);
    this.hbTimer = setInterval(() => this.heartbeat(hb), hb);
    this.hbTimer.unref();
    this.reqSub = nc.subscribe(subject, { callback: (_err, msg) => this.onRequest(msg) });
    this.statusSub = nc.subscribe(`${this.statusInbox}.*`, { callback: (_err, msg) => this.onStatus(msg) });
    // Callers on the other side of a dropped connection have already failed their streams.
    this.loss = onConnectionLoss(nc, () => this.dropAll());
  }

  /** Subscribes and waits until the NATS server has registered the subscription. */
  static async start(nc: NatsConnection, opts: NatsServerOptions): Promise<NatsRequestServer> {
    checkSubject(opts.subject, 'subject');
    const s = new NatsRequestServer(nc, opts.subject, opts);
    await nc.flush();
    return s;
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

  private emit(st: NatsServerStream, m: RpcMsg): void {
    st.lastSent = Date.now();
    send(this.nc, st.reply, m, this.max, 'item', `${this.statusInbox}.${st.sid}`);
  }

  private finish(st: NatsServerStream): void {
    this.byReply.delete(st.reply);
    this.bySid.delete(st.sid);
  }

  private onRequest(msg: Msg): void {
    const reply = msg.reply;
    if (!reply) return; // nowhere to answer
    let m: RpcMsg;
    try {
      const bytes = this.frags.add(reply, msg);
      if (!bytes) return;
      m = parseMsg(bytes, this.max);
    } catch (e) {
      const err = e as KvrError;
      if (!this.byReply.has(reply))
        send(
          this.nc,
          reply,
          { t: 'err', id: idOf(reply), code: err.code, message: err.message, status: err.status },
          this.max,
          'err',
        );
      return;
    }
    if (m.t === 'cancel') {
      const st = this.byReply.get(reply);
      if (st) {
        this.finish(st);
        st.active?.cancel();
      }
      return;
    }
    if (m.t !== 'req') return;
    if (this.byReply.has(reply)) {
      send(
        this.nc,
        reply,
        { t: 'err', id: m.id, code: RpcCode.ProtocolError, message: 'reply subject already in use' },
        this.max,
        'err',
      );
      return;
    }
    const id = m.id;
    const st: NatsServerStream = { sid: this.nextSid++, reply, active: null, lastSent: Date.now() };
    this.byReply.set(reply, st);
    this.bySid.set(st.sid, st);
    const sink: Sink = {
      data: (item) => this.emit(st, { t: 'data', id, payload: item }),
      end: () => {
        this.finish(st);
        this.emit(st, { t: 'end', id });
      },
      error: (e) => {
        this.finish(st);
        this.emit(st, { t: 'err', id, code: e.code, message: e.message, status: e.status });
      },
    };
    st.active = this.core.start(m.endpoint, m.payload, sink);
  }

  /** A 503 for one of our messages: that stream's caller is gone. */
  private onStatus(msg: Msg): void {
    if (msg.headers?.code !== 503) return;
    const sid = Number(msg.subject.slice(this.statusInbox.length + 1));
    const st = this.bySid.get(sid);
    if (!st) return;
    this.finish(st);
    st.active?.cancel();
  }

  private heartbeat(hbMs: number): void {
    const now = Date.now();
    for (const st of this.byReply.values())
      if (now - st.lastSent >= hbMs) this.emit(st, { t: 'hb', id: idOf(st.reply) });
  }

  private dropAll(): void {
    for (const st of [...this.byReply.values()]) {
      this.finish(st);
      st.active?.cancel();
    }
  }

  private stop(): void {
    clearInterval(this.hbTimer);
    this.loss.stop();
    this.reqSub?.unsubscribe();
    this.statusSub?.unsubscribe();
    this.reqSub = this.statusSub = null;
  }

  async close(opts: CloseOptions = {}): Promise<void> {
    // Cancels still arrive on the request subject during the grace period, so it stays subscribed.
    await this.core.shutdown(opts.graceMs ?? 0);
    this.stop();
    if (!this.nc.isClosed()) await this.nc.flush().catch(() => undefined);
  }

  abort(): void {
    this.stop();
    this.core.abortAll();
    this.byReply.clear();
    this.bySid.clear();
  }
}

/** The stream id is the last token of the reply subject `{inbox}.{id}`. */
function idOf(reply: string): number {
  const n = Number(reply.slice(reply.lastIndexOf('.') + 1));
  return Number.isInteger(n) && n >= 0 && n <= 0xffffffff ? n : 0;
}

export interface NatsClientOptions {
  /** A stream that hears nothing (item or heartbeat) for this long fails; default 5000 ms. Must exceed the servers' heartbeatMs. */
  livenessMs?: number;
  maxMessageBytes?: number;
}

export class NatsRequestClient implements RequestClient {
  private readonly inbox = createInbox();
  private readonly streams = new Map<number, { p: PendingStream; subject: string }>();
  private readonly frags: Reassembler;
  private readonly sub: Subscription;
  private readonly sweepTimer: ReturnType<typeof setInterval>;
  private readonly loss: { stop(): void };
  private readonly livenessMs: number;
  private readonly max: number;
  private nextId = 1;
  private closed = false;

  constructor(
    private readonly nc: NatsConnection,
    opts: NatsClientOptions = {},
  ) {
    this.livenessMs = opts.livenessMs ?? 5000;
    if (!Number.isInteger(this.livenessMs) || this.livenessMs < 20)
      throw invalidArgument('livenessMs', `must be an integer >= 20, got ${this.livenessMs}`);
    this.max = opts.maxMessageBytes ?? NATS_MAX_MESSAGE;
    this.frags = new Reassembler(this.max);
    this.sub = nc.subscribe(`${this.inbox}.*`, { callback: (_err, msg) => this.onMsg(msg) });
    this.sweepTimer = setInterval(() => this.sweep(), Math.max(10, Math.floor(this.livenessMs / 4)));
    this.sweepTimer.unref();
    this.loss = onConnectionLoss(nc, () =>
      this.failAll(rpcError(RpcCode.Disconnected, 'nats: connection to the NATS server dropped')),
    );
  }

  get openStreams(): number {
    return this.streams.size;
  }

  private onMsg(msg: Msg): void {
    const id = Number(msg.subject.slice(this.inbox.length + 1));
    const e = this.streams.get(id);
    if (!e) return;
    const p = e.p;
    if (msg.headers?.code === 503) {
      p.fail(
        rpcError(RpcCode.CannotConnect, `nats: no server listens on ${e.subject}`, { subject: e.subject }),
      );
      return;
    }
    let m: RpcMsg;
    try {
      const bytes = this.frags.add(msg.subject, msg);
      if (!bytes) {
        p.touch(Date.now());
        return;
      }
      m = parseMsg(bytes, this.max);
    } catch (err) {
      this.sendCancel(e.subject, id);
      p.fail(err as KvrError);
      return;
    }
    switch (m.t) {
      case 'data':
        p.data(m.payload, Date.now());
        break;
      case 'hb':
        p.touch(Date.now());
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

  private sendCancel(subject: string, id: number): void {
    if (this.nc.isClosed()) return;
    send(this.nc, subject, { t: 'cancel', id }, this.max, 'cancel', `${this.inbox}.${id}`);
  }

  private sweep(): void {
    const now = Date.now();
    for (const [id, e] of [...this.streams]) {
      const p = e.p;
      if (now - p.lastHeard <= this.livenessMs) continue;
      // Tell a server that is merely slow to stop, then fail the stream.
      this.sendCancel(e.subject, id);
      p.fail(
        p.heard
          ? rpcError(
              RpcCode.Disconnected,
              `nats: ${e.subject} went silent for ${now - p.lastHeard} ms mid-stream`,
            )
          : rpcError(
              RpcCode.ConnectionTimeout,
              `nats: ${e.subject} did not answer within ${this.livenessMs} ms`,
            ),
      );
    }
  }

  private failAll(err: KvrError): void {
    for (const e of [...this.streams.values()]) e.p.fail(err);
  }

  stream<T = unknown>(
    target: Transport,
    endpoint: string,
    payload: unknown,
    opts: StreamOptions = {},
  ): AsyncIterableIterator<T> {
    const subject = checkSubject(targetOf(target, 'nats_tcp'), 'target');
    checkEndpoint(endpoint);
    const signal = checkSignal(opts.signal);
    if (this.closed || this.nc.isClosed())
      return failedStream(rpcError(RpcCode.CannotConnect, 'nats: client or connection is closed'));
    if (signal?.aborted) return failedStream(cancelledError());
    let id = this.nextId;
    while (this.streams.has(id)) id = (id + 1) >>> 0 || 1;
    this.nextId = (id + 1) >>> 0 || 1;
    const bytes = encodeOwned({ t: 'req', id, endpoint, payload }, this.max, 'payload');
    const p = new PendingStream(
      id,
      (x) => {
        if (this.streams.get(x.id)?.p === x) this.streams.delete(x.id);
        this.frags.drop(`${this.inbox}.${x.id}`);
      },
      (x) => this.sendCancel(subject, x.id),
      signal,
      Date.now(),
    );
    this.streams.set(id, { p, subject });
    publishBytes(this.nc, subject, bytes, `${this.inbox}.${id}`);
    if (bytes.length > chunkSize(this.nc)) {
      // A fragmented upload can take longer than the liveness window; the clock starts once the
      // NATS server has it all (flush = its PONG after our last fragment).
      p.lastHeard = Number.POSITIVE_INFINITY;
      this.nc.flush().then(
        () => {
          if (p.lastHeard === Number.POSITIVE_INFINITY) p.lastHeard = Date.now();
        },
        () => undefined,
      );
    }
    return p.ch as AsyncIterableIterator<T>;
  }

  unary<T = unknown>(target: Transport, endpoint: string, payload: unknown, opts?: UnaryOptions): Promise<T> {
    return unaryOverStream<T>(this, target, endpoint, payload, opts);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const [id, e] of [...this.streams]) {
      this.sendCancel(e.subject, id);
      e.p.fail(rpcError(RpcCode.Disconnected, 'nats: client closed'));
    }
    clearInterval(this.sweepTimer);
    this.loss.stop();
    this.sub.unsubscribe();
    if (!this.nc.isClosed()) await this.nc.flush().catch(() => undefined);
  }
}
