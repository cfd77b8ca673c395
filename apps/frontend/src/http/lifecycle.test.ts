/**
 * Process-level behaviour: HTTPS with a generated certificate, graceful shutdown with streams in
 * flight (finish within the timeout; cut at the timeout), migration when a worker dies mid-stream,
 * and the interactive terminal chat.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { resolveConfig } from '@kvrouter/config';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { runInteractive } from '../interactive.js';
import { bodyReader, eventually, routerIdle, startFrontend } from '../test-helpers.js';

const MODEL = 'mock-model';
const chat = (extra: object = {}) =>
  JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, ...extra });

function sseTokens(text: string): { done: boolean; completion: number | null; content: string } {
  const events = text
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => e.slice(6));
  let completion: number | null = null;
  let content = '';
  for (const e of events) {
    if (e === '[DONE]') continue;
    const c = JSON.parse(e) as {
      usage?: { completion_tokens: number } | null;
      choices: { delta?: { content?: string } }[];
    };
    if (c.usage) completion = c.usage.completion_tokens;
    content += c.choices[0]?.delta?.content ?? '';
  }
  return { done: events[events.length - 1] === '[DONE]', completion, content };
}

describe('TLS', () => {
  it('serves HTTPS with --tls-cert-path/--tls-key-path (a certificate generated for 127.0.0.1)', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvr-tls-'));
    const cert = path.join(dir, 'cert.pem');
    const key = path.join(dir, 'key.pem');
    const gen = spawnSync('openssl', [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      '1',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
    ]);
    expect(gen.status, gen.stderr?.toString()).toBe(0);
    const fe = await startFrontend(['--tls-cert-path', cert, '--tls-key-path', key, '--mocker-workers', '1']);
    try {
      expect(fe.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
      const body = await new Promise<{ status: number; text: string }>((resolve, reject) => {
        const req = https.request(
          `${fe.url}/v1/chat/completions`,
          { method: 'POST', ca: fs.readFileSync(cert), headers: { 'content-type': 'application/json' } },
          (res) => {
            let text = '';
            res.setEncoding('utf8');
            res.on('data', (d: string) => (text += d));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
          },
        );
        req.on('error', reject);
        req.end(chat());
      });
      expect(body.status).toBe(200);
      expect(
        (JSON.parse(body.text) as { usage: { completion_tokens: number } }).usage.completion_tokens,
      ).toBe(4);
      // Plain HTTP on the TLS port does not get an answer.
      await expect(fetch(fe.url.replace('https', 'http') + '/live')).rejects.toThrow();
    } finally {
      await fe.close(0);
    }
  });

  it('one TLS path without the other is a configuration error with the docs/configuration.md message', () => {
    expect(() => resolveConfig('frontend', ['--tls-cert-path', '/x.pem'], {})).toThrow(
      '--tls-cert-path and --tls-key-path must be provided together',
    );
  });
});

describe('graceful shutdown', () => {
  it('stops accepting at once, lets in-flight streams finish, then closes', async () => {
    // ~6 ms per decode pass at the model's own speed: 150 tokens take about a second.
    const fe = await startFrontend(['--mocker-workers', '2'], { embedded: { engine: { speedupRatio: 1 } } });
    const url = fe.url;
    const streams = [0, 1, 2].map(() =>
      fetch(`${url}/v1/chat/completions`, {
        method: 'POST',
        body: chat({ max_tokens: 150, stream: true, stream_options: { include_usage: true } }),
      }).then((r) => r.text()),
    );
    await eventually(() => fe.inflightRequests === 3, 5000, 'three requests in flight');
    const closing = fe.close(10);
    let closed = false;
    void closing.then(() => (closed = true));
    await new Promise((r) => setTimeout(r, 20));
    await expect(fetch(`${url}/live`)).rejects.toThrow();
    expect(closed).toBe(false);
    for (const t of await Promise.all(streams)) {
      const s = sseTokens(t);
      expect(s.done).toBe(true);
      expect(s.completion).toBe(150);
    }
    await closing;
  });

  it('cuts streams still running when the timeout expires, each with an SSE error event before the close (issue 17)', async () => {
    // A slow engine: 5,000 tokens take far longer than the 0.3 s grace period.
    const fe = await startFrontend(['--mocker-workers', '1'], {
      embedded: { engine: { speedupRatio: 0.5 } },
    });
    // Raw SSE: the bytes the client gets, in order.
    const r = await fetch(`${fe.url}/v1/chat/completions`, {
      method: 'POST',
      body: chat({ max_tokens: 5000, stream: true }),
    });
    const reader = bodyReader(r);
    let text = (await reader.read()) ?? '';
    expect(text).toContain('"role":"assistant"');
    // The official client on a second stream: it must see the error, not a silent end.
    const client = new OpenAI({ baseURL: `${fe.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const official = (async () => {
      const s = await client.chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: 'hi' }],
        max_tokens: 5000,
        stream: true,
      });
      let chunks = 0;
      try {
        for await (const _ of s) chunks++;
      } catch (e) {
        return { chunks, error: e as Error };
      }
      return { chunks, error: null };
    })();
    await eventually(() => fe.inflightRequests === 2, 5000, 'two streams in flight');
    await fe.close(0.3);
    for (let t = await reader.read(); t !== null; t = await reader.read()) text += t;
    const events = text
      .split('\n\n')
      .filter((e) => e.startsWith('data: '))
      .map((e) => e.slice(6));
    expect(events.at(-1)).toBe('[DONE]');
    const err = JSON.parse(events.at(-2)!) as { error: { code: string; message: string; type: string } };
    expect(err.error.code).toBe('shutting_down');
    expect(err.error.message).toMatch(/shutting down/);
    // Every event before the error is a normal chunk.
    for (const e of events.slice(0, -2))
      expect((JSON.parse(e) as { object: string }).object).toBe('chat.completion.chunk');
    const o = await official;
    expect(o.error).not.toBeNull();
    expect(o.error!.message).toMatch(/shutting down/);
  });
});

describe('graceful shutdown of non-streaming requests', () => {
  it('answers a unary request still running when the timeout expires with a 503 shutting_down error, not a silent close (issue 17)', async () => {
    const fe = await startFrontend(['--mocker-workers', '1', '--enable-anthropic-api'], {
      embedded: { engine: { speedupRatio: 0.5 } },
    });
    // Raw: the status, headers and body the client gets.
    const raw = fetch(`${fe.url}/v1/chat/completions`, { method: 'POST', body: chat({ max_tokens: 5000 }) });
    // The official client: it must raise the error.
    const client = new OpenAI({ baseURL: `${fe.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const official = client.completions.create({ model: MODEL, prompt: 'hi', max_tokens: 5000 }).then(
      () => null,
      (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
    );
    // Anthropic's shape on its route.
    const anthropic = fetch(`${fe.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, max_tokens: 5000, messages: [{ role: 'user', content: 'hi' }] }),
    });
    await eventually(() => fe.inflightRequests === 3, 5000, 'three requests in flight');
    await fe.close(0.3);
    const r = await raw;
    expect(r.status).toBe(503);
    expect(r.headers.get('retry-after')).toBe('1');
    const body = (await r.json()) as { error: { code: string; message: string; type: string } };
    expect(body.error.code).toBe('shutting_down');
    expect(body.error.type).toBe('service_unavailable');
    expect(body.error.message).toMatch(/shutting down/);
    const e = await official;
    expect(e).toBeInstanceOf(OpenAI.APIError);
    expect(e!.status).toBe(503);
    expect(e!.message).toMatch(/shutting down/);
    const a = await anthropic;
    expect(a.status).toBe(503);
    expect(await a.json()).toEqual({
      type: 'error',
      error: {
        type: 'overloaded_error',
        message:
          'the server is shutting down: the request was cut at the end of the graceful shutdown period',
      },
    });
  });
});

describe('migration', () => {
  it('a worker dying mid-stream is replaced: the client stream completes with every token, the metric counts it', async () => {
    const fe = await startFrontend(
      [
        '--router-mode',
        'kv',
        '--router-event-threads',
        '1',
        '--mocker-workers',
        '2',
        '--migration-limit',
        '2',
      ],
      {
        embedded: { engine: { speedupRatio: 2 } },
      },
    );
    try {
      const r = await fetch(`${fe.url}/v1/chat/completions`, {
        method: 'POST',
        // Long enough that the stream is still running when a slow (loaded) test process looks.
        body: chat({
          max_tokens: 400,
          stream: true,
          stream_options: { include_usage: true },
          nvext: { extra_fields: ['timing'] },
        }),
      });
      const reader = bodyReader(r);
      let text = '';
      while ((text.match(/"content":/g) ?? []).length < 6) text += (await reader.read()) ?? '';
      const set = fe.registry.allSets()[0]!;
      const serving = fe.fleet!.workers.find(
        (w) => set.router.rankLoad({ worker_id: w.instanceId, dp_rank: 0 }).active_requests === 1,
      )!;
      expect(serving).toBeDefined();
      serving.crash();
      for (let piece = await reader.read(); piece !== null; piece = await reader.read()) text += piece;
      const s = sseTokens(text);
      expect(s.done).toBe(true);
      expect(s.completion).toBe(400);
      expect(text).toContain('"migrations":1');
      const m = await (await fetch(`${fe.url}/metrics`)).text();
      expect(m).toMatch(
        /dynamo_frontend_model_migration_total\{model="mock-model",migration_type="ongoing_request"\} 1/,
      );
      await eventually(() => routerIdle(fe), 5000, 'router idle');
      // The dead worker is out of routing right away, not after its lease expires.
      expect(set.router.workerIds()).toHaveLength(1);
    } finally {
      await fe.close(0);
    }
  });

  it('without a migration budget the stream ends with an error event', async () => {
    const fe = await startFrontend(['--mocker-workers', '1'], { embedded: { engine: { speedupRatio: 2 } } });
    try {
      const r = await fetch(`${fe.url}/v1/chat/completions`, {
        method: 'POST',
        body: chat({ max_tokens: 60, stream: true }),
      });
      const reader = bodyReader(r);
      let text = '';
      while ((text.match(/"content":/g) ?? []).length < 4) text += (await reader.read()) ?? '';
      fe.fleet!.workers[0]!.crash();
      for (let piece = await reader.read(); piece !== null; piece = await reader.read()) text += piece;
      expect(text).toMatch(/data: \{"error":\{"message":"[^"]+","type":"[a-z_]+","code":"disconnected"/);
      expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
    } finally {
      await fe.close(0);
    }
  });
});

describe('interactive', () => {
  it('-i chats on the terminal through the router and keeps the conversation', async () => {
    const fe = await startFrontend(['-i', '--mocker-workers', '1'], { noHttp: true });
    try {
      const input = new PassThrough();
      const output = new PassThrough();
      let out = '';
      output.on('data', (d: Buffer) => (out += d.toString()));
      const done = runInteractive(fe, input, output, 5);
      input.write('hello there\n');
      await eventually(() => (out.match(/> /g) ?? []).length >= 2, 5000, 'first answer');
      input.write('and again\n');
      await eventually(() => (out.match(/> /g) ?? []).length >= 3, 5000, 'second answer');
      input.end('/quit\n');
      await done;
      expect(out).toContain(`interactive chat with ${MODEL}`);
      expect(fe.server).toBeNull();
      // Two turns were served (the second with the first turn in its prompt).
      const m = fe.metrics.frontend.requestsTotal;
      const v = await m.get();
      expect(v.values.reduce((n, x) => n + x.value, 0)).toBe(2);
    } finally {
      await fe.close(0);
    }
  });
});
