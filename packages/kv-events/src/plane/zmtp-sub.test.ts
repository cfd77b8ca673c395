/**
 * The JavaScript SUB socket against real libzmq publishers (zeromq.js `Publisher`, `XPublisher`):
 * whole multipart messages, frames over 255 bytes (long form), prefix subscriptions made before and
 * after the connection, reconnection when a publisher comes back on its port, disconnect; and
 * against a raw TCP peer that breaks the protocol (bad greeting, another mechanism, a frame over the
 * bound, bytes split one by one): reported, dropped, retried, never delivered half.
 */
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Publisher } from 'zeromq';
import { ZmtpSubscriber, zmtpAddress } from './zmtp-sub.js';

const closers: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

async function publisher(port = 0): Promise<{ pub: Publisher; endpoint: string; port: number }> {
  const pub = new Publisher({ linger: 0 });
  await pub.bind(`tcp://127.0.0.1:${port}`);
  closers.push(() => pub.close());
  const endpoint = pub.lastEndpoint!;
  return { pub, endpoint, port: Number(endpoint.split(':').pop()) };
}

/** Messages as strings; the joining pings (`topic.ping`, some may land late) left out. */
function subscriber(o: { maxMessageBytes?: number } = {}) {
  const got: string[][] = [];
  const errors: string[] = [];
  let pinged = 0;
  const sub = new ZmtpSubscriber({
    onMessage: (frames) => {
      const m = frames.map((f) => f.toString('latin1'));
      if (m[0] === 'topic.ping') pinged++;
      else got.push(m);
    },
    onError: (e) => errors.push(e.message),
    reconnectMs: 20,
    ...o,
  });
  closers.push(() => sub.close());
  return { sub, got, errors, pinged: () => pinged };
}

const until = async (cond: () => boolean, ms = 5000): Promise<void> => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 5));
  }
};

/** Pings until the subscriber has seen one (PUB drops what it sends before the subscription lands). */
async function joined(pub: Publisher, pinged: () => number): Promise<void> {
  const before = pinged();
  for (let i = 0; i < 250 && pinged() === before; i++) {
    await pub.send(['topic.ping', 'x']);
    await new Promise((r) => setTimeout(r, 20));
  }
  if (pinged() === before) throw new Error('never joined');
}

describe('ZmtpSubscriber with libzmq publishers', () => {
  it('delivers whole multipart messages, short, long and multi-read frames, only the subscribed prefixes', async () => {
    const { pub, endpoint } = await publisher();
    const { sub, got, errors, pinged } = subscriber();
    sub.subscribe('topic.');
    sub.connect(endpoint);
    await joined(pub, pinged);
    const long = 'L'.repeat(70_000); // > 255 bytes: the 8-byte size form
    await pub.send(['topic.a', 'one']);
    await pub.send(['other.b', 'not subscribed']);
    await pub.send(['topic.c', long, '']);
    await pub.send(['topic.d', Buffer.alloc(255, 0x41), Buffer.alloc(256, 0x42)]);
    // 3 MiB: many reads, joined once.
    await pub.send(['topic.e', Buffer.alloc(3 << 20, 0x43)]);
    await until(() => got.length === 4);
    expect(got[0]).toEqual(['topic.a', 'one']);
    expect(got[1]).toEqual(['topic.c', long, '']);
    expect(got[2]).toEqual(['topic.d', 'A'.repeat(255), 'B'.repeat(256)]);
    expect(got[3]![0]).toBe('topic.e');
    expect(got[3]![1]).toBe('C'.repeat(3 << 20));
    expect(errors).toEqual([]);
  });

  it('a subscription made after the connection reaches the publisher; disconnect stops delivery', async () => {
    const { pub, endpoint } = await publisher();
    const { sub, got, pinged } = subscriber();
    sub.subscribe('topic.');
    sub.connect(endpoint);
    await joined(pub, pinged);
    sub.subscribe('later.');
    for (let i = 0; i < 250 && !got.some((m) => m[0] === 'later.x'); i++) {
      await pub.send(['later.x', '1']);
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(got.some((m) => m[0] === 'later.x')).toBe(true);
    sub.disconnect(endpoint);
    await new Promise((r) => setTimeout(r, 100));
    got.length = 0;
    for (let i = 0; i < 20; i++) await pub.send(['topic.after', String(i)]);
    await new Promise((r) => setTimeout(r, 200));
    expect(got).toEqual([]);
  });

  it('reconnects when the publisher comes back on the same port', async () => {
    const first = await publisher();
    const { sub, got, pinged } = subscriber();
    sub.subscribe('topic.');
    sub.connect(first.endpoint);
    await joined(first.pub, pinged);
    first.pub.close();
    await new Promise((r) => setTimeout(r, 100));
    const again = await publisher(first.port);
    await joined(again.pub, pinged);
    await again.pub.send(['topic.back', 'yes']);
    await until(() => got.length === 1);
    expect(got[0]).toEqual(['topic.back', 'yes']);
  });
});

describe('ZmtpSubscriber with a peer that breaks the protocol', () => {
  /** A raw TCP server that answers each connection with `bytes` (after reading the greeting). */
  async function rawPeer(bytes: Buffer, split = false): Promise<{ endpoint: string; conns: () => number }> {
    let conns = 0;
    const srv = net.createServer((s) => {
      conns++;
      s.on('error', () => undefined);
      s.once('data', () => {
        if (!split) s.write(bytes);
        else {
          // One byte per event-loop turn, so the subscriber reads them one by one.
          let i = 0;
          const next = () => {
            if (i === bytes.length || s.destroyed) return;
            s.write(bytes.subarray(i, ++i));
            setImmediate(next);
          };
          next();
        }
      });
    });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    closers.push(() => new Promise((r) => srv.close(r)));
    return { endpoint: `tcp://127.0.0.1:${(srv.address() as net.AddressInfo).port}`, conns: () => conns };
  }

  const greeting = (mechanism = 'NULL') => {
    const g = Buffer.alloc(64);
    g[0] = 0xff;
    g[9] = 0x7f;
    g[10] = 3;
    g.write(mechanism, 12, 'ascii');
    return g;
  };
  /** READY (Socket-Type PUB), then a two-frame message "t" + "hello". */
  const ready = Buffer.from([
    4,
    25,
    5,
    ...Buffer.from('READY'),
    11,
    ...Buffer.from('Socket-Type'),
    0,
    0,
    0,
    3,
    ...Buffer.from('PUB'),
  ]);
  const message = Buffer.from([1, 1, 0x74, 0, 5, ...Buffer.from('hello')]);

  it('bytes arriving one at a time still make one whole message', async () => {
    const peer = await rawPeer(Buffer.concat([greeting(), ready, message]), true);
    const { sub, got, errors } = subscriber();
    sub.connect(peer.endpoint);
    await until(() => got.length === 1);
    expect(got).toEqual([['t', 'hello']]);
    expect(errors).toEqual([]);
  });

  it('a bad greeting, another mechanism or a frame over the bound: reported once, dropped, retried, nothing delivered', async () => {
    const bad = [
      { bytes: Buffer.alloc(64, 0x20), why: 'bad greeting' },
      { bytes: greeting('CURVE'), why: 'other than NULL' },
      // A long frame announcing 2^40 bytes, over the 1 MiB bound.
      {
        bytes: Buffer.concat([greeting(), ready, Buffer.from([2, 0, 0, 1, 0, 0, 0, 0, 0])]),
        why: 'over 1048576',
      },
    ];
    for (const b of bad) {
      const peer = await rawPeer(b.bytes);
      const { sub, got, errors } = subscriber({ maxMessageBytes: 1 << 20 });
      sub.connect(peer.endpoint);
      await until(() => peer.conns() >= 3);
      // Retried every 20 ms, reported once.
      expect(errors).toHaveLength(1);
      expect(errors[0]).toContain(b.why);
      expect(got).toEqual([]);
      sub.close();
    }
  });

  it('endpoints: tcp (IPv4, IPv6, names) and ipc; anything else is reported and ignored', () => {
    expect(zmtpAddress('tcp://127.0.0.1:5555')).toEqual({ host: '127.0.0.1', port: 5555 });
    expect(zmtpAddress('tcp://[::1]:7')).toEqual({ host: '::1', port: 7 });
    expect(zmtpAddress('tcp://engine-0.svc:5557')).toEqual({ host: 'engine-0.svc', port: 5557 });
    expect(zmtpAddress('ipc:///tmp/kv.sock')).toEqual({ path: '/tmp/kv.sock' });
    const { sub, errors } = subscriber();
    for (const ep of ['tcp://h:0', 'tcp://h:70000', 'tcp://*:5555', 'inproc://x', 'h:5555']) sub.connect(ep);
    expect(errors).toHaveLength(5);
    expect(errors.every((e) => e.includes('endpoint'))).toBe(true);
  });
});
