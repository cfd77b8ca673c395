/**
 * The direct path's body reader leaves nothing on the request once the body is read: its listeners
 * held the body's buffers and (through the promise's reject) the decoded text for as long as the
 * request lived, i.e. for a whole streamed response (README invariant "a streamed response holds
 * token ids, not text").
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KvrError } from '@kvrouter/protocols';
import { BodyBytes, BYTES_PARSE_MIN, CACHED_BYTES_PARSE_MIN } from './body-thread.js';
import { StringCache } from './json-bytes.js';
import { abortOnClose, parseBody, readUtf8Body } from './util.js';

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

describe('readUtf8Body: bodies of 64 KiB and more come as their bytes, parsed by parseBody', () => {
  it('gives the value of the decoded text for a body in many chunks (a character split between two)', async () => {
    seen = [];
    const content = 'grüße, 世界 🙂 '.repeat(4000);
    const body = `\ufeff${JSON.stringify({ messages: [{ role: 'user', content }] }).slice(0, -1)},"nvext":{"backend_instance_id":18446744073709551615}}`;
    expect(Buffer.byteLength(body)).toBeGreaterThan(BYTES_PARSE_MIN);
    // 7-byte chunks: many end inside a 3- or 4-byte character.
    expect(await post(body, Math.ceil(Buffer.byteLength(body) / 7))).toBe(200);
    const got = seen[0]!.text;
    expect(got).toBeInstanceOf(BodyBytes);
    expect(seen[0]!.after).toEqual(seen[0]!.before);
    expect(parseBody(got)).toEqual({
      messages: [{ role: 'user', content }],
      nvext: { backend_instance_id: 18446744073709551615n },
    });
  });

  it('answers a malformed large body with the 400 invalid_json of the inline parser, naming body', async () => {
    seen = [];
    const body = `{"model": "m", "messages": [${' '.repeat(BYTES_PARSE_MIN)}}`;
    expect(await post(body, 3)).toBe(200);
    let err: unknown;
    try {
      parseBody(seen[0]!.text);
    } catch (e) {
      err = e;
    }
    let want: unknown;
    try {
      parseBody(body);
    } catch (e) {
      want = e;
    }
    expect(err).toBeInstanceOf(KvrError);
    const k = err as KvrError;
    expect([k.code, k.status, k.detail?.field]).toEqual(['invalid_json', 400, 'body']);
    expect(k.message).toBe((want as KvrError).message);
    expect(k.message).toBe(
      `request body is not valid JSON: json: unexpected character ('}' at offset ${28 + BYTES_PARSE_MIN})`,
    );
  });

  it('still refuses a body past the limit with 413 before parsing it', async () => {
    const srv = http.createServer((req, res) => {
      readUtf8Body(req, BYTES_PARSE_MIN + 10, 1).then(
        () => res.end('read'),
        (e: KvrError) => {
          res.statusCode = e.status;
          res.end(e.code);
        },
      );
    });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const port = (srv.address() as AddressInfo).port;
    const send = (n: number, chunked: boolean) =>
      new Promise<[number, string]>((resolve, reject) => {
        const buf = Buffer.alloc(n, 0x20);
        const req = http.request(
          { port, host: '127.0.0.1', method: 'POST', headers: chunked ? {} : { 'content-length': n } },
          (res) => {
            let t = '';
            res.on('data', (d: Buffer) => (t += d.toString()));
            res.on('end', () => resolve([res.statusCode ?? 0, t]));
          },
        );
        req.on('error', reject);
        req.end(buf);
      });
    expect(await send(BYTES_PARSE_MIN + 10, false)).toEqual([200, 'read']);
    expect(await send(BYTES_PARSE_MIN + 11, false)).toEqual([413, 'payload_too_large']);
    expect(await send(BYTES_PARSE_MIN + 11, true)).toEqual([413, 'payload_too_large']);
    await new Promise<void>((r) => srv.close(() => r()));
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

describe('readUtf8Body with a body string cache: a resent history is the kept string', () => {
  it('bodies from 2 KiB come as their bytes; the second body gets the first one’s long string object, the same value', async () => {
    const strings = new StringCache(1 << 20);
    const got: unknown[] = [];
    const srv = http.createServer((req, res) => {
      void readUtf8Body(req, 1 << 20, 1, 0, strings).then((b) => {
        got.push(b);
        res.end('ok');
      });
    });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const port = (srv.address() as AddressInfo).port;
    const send = (body: string) =>
      new Promise<void>((resolve, reject) => {
        const req = http.request({ port, host: '127.0.0.1', method: 'POST' }, (res) => {
          res.resume();
          res.on('end', () => resolve());
        });
        req.on('error', reject);
        req.end(body);
      });
    try {
      const system = `You are a careful assistant. ${'Réponds en détail, avec des exemples.\n'.repeat(60)}`;
      const turn1 = JSON.stringify({
        messages: [
          { role: 'system', content: system },
          { role: 'user', content: 'hi' },
        ],
      });
      const turn2 = JSON.stringify({
        messages: [
          { role: 'system', content: system },
          { role: 'user', content: 'hi' },
          { role: 'assistant', content: 'hello' },
          { role: 'user', content: 'more' },
        ],
      });
      expect(Buffer.byteLength(turn1)).toBeGreaterThanOrEqual(CACHED_BYTES_PARSE_MIN);
      expect(Buffer.byteLength(turn1)).toBeLessThan(BYTES_PARSE_MIN);
      await send(turn1);
      await send(turn2);
      expect(got[0]).toBeInstanceOf(BodyBytes);
      expect(got[1]).toBeInstanceOf(BodyBytes);
      const a = parseBody(got[0]) as { messages: { content: string }[] };
      const b = parseBody(got[1]) as { messages: { content: string }[] };
      expect(a).toEqual(JSON.parse(turn1));
      expect(b).toEqual(JSON.parse(turn2));
      // Kept once (bytes + 2 bytes per character + 96): the second body took it (a miss would keep a second).
      expect(strings.size).toBe(1);
      expect(strings.held).toBe(Buffer.byteLength(JSON.stringify(system)) - 2 + 2 * system.length + 96);
    } finally {
      await new Promise<void>((r) => srv.close(() => r()));
    }
  });
});
