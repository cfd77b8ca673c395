/**
 * A ZMQ SUB socket in JavaScript, for the event plane's subscribers: ZMTP 3.0 with the NULL
 * mechanism (RFC 23/ZMTP) over `net.Socket`, speaking to libzmq's PUB and XPUB sockets (engines,
 * brokers, other kvrouter processes).
 *
 * Why not zeromq.js's `Subscriber`: a KV event is one small message, a few per routed request, and
 * zeromq.js pays for each one on two threads: ~55–65 µs on the event loop (`receive`: a promise, the
 * socket's state read through libzmq's mailbox, a poller round) and as much again on libzmq's I/O
 * thread (half of it kernel time), ~0.2 ms per chat request in all. Here a TCP read is parsed where
 * it lands: every complete message in it is handed to `onMessage` synchronously, frames as views of
 * the read buffer (valid during the call).
 *
 * Semantics kept from a libzmq SUB socket: `connect` keeps reconnecting (every `reconnectMs`) until
 * `disconnect`; subscriptions (prefix match, applied by the publisher) are sent on every connection,
 * the ones made before it and after; a message is delivered whole (all its frames) or not at all. A
 * peer that breaks the protocol (a bad greeting, a mechanism other than NULL, a frame or message
 * over `maxMessageBytes`) is reported through `onError` (once, until a message arrives again) and
 * reconnected to. There is no receive
 * high-water mark: messages are handed over as they are parsed, and the consumer's queue is bounded
 * on its own (`EnvelopeQueue`).
 */
import net from 'node:net';
import { invalidArgument } from '@kvrouter/protocols';

export interface ZmtpSubscriberOptions {
  /** One whole message: its frames, views of the read buffer valid during the call. */
  onMessage(frames: Buffer[]): void;
  /** A connection dropped for a protocol error (it is retried). */
  onError?(e: Error): void;
  /** Pause before a connection is tried again (default 100 ms, libzmq's `ZMQ_RECONNECT_IVL`). */
  reconnectMs?: number;
  /** Largest message accepted, all frames (default 64 MiB). */
  maxMessageBytes?: number;
}

const GREETING_BYTES = 64;
const FLAG_MORE = 1;
const FLAG_LONG = 2;
const FLAG_COMMAND = 4;

/** Our greeting: signature, version 3.0, mechanism NULL, not the server. */
const GREETING = (() => {
  const g = Buffer.alloc(GREETING_BYTES);
  g[0] = 0xff;
  g[9] = 0x7f;
  g[10] = 3;
  g[11] = 0;
  g.write('NULL', 12, 'ascii');
  return g;
})();

/** A command frame: name, then metadata properties (name, 4-byte length, value). */
function command(name: string, props: Record<string, string>): Buffer {
  const parts: Buffer[] = [Buffer.from([name.length]), Buffer.from(name, 'ascii')];
  for (const [k, v] of Object.entries(props)) {
    const value = Buffer.from(v, 'utf8');
    const len = Buffer.alloc(4);
    len.writeUInt32BE(value.length, 0);
    parts.push(Buffer.from([k.length]), Buffer.from(k, 'ascii'), len, value);
  }
  const body = Buffer.concat(parts);
  return Buffer.concat([Buffer.from([FLAG_COMMAND, body.length]), body]);
}

const READY = command('READY', { 'Socket-Type': 'SUB' });

/** A subscription message (ZMTP 3.0): 0x01 then the topic prefix, as one message frame. */
function subscription(topic: Buffer): Buffer {
  const n = topic.length + 1;
  const head = n < 256 ? Buffer.from([0, n]) : Buffer.alloc(9);
  if (n >= 256) {
    head[0] = FLAG_LONG;
    head.writeBigUInt64BE(BigInt(n), 1);
  }
  return Buffer.concat([head, Buffer.from([1]), topic]);
}

/** `tcp://host:port` (IPv6 in brackets) or `ipc://path` → what `net.connect` takes. */
export function zmtpAddress(endpoint: string): net.NetConnectOpts {
  const tcp = /^tcp:\/\/(?:\[([^\]]+)\]|([^:/]+)):(\d{1,5})$/.exec(endpoint);
  if (tcp) {
    const port = Number(tcp[3]);
    const host = tcp[1] ?? tcp[2]!;
    // `*` binds every interface; it is not an address to connect to.
    if (port >= 1 && port <= 65535 && host !== '*') return { host, port };
  }
  if (endpoint.startsWith('ipc://') && endpoint.length > 6) return { path: endpoint.slice(6) };
  throw invalidArgument(
    'endpoint',
    `expected tcp://host:port or ipc://path, got ${JSON.stringify(endpoint)}`,
  );
}

class Peer {
  private socket: net.Socket | null = null;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private closed = false;
  /** 0: waiting for the peer's greeting; 1: for its READY; 2: messages. */
  private stage = 0;
  /** Bytes of an incomplete greeting or frame, and how many it takes to go on (no copy until then). */
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private need = 0;
  private frames: Buffer[] = [];
  private messageBytes = 0;
  /** A protocol error was reported and no message has arrived since. */
  private failing = false;

  constructor(
    private readonly owner: ZmtpSubscriber,
    private readonly address: net.NetConnectOpts,
    private readonly endpoint: string,
  ) {}

  open(): void {
    this.timer = null;
    if (this.closed) return;
    this.stage = 0;
    this.pending = [];
    this.pendingBytes = 0;
    this.need = 0;
    this.frames = [];
    this.messageBytes = 0;
    const s = net.connect(this.address);
    this.socket = s;
    s.setNoDelay(true);
    s.on('connect', () => s.write(GREETING));
    s.on('data', (d: Buffer) => this.read(s, d));
    s.on('error', () => undefined); // followed by 'close'
    s.on('close', () => {
      if (this.socket === s) this.socket = null;
      if (!this.closed && this.timer === null)
        this.timer = setTimeout(() => this.open(), this.owner.reconnectMs);
    });
  }

  /** Sends a subscription now if the handshake is done (else it goes with the others when it is). */
  sendSubscription(topic: Buffer): void {
    if (this.stage === 2) this.socket?.write(subscription(topic));
  }

  close(): void {
    this.closed = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.socket?.destroy();
    this.socket = null;
  }

  /** Reported once until a message arrives again (a broken peer is retried every `reconnectMs`). */
  private fail(s: net.Socket, why: string): void {
    if (!this.failing) this.owner.report(new Error(`zmq: ${this.endpoint}: ${why}`));
    this.failing = true;
    s.destroy();
  }

  private read(s: net.Socket, d: Buffer): void {
    if (s !== this.socket) return;
    let buf = d;
    if (this.pending.length > 0) {
      // A large frame arrives over many reads: joined once, when it is all there.
      this.pending.push(d);
      this.pendingBytes += d.length;
      if (this.pendingBytes < this.need) return;
      buf = Buffer.concat(this.pending, this.pendingBytes);
      this.pending = [];
      this.pendingBytes = 0;
    }
    let o = 0;
    const end = buf.length;
    if (this.stage === 0) {
      if (end < GREETING_BYTES) return this.wait(buf, GREETING_BYTES);
      if (buf[0] !== 0xff || buf[9] !== 0x7f || buf[10]! < 3)
        return this.fail(s, 'not a ZMTP 3 peer (bad greeting)');
      if (buf.toString('ascii', 12, 32).replace(/\0+$/, '') !== 'NULL')
        return this.fail(s, 'security mechanism other than NULL');
      o = GREETING_BYTES;
      this.stage = 1;
      s.write(READY);
    }
    const max = this.owner.maxMessageBytes;
    while (end - o >= 2) {
      const flags = buf[o]!;
      let size: number;
      let head: number;
      if ((flags & FLAG_LONG) !== 0) {
        if (end - o < 9) break;
        const big = buf.readBigUInt64BE(o + 1);
        if (big > BigInt(max)) return this.fail(s, `frame of ${big} bytes is over ${max}`);
        size = Number(big);
        head = 9;
      } else {
        size = buf[o + 1]!;
        head = 2;
      }
      if (end - o < head + size) return this.wait(buf.subarray(o), head + size);
      const body = buf.subarray(o + head, o + head + size);
      o += head + size;
      if ((flags & FLAG_COMMAND) !== 0) {
        if (this.stage === 1) {
          const name = body.toString('ascii', 1, 1 + body[0]!);
          if (name !== 'READY') return this.fail(s, `handshake: expected READY, got ${name}`);
          this.stage = 2;
          for (const t of this.owner.topics) s.write(subscription(t));
        }
        // Later commands (none in ZMTP 3.0 with NULL) are skipped.
        continue;
      }
      if (this.stage !== 2) return this.fail(s, 'message before the handshake ended');
      this.messageBytes += size;
      if (this.messageBytes > max) return this.fail(s, `message over ${max} bytes`);
      this.frames.push(body);
      if ((flags & FLAG_MORE) === 0) {
        const frames = this.frames;
        this.frames = [];
        this.messageBytes = 0;
        this.failing = false;
        this.owner.deliver(frames);
      }
    }
    // A partial frame header waits for the next read (Node gives every read a buffer of its own, so
    // the views of a message still open stay as they are).
    if (o < end) this.wait(buf.subarray(o), (buf[o]! & FLAG_LONG) !== 0 ? 9 : 2);
  }

  /** Keeps `rest` (the start of a greeting or frame) until `need` bytes of it have arrived. */
  private wait(rest: Buffer, need: number): void {
    this.pending = [rest];
    this.pendingBytes = rest.length;
    this.need = need;
  }
}

export class ZmtpSubscriber {
  readonly reconnectMs: number;
  readonly maxMessageBytes: number;
  /** Subscribed topic prefixes (sent on every connection). */
  readonly topics: Buffer[] = [];
  private readonly peers = new Map<string, Peer>();
  private closed = false;

  constructor(private readonly o: ZmtpSubscriberOptions) {
    this.reconnectMs = o.reconnectMs ?? 100;
    this.maxMessageBytes = o.maxMessageBytes ?? 64 * 1024 * 1024;
  }

  subscribe(topic: string): void {
    const t = Buffer.from(topic, 'utf8');
    this.topics.push(t);
    for (const p of this.peers.values()) p.sendSubscription(t);
  }

  /**
   * Connects (and keeps reconnecting) to a publisher; a second connect of an endpoint is a no-op.
   * An endpoint that is not `tcp://host:port` or `ipc://path` (discovery is remote input) is
   * reported through `onError` and ignored.
   */
  connect(endpoint: string): void {
    if (this.closed || this.peers.has(endpoint)) return;
    let address: net.NetConnectOpts;
    try {
      address = zmtpAddress(endpoint);
    } catch (e) {
      this.report(e as Error);
      return;
    }
    const p = new Peer(this, address, endpoint);
    this.peers.set(endpoint, p);
    p.open();
  }

  disconnect(endpoint: string): void {
    const p = this.peers.get(endpoint);
    if (p === undefined) return;
    this.peers.delete(endpoint);
    p.close();
  }

  close(): void {
    this.closed = true;
    for (const p of this.peers.values()) p.close();
    this.peers.clear();
  }

  /** @internal */
  deliver(frames: Buffer[]): void {
    if (this.closed) return;
    try {
      this.o.onMessage(frames);
    } catch (e) {
      this.report(e instanceof Error ? e : new Error(String(e)));
    }
  }

  /** @internal */
  report(e: Error): void {
    this.o.onError?.(e);
  }
}
