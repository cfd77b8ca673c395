/**
 * HTTP hardening (issue 17): header count and size limits (431), slow clients cut by the head and
 * request timeouts (408) while others are served (slowloris), `--http-max-streams` (503
 * too_many_streams with Retry-After), no stack traces or internal paths in error bodies, and the TLS
 * profile: a TLS 1.1 client and a weak cipher are refused — the same clients get through to a
 * permissive TLS server, so the refusal is the frontend's — while TLS 1.2 AEAD and TLS 1.3 connect.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Frontend } from '../frontend.js';
import { eventually, startFrontend } from '../test-helpers.js';

const MODEL = 'mock-model';

/** Sends raw bytes, optionally trickling `slow` one piece every `everyMs`; resolves with all bytes read when the server closes. */
function raw(port: number, head: string, slow: string[] = [], everyMs = 200): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    let got = '';
    let timer: NodeJS.Timeout | undefined;
    s.on('data', (d: Buffer) => (got += d.toString('latin1')));
    s.on('error', () => undefined);
    s.on('close', () => {
      clearInterval(timer);
      resolve(got);
    });
    s.write(head);
    let i = 0;
    if (slow.length > 0)
      timer = setInterval(() => {
        if (!s.destroyed) s.write(slow[i++ % slow.length]!);
      }, everyMs);
  });
}
const statusOf = (reply: string): number => Number(/^HTTP\/1\.1 (\d{3})/.exec(reply)?.[1]);

describe('limits and slow clients', () => {
  let fe: Frontend;
  let port: number;
  beforeAll(async () => {
    fe = await startFrontend(
      [
        '--mocker-workers',
        '1',
        '--http-max-headers',
        '20',
        '--http-max-header-bytes',
        '4096',
        '--http-headers-timeout-secs',
        '1',
        '--http-request-timeout-secs',
        '2',
        '--http-max-streams',
        '1',
      ],
      { embedded: { engine: { speedupRatio: 0.5 } } },
    );
    port = Number(new URL(fe.url).port);
  });
  afterAll(async () => {
    await fe.close(0);
  });

  const headers = (n: number) => Array.from({ length: n }, (_, i) => `X-H${i}: v\r\n`).join('');

  it('more header fields than --http-max-headers get 431 naming the headers; exactly the limit passes', async () => {
    // Host and Connection count too: 18 + 2 = 20 fields pass, 19 + 2 = 21 do not.
    const ok = await raw(port, `GET /live HTTP/1.1\r\nHost: x\r\n${headers(18)}Connection: close\r\n\r\n`);
    expect(statusOf(ok)).toBe(200);
    const no = await raw(port, `GET /live HTTP/1.1\r\nHost: x\r\n${headers(19)}Connection: close\r\n\r\n`);
    expect(statusOf(no)).toBe(431);
    const body = JSON.parse(no.slice(no.indexOf('\r\n\r\n') + 4)) as {
      error: { code: string; param: string; message: string };
    };
    expect(body.error).toMatchObject({ code: 'headers_too_large', param: 'headers' });
    expect(body.error.message).toBe('headers: 21 header fields, the limit is 20 (--http-max-headers)');
  });

  it('a head above --http-max-header-bytes gets 431', async () => {
    const reply = await raw(
      port,
      `GET /live HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(5000)}\r\nConnection: close\r\n\r\n`,
    );
    expect(statusOf(reply)).toBe(431);
  });

  it('slowloris: a client trickling its head is cut with 408 after --http-headers-timeout-secs, others are served meanwhile', async () => {
    const slow = raw(port, 'GET /live HTTP/1.1\r\nHost: x\r\n', ['X-A: b\r\n']);
    // While it trickles, a normal request is answered.
    const r = await fetch(`${fe.url}/live`);
    expect(r.status).toBe(200);
    const reply = await slow;
    expect(statusOf(reply)).toBe(408);
  });

  it('a client trickling its body is cut with 408 after --http-request-timeout-secs', async () => {
    const reply = await raw(
      port,
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"model":`,
      [' '],
    );
    expect(statusOf(reply)).toBe(408);
  });

  it('--http-max-streams: a stream past the limit gets 503 too_many_streams with Retry-After; one fits again after', async () => {
    const body = (stream: boolean) =>
      JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4000, stream });
    const ac = new AbortController();
    const first = await fetch(`${fe.url}/v1/chat/completions`, {
      method: 'POST',
      body: body(true),
      signal: ac.signal,
    });
    expect(first.status).toBe(200);
    const second = await fetch(`${fe.url}/v1/chat/completions`, { method: 'POST', body: body(true) });
    expect(second.status).toBe(503);
    expect(second.headers.get('retry-after')).toBe('1');
    const err = (await second.json()) as { error: { code: string; param: string; message: string } };
    expect(err.error).toMatchObject({ code: 'too_many_streams', param: 'stream' });
    expect(err.error.message).toMatch(
      /1 streaming responses are open, the limit is 1 \(--http-max-streams\)/,
    );
    // Non-streaming requests are not streams.
    const unary = await fetch(`${fe.url}/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
    });
    expect(unary.status).toBe(200);
    ac.abort();
    await first.body?.cancel().catch(() => undefined);
    await eventually(() => fe.inflightRequests === 0, 10_000, 'the first stream closed');
    const third = await fetch(`${fe.url}/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({
        model: MODEL,
        messages: [{ role: 'user', content: 'hi' }],
        max_tokens: 2,
        stream: true,
      }),
    });
    expect(third.status).toBe(200);
    expect(await third.text()).toMatch(/data: \[DONE\]/);
  });

  it('a compressed body that does not inflate, or a path that does not decode, gets a 400 naming it (found by fuzzing)', async () => {
    const r = await fetch(`${fe.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      body: new Uint8Array([0x1f, 0x8b, 8, 0]),
    });
    expect(r.status).toBe(400);
    const b = (await r.json()) as { error: { param: string; message: string } };
    expect(b.error.param).toBe('body');
    expect(b.error.message).toBe('request body: unexpected end of file');
    const p = await fetch(`${fe.url}/v1/models/%E0%A4%A`);
    expect(p.status).toBe(400);
    const pb = (await p.json()) as { error: { param: string; message: string } };
    expect(pb.error.param).toBe('path');
    expect(pb.error.message).toMatch(/^path: Failed to decode param/);
  });

  it('error bodies carry no stack trace or internal path', async () => {
    const LEAK = /\n\s+at |\/work\/|\/home\/|node_modules|\.ts:\d+|\.js:\d+|Error: /;
    const cases: Array<[string, string, string?]> = [
      ['GET', '/v1/models/%E0%A4%A'],
      ['POST', '/v1/chat/completions', '{"model": "mock-model", "messages": ['],
      ['POST', '/v1/chat/completions', '{"model": {"__proto__": 1}, "messages": []}'],
      ['POST', '/v1/completions', '{"model": "mock-model", "prompt": [[-1]]}'],
      ['POST', '/v1/embeddings', '[]'],
      ['DELETE', '/v1/chat/completions'],
      ['GET', '/nope/../../etc/passwd'],
      ['POST', '/busy_threshold', '{"model": 1}'],
    ];
    for (const [method, p, body] of cases) {
      const r = await fetch(`${fe.url}${p}`, {
        method,
        body,
        headers: { 'content-type': 'application/json' },
      });
      const text = await r.text();
      expect(r.status, `${method} ${p}: ${text}`).toBeGreaterThanOrEqual(400);
      expect(r.status, `${method} ${p}: ${text}`).toBeLessThan(500);
      expect(text, `${method} ${p}`).not.toMatch(LEAK);
    }
  });
});

describe('TLS profile', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvr-tls-'));
  const cert = path.join(dir, 'cert.pem');
  const key = path.join(dir, 'key.pem');
  let fe: Frontend;
  let control: tls.Server;
  beforeAll(async () => {
    const gen = spawnSync('openssl', [
      ...['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '1'],
      ...['-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'],
    ]);
    expect(gen.status, gen.stderr?.toString()).toBe(0);
    fe = await startFrontend(['--tls-cert-path', cert, '--tls-key-path', key]);
    // A server that accepts anything OpenSSL can still speak: shows the clients below are able to connect.
    control = tls.createServer(
      {
        key: fs.readFileSync(key),
        cert: fs.readFileSync(cert),
        minVersion: 'TLSv1',
        ciphers: 'DEFAULT@SECLEVEL=0',
      },
      (s) => s.end(),
    );
    await new Promise<void>((r) => control.listen(0, '127.0.0.1', () => r()));
  });
  afterAll(async () => {
    await fe.close(0);
    control.close();
  });

  function handshake(
    port: number,
    o: tls.ConnectionOptions,
  ): Promise<{ protocol: string; cipher: string } | { error: string }> {
    return new Promise((resolve) => {
      const c = tls.connect({ port, host: '127.0.0.1', ca: fs.readFileSync(cert), ...o }, () => {
        resolve({ protocol: c.getProtocol() ?? '', cipher: c.getCipher().name });
        c.destroy();
      });
      c.on('error', (e: Error) => resolve({ error: e.message }));
    });
  }
  const fePort = () => Number(new URL(fe.url).port);
  const controlPort = () => (control.address() as net.AddressInfo).port;

  const TLS11 = { minVersion: 'TLSv1.1', maxVersion: 'TLSv1.1', ciphers: 'DEFAULT@SECLEVEL=0' } as const;
  const WEAK = { maxVersion: 'TLSv1.2', ciphers: 'AES128-SHA:DES-CBC3-SHA@SECLEVEL=0' } as const;

  it('refuses a TLS 1.1 client (which the permissive server accepts)', async () => {
    expect(await handshake(controlPort(), TLS11)).toMatchObject({ protocol: 'TLSv1.1' });
    expect(await handshake(fePort(), TLS11)).toHaveProperty('error');
  });

  it('refuses a weak cipher over TLS 1.2 (RSA key exchange, CBC, SHA-1) that the permissive server accepts', async () => {
    expect(await handshake(controlPort(), WEAK)).toMatchObject({ protocol: 'TLSv1.2', cipher: 'AES128-SHA' });
    expect(await handshake(fePort(), WEAK)).toHaveProperty('error');
  });

  it('accepts TLS 1.2 with a forward-secret AEAD suite, and TLS 1.3', async () => {
    expect(
      await handshake(fePort(), { maxVersion: 'TLSv1.2', ciphers: 'ECDHE-RSA-AES128-GCM-SHA256' }),
    ).toEqual({
      protocol: 'TLSv1.2',
      cipher: 'ECDHE-RSA-AES128-GCM-SHA256',
    });
    expect(await handshake(fePort(), {})).toMatchObject({ protocol: 'TLSv1.3' });
  });
});
