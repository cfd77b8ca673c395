/**
 * Fuzzing the HTTP surface (issue 17): for every endpoint, random and mutated bodies (a valid request
 * with one field replaced by a random value or removed, byte edits of its JSON, random JSON, random
 * text), random extra headers and query strings, and raw requests with random header lines. Never a
 * 500 (or another 5xx than 501/503), never a hang, and every 4xx carries the API's error body with a
 * message that names the field (`param`, or the message starting with the field path).
 */
import net from 'node:net';
import zlib from 'node:zlib';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fuzzParams, fuzzTimeout, mutatedBytes, mutatedTree } from '@kvrouter/testkit';
import type { Frontend } from '../frontend.js';
import { startFrontend } from '../test-helpers.js';

const MODEL = 'mock-model';
const T = fuzzTimeout(120_000);
/** A request not answered in this time counts as a hang. */
const HANG_MS = 15_000;

let fe: Frontend;
beforeAll(async () => {
  fe = await startFrontend(['--router-mode', 'kv', '--router-event-threads', '1', '--enable-anthropic-api'], {
    env: { DYN_HTTP_BODY_LIMIT_MB: '1' },
  });
});
afterAll(async () => {
  await fe.close(0);
});

const msgs = [{ role: 'user', content: 'hi' }];
/** A valid body per POST endpoint (the fuzzer mutates them). */
const POSTS: Array<[string, Record<string, unknown>, 'openai' | 'anthropic' | 'busy']> = [
  ['/v1/chat/completions', { model: MODEL, messages: msgs, max_tokens: 2 }, 'openai'],
  [
    '/v1/chat/completions',
    { model: MODEL, messages: msgs, max_tokens: 2, stream: true, stream_options: { include_usage: true } },
    'openai',
  ],
  ['/v1/completions', { model: MODEL, prompt: 'hello', max_tokens: 2 }, 'openai'],
  ['/v1/embeddings', { model: MODEL, input: 'hello' }, 'openai'],
  ['/v1/responses', { model: MODEL, input: 'hello', max_output_tokens: 2 }, 'openai'],
  ['/v1/images/generations', { model: MODEL, prompt: 'a cat' }, 'openai'],
  ['/v1/videos/generations', { model: MODEL, prompt: 'a cat' }, 'openai'],
  ['/v1/messages', { model: MODEL, max_tokens: 2, messages: msgs }, 'anthropic'],
  ['/v1/messages/count_tokens', { model: MODEL, messages: msgs }, 'anthropic'],
  ['/busy_threshold', { model: MODEL, active_decode_blocks_threshold: 0.5 }, 'busy'],
];
const GETS = [
  '/v1/models',
  `/v1/models/${MODEL}`,
  '/health',
  '/live',
  '/metrics',
  '/openapi.json',
  '/busy_threshold',
  '/v1/responses/resp_x',
];

interface Answer {
  status: number;
  text: string;
  contentType: string;
}

async function send(
  method: string,
  path: string,
  body?: string | Uint8Array,
  headers: Record<string, string> = {},
): Promise<Answer> {
  const r = await fetch(`${fe.url}${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    body,
    signal: AbortSignal.timeout(HANG_MS),
  });
  return { status: r.status, text: await r.text(), contentType: r.headers.get('content-type') ?? '' };
}

/** The invariants of any answer: no 500, no hang (fetch would abort), errors in the API's shape naming the field. */
function checkAnswer(a: Answer, kind: 'openai' | 'anthropic' | 'busy', what: string): void {
  expect([500, 502, 504], `${what} -> ${a.status} ${a.text.slice(0, 300)}`).not.toContain(a.status);
  expect(
    a.status < 500 || a.status === 501 || a.status === 503,
    `${what} -> ${a.status} ${a.text.slice(0, 300)}`,
  ).toBe(true);
  if (a.status < 400) return;
  expect(a.contentType, `${what}: error content type`).toMatch(/json/);
  const body = JSON.parse(a.text) as Record<string, unknown>;
  if (kind === 'busy') {
    expect(typeof body.error, `${what}: ${a.text}`).toBe('string');
    return;
  }
  const err = body.error as { message?: unknown; param?: unknown; type?: unknown };
  if (kind === 'anthropic') expect(body.type, `${what}: ${a.text}`).toBe('error');
  expect(typeof err?.message === 'string' && err.message.length > 0, `${what}: no message in ${a.text}`).toBe(
    true,
  );
  const msg = err.message as string;
  expect(msg, `${what}: leaks a stack or path`).not.toMatch(/\n\s+at |\/work\/|node_modules|\.ts:\d+/);
  if (a.status === 400 || a.status === 422) {
    const named =
      (typeof err.param === 'string' && err.param.length > 0) || /^(request body\b|[\w.[\]$-]+:)/.test(msg);
    expect(named, `${what}: a ${a.status} that names no field: ${a.text.slice(0, 300)}`).toBe(true);
  }
}

const enc = new TextEncoder();

/** Output lengths a mutation made large are valid requests that take long, not hangs: kept small. */
function capLengths(tree: unknown): unknown {
  if (tree === null || typeof tree !== 'object' || Array.isArray(tree)) return tree;
  const o = { ...(tree as Record<string, unknown>) };
  for (const k of ['max_tokens', 'max_completion_tokens', 'max_output_tokens', 'n', 'best_of'])
    if (
      (typeof o[k] === 'number' && (o[k] as number) > 8) ||
      (typeof o[k] === 'bigint' && (o[k] as bigint) > 8n)
    )
      o[k] = 8;
  return o;
}

describe.each(POSTS)('POST %s under fuzzing', (path, valid, kind) => {
  it('one field replaced or removed: no 5xx, no hang, errors name the field', { timeout: T }, async () => {
    await fc.assert(
      fc.asyncProperty(mutatedTree(valid).map(capLengths), async (tree) => {
        const text =
          JSON.stringify(tree, (_k, v: unknown) =>
            typeof v === 'bigint' ? Number(v) : v instanceof Uint8Array ? [...v] : v,
          ) ?? 'null';
        checkAnswer(await send('POST', path, text), kind, `POST ${path} ${text.slice(0, 200)}`);
      }),
      fuzzParams(25, 1_000),
    );
  });

  it(
    'byte edits of the JSON, random JSON and random text: no 5xx, no hang, errors name the field',
    { timeout: T },
    async () => {
      const base = enc.encode(JSON.stringify(valid));
      await fc.assert(
        fc.asyncProperty(
          fc.oneof(
            mutatedBytes(base),
            fc.json().map((j) => enc.encode(j)),
            fc.string({ maxLength: 60 }).map((s) => enc.encode(s)),
            fc.uint8Array({ maxLength: 40 }),
          ),
          async (bytes) => {
            checkAnswer(
              await send('POST', path, bytes),
              kind,
              `POST ${path} ${Buffer.from(bytes).toString('latin1').slice(0, 200)}`,
            );
          },
        ),
        fuzzParams(25, 1_000),
      );
    },
  );
});

const compress: Record<string, (b: Uint8Array) => Uint8Array> = {
  gzip: (b) => zlib.gzipSync(b),
  deflate: (b) => zlib.deflateSync(b),
  br: (b) => zlib.brotliCompressSync(b),
  identity: (b) => b,
};

describe.each(POSTS)('POST %s with encoded bodies under fuzzing', (path, valid, kind) => {
  it('compressed, cut or mislabelled bodies and charsets: no 5xx, no hang', { timeout: T }, async () => {
    const base = enc.encode(JSON.stringify(valid));
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('gzip', 'deflate', 'br', 'identity'),
        fc.oneof(fc.constant(base), mutatedBytes(base), fc.uint8Array({ maxLength: 30 })),
        fc.oneof(fc.constant(null), fc.nat()),
        fc.constantFrom('utf-8', 'utf-16le', 'latin1', 'foo', null),
        fc.boolean(),
        async (encoding, bytes, cut, charset, compressIt) => {
          let b = compressIt ? compress[encoding]!(bytes) : bytes;
          if (cut !== null && b.length > 0) b = b.subarray(0, cut % b.length);
          const headers: Record<string, string> = { 'content-encoding': encoding };
          if (charset !== null) headers['content-type'] = `application/json; charset=${charset}`;
          const what = `POST ${path} ${encoding}${compressIt ? '' : ' (not compressed)'} cut=${cut} charset=${charset}`;
          checkAnswer(await send('POST', path, b, headers), kind, what);
        },
      ),
      fuzzParams(15, 600),
    );
  });
});

const token = fc.stringMatching(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,20}$/);
const headerValue = fc.stringMatching(/^[\x20-\x7e]{0,60}$/).map((s) => s.trim());
const SKIP_HEADERS = new Set([
  'content-length',
  'transfer-encoding',
  'host',
  'connection',
  'expect',
  'upgrade',
  'keep-alive',
  'te',
  'trailer',
]);
const queryString = fc
  .array(fc.tuple(fc.string({ maxLength: 8 }), fc.string({ maxLength: 12 })), { maxLength: 4 })
  .map((kv) => (kv.length ? '?' + new URLSearchParams(kv).toString() : ''));

describe('random headers and query strings', () => {
  it('on every route: no 5xx, no hang', { timeout: T }, async () => {
    const routes = [
      ...POSTS.map(([p, b, k]) => ['POST', p, b, k] as const),
      ...GETS.map((p) => ['GET', p, null, 'openai'] as const),
    ];
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...routes),
        fc.dictionary(token, headerValue, { maxKeys: 5 }),
        queryString,
        async ([method, path, body, kind], headers, qs) => {
          const h: Record<string, string> = {};
          for (const [k, v] of Object.entries(headers)) if (!SKIP_HEADERS.has(k.toLowerCase())) h[k] = v;
          const a = await send(method, path + qs, body === null ? undefined : JSON.stringify(body), h);
          checkAnswer(a, kind, `${method} ${path}${qs} ${JSON.stringify(h)}`);
        },
      ),
      fuzzParams(60, 3_000),
    );
  });

  it(
    'raw requests with random header lines: an HTTP answer (400 for a malformed head), never a 5xx or a hang',
    { timeout: T },
    async () => {
      const port = Number(new URL(fe.url).port);
      const line = fc.oneof(
        fc.tuple(token, headerValue).map(([k, v]) => `${k}: ${v}`),
        fc.string({ maxLength: 40 }).map((s) => s.replace(/\r|\n/g, ' ')),
        fc.constantFrom(
          'Content-Length: -1',
          'Content-Length: 1, 2',
          'Transfer-Encoding: chunked',
          'Transfer-Encoding: gzip, chunked',
          'Content-Length: 99999999999999999999',
          ': empty',
          'X-A:\tb',
        ),
      );
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom('GET /health', 'POST /v1/chat/completions', 'GET /v1/models'),
          fc.array(line, { maxLength: 6 }),
          async (start, lines) => {
            const head = `${start} HTTP/1.1\r\nHost: x\r\n${lines.map((l) => l + '\r\n').join('')}Connection: close\r\n\r\n`;
            const reply = await new Promise<string>((resolve, reject) => {
              const s = net.connect(port, '127.0.0.1');
              let got = '';
              const timer = setTimeout(() => {
                s.destroy();
                reject(new Error(`no answer in ${HANG_MS} ms to ${JSON.stringify(head)}`));
              }, HANG_MS);
              s.on('data', (d: Buffer) => (got += d.toString('latin1')));
              s.on('error', () => undefined);
              s.on('close', () => {
                clearTimeout(timer);
                resolve(got);
              });
              s.end(head);
            });
            // A malformed head may also be answered by closing the connection (no bytes).
            if (reply === '') return;
            const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(reply)?.[1]);
            expect(status < 500 || status === 503, `${JSON.stringify(head)} -> ${reply.slice(0, 300)}`).toBe(
              true,
            );
          },
        ),
        fuzzParams(60, 3_000),
      );
    },
  );
});
