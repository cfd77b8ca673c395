/**
 * The direct path's body reader leaves nothing on the request once the body is read: its listeners
 * held the body's buffers and (through the promise's reject) the decoded text for as long as the
 * request lived, i.e. for a whole streamed response (README invariant "a streamed response holds
 * token ids, not text").
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { abortOnClose, readUtf8Body } from './util.js';

const EVENTS = ['data', 'end', 'error', 'close'] as const;
type Counts = Record<(typeof EVENTS)[number], number>;
const counts = (req: http.IncomingMessage): Counts =>
  Object.fromEntries(EVENTS.map((e) => [e, req.listenerCount(e)])) as Counts;

let server: http.Server;
let url = '';
let seen: { before: Counts; after: Counts; text: unknown }[] = [];

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const before = counts(req);
    void readUtf8Body(req, 1 << 20, 1).then((text) => {
      // Read while the response is still open (as a stream would be).
      seen.push({ before, after: counts(req), text });
      res.end('ok');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

function post(body: Buffer | string, chunks = 1): Promise<number> {
  return new Promise((resolve, reject) => {
    const buf = Buffer.from(body);
    const req = http.request(url, { method: 'POST', headers: { 'content-length': buf.length } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    // Several writes: the body arrives in several `data` events.
    const step = Math.ceil(buf.length / chunks);
    for (let i = 0; i < buf.length; i += step) req.write(buf.subarray(i, i + step));
    req.end();
  });
}

describe('readUtf8Body', () => {
  it('returns the text and leaves the listener counts as it found them (one chunk)', async () => {
    seen = [];
    const body = JSON.stringify({ messages: [{ role: 'user', content: 'grüße, 世界 🙂' }] });
    expect(await post(body)).toBe(200);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.text).toBe(body);
    expect(seen[0]!.after).toEqual(seen[0]!.before);
  });

  it('does the same for a body in many chunks, a multi-byte character split between two', async () => {
    seen = [];
    // 'é' is 2 bytes: with 3-byte chunks some of them end in the middle of one.
    const body = `{"content":"${'é'.repeat(5000)}"}`;
    expect(await post(body, Math.ceil(Buffer.byteLength(body) / 3))).toBe(200);
    expect(seen[0]!.text).toBe(body);
    expect(seen[0]!.after).toEqual(seen[0]!.before);
  });
});

describe('abortOnClose', () => {
  it('is aborted at once for a client that went away before the handler ran (body-thread gap)', async () => {
    const got = new Promise<{ late: boolean; done: boolean }>((resolve) => {
      const srv = http.createServer((req, res) => {
        req.resume();
        // The handler runs only after the client has gone (as after a body thread's parse).
        res.once('close', () => {
          const late = abortOnClose(res).signal.aborted;
          srv.close();
          resolve({ late, done: res.writableFinished });
        });
      });
      srv.listen(0, '127.0.0.1', () => {
        const port = (srv.address() as AddressInfo).port;
        const c = http.request({ port, host: '127.0.0.1', method: 'POST' });
        c.on('error', () => undefined);
        c.end('{"a":1}', () => setTimeout(() => c.destroy(), 20));
      });
    });
    expect(await got).toEqual({ late: true, done: false });
  });

  it('is not aborted for a response that finished', async () => {
    const got = new Promise<boolean>((resolve) => {
      const srv = http.createServer((req, res) => {
        req.resume();
        res.end('ok', () => {
          const ac = abortOnClose(res);
          setTimeout(() => {
            srv.close();
            resolve(ac.signal.aborted);
          }, 50);
        });
      });
      srv.listen(0, '127.0.0.1', () => {
        const port = (srv.address() as AddressInfo).port;
        http.get({ port, host: '127.0.0.1', agent: false }, (r) => r.resume());
      });
    });
    expect(await got).toBe(false);
  });
});
