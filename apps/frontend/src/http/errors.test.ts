/**
 * Bad input over raw HTTP: each case gets its status and an OpenAI error body naming the problem,
 * and changes nothing (no booking). Also the non-inference routes: 501s, unknown routes, health,
 * live, models, openapi/docs, busy_threshold, path overrides, body limit.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Frontend } from '../frontend.js';
import { promtoolProblems, routerIdle, startFrontend } from '../test-helpers.js';

let fe: Frontend;
const MODEL = 'mock-model';

beforeAll(async () => {
  fe = await startFrontend(['--router-mode', 'kv', '--router-event-threads', '1'], {
    env: { DYN_HTTP_BODY_LIMIT_MB: '1' },
  });
});
afterAll(async () => {
  await fe.close(0);
});

async function post(p: string, body: string | object, headers: Record<string, string> = {}) {
  const r = await fetch(`${fe.url}${p}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await r.text();
  return { status: r.status, headers: r.headers, text, json: JSON.parse(text) as Record<string, unknown> };
}

interface ErrBody {
  error: { message: string; type: string; code: string | null; param?: string };
}

const chat = (extra: object) => ({
  model: MODEL,
  messages: [{ role: 'user', content: 'hi' }],
  max_tokens: 2,
  ...extra,
});

describe('bad input', () => {
  const cases: [string, string | object, number, RegExp, string?][] = [
    ['malformed JSON', '{"model": "mock-model", "messages": [', 400, /not valid JSON/, 'body'],
    ['a JSON array body', '[1, 2]', 400, /expected a JSON object/, 'body'],
    ['missing model', { messages: [{ role: 'user', content: 'hi' }] }, 400, /model: required/, 'model'],
    [
      'model of the wrong type',
      { model: 7, messages: [{ role: 'user', content: 'hi' }] },
      400,
      /model: expected a string/,
      'model',
    ],
    ['unknown model', chat({ model: 'gpt-5' }), 404, /`gpt-5` does not exist/, 'model'],
    ['missing messages', { model: MODEL }, 400, /messages: required/, 'messages'],
    [
      'empty messages',
      chat({ messages: [] }),
      400,
      /messages: must contain at least one message/,
      'messages',
    ],
    ['messages not an array', chat({ messages: 'hi' }), 400, /messages: expected an array/, 'messages'],
    [
      'a bad role',
      chat({ messages: [{ role: 'robot', content: 'x' }] }),
      400,
      /messages\[0\]\.role/,
      'messages[0].role',
    ],
    [
      'content of the wrong type',
      chat({ messages: [{ role: 'user', content: 5 }] }),
      400,
      /messages\[0\]\.content/,
      'messages[0].content',
    ],
    [
      'negative max_tokens',
      chat({ max_tokens: -1 }),
      400,
      /max_tokens: expected an integer between 1 and 4294967295, got -1/,
      'max_tokens',
    ],
    ['fractional max_tokens', chat({ max_tokens: 1.5 }), 400, /max_tokens/, 'max_tokens'],
    ['huge max_tokens', chat({ max_tokens: 1e12 }), 400, /max_tokens/, 'max_tokens'],
    // 4096 blocks × 16 tokens = 65 536-token context (FAST_ENGINE); 65 530 + the prompt exceeds it.
    [
      'max_tokens beyond the context',
      chat({ max_tokens: 65_530 }),
      400,
      /maximum context length is 65536 tokens/,
      'max_tokens',
    ],
    ['stream not a boolean', chat({ stream: 'yes' }), 400, /stream: expected a boolean/, 'stream'],
    [
      'temperature out of range',
      chat({ temperature: 3 }),
      400,
      /temperature: expected a number between 0 and 2/,
      'temperature',
    ],
    ['n > 128', chat({ n: 129 }), 400, /n: expected an integer between 1 and 128/, 'n'],
    ['best_of > 1', chat({ best_of: 2 }), 400, /best_of: only best_of = 1/, 'best_of'],
    ['nvext not an object', chat({ nvext: 3 }), 400, /nvext must be an object/, 'nvext'],
    [
      'nvext credit out of range',
      chat({ nvext: { agent_hints: { kv_overlap_score_credit: 1.5 } } }),
      400,
      /nvext\.agent_hints\.kv_overlap_score_credit must be between 0\.0 and 1\.0/,
      'nvext.agent_hints.kv_overlap_score_credit',
    ],
    [
      'nvext session action',
      chat({ nvext: { session_control: { session_id: 's', action: 'start' } } }),
      400,
      /nvext\.session_control\.action must be one of open, close, bind/,
      'nvext.session_control.action',
    ],
    [
      'nvext token_data of the wrong type',
      chat({ nvext: { token_data: [1, -2] } }),
      400,
      /nvext\.token_data\[1\]/,
      'nvext.token_data[1]',
    ],
  ];
  for (const [name, body, status, msg, param] of cases) {
    it(`${name} → ${status}`, async () => {
      const r = await post('/v1/chat/completions', body);
      expect(r.status).toBe(status);
      const e = r.json as unknown as ErrBody;
      expect(e.error.message).toMatch(msg);
      expect(typeof e.error.type).toBe('string');
      expect(e.error.code).not.toBeNull();
      if (param) expect(e.error.param).toBe(param);
    });
  }

  it('completions: missing prompt, a bad batch element, empty token list', async () => {
    expect((await post('/v1/completions', { model: MODEL })).status).toBe(400);
    const batch = await post('/v1/completions', { model: MODEL, prompt: ['a', 3] });
    expect(batch.status).toBe(400);
    expect((batch.json as unknown as ErrBody).error.param).toBe('prompt[1]');
    expect((await post('/v1/completions', { model: MODEL, prompt: [] })).status).toBe(400);
  });

  it('a body over DYN_HTTP_BODY_LIMIT_MB (1 MB here) → 413', async () => {
    const r = await post(
      '/v1/chat/completions',
      chat({ messages: [{ role: 'user', content: 'x'.repeat(1_100_000) }] }),
    );
    expect(r.status).toBe(413);
    expect((r.json as unknown as ErrBody).error.message).toMatch(/exceeds the limit of 1 MB/);
  });

  it('a chunked body (no content-length) is cut off at the limit too → 413', async () => {
    const { status, text } = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = http.request(
        `${fe.url}/v1/chat/completions`,
        { method: 'POST', headers: { 'content-type': 'application/json' } },
        (res) => {
          let t = '';
          res.on('data', (d: Buffer) => (t += d.toString()));
          res.on('end', () => resolve({ status: res.statusCode!, text: t }));
        },
      );
      req.on('error', reject);
      // 12 x 100 kB = 1.2 MB > 1 MB, sent as chunked transfer encoding.
      for (let i = 0; i < 12; i++) req.write('x'.repeat(100_000));
      req.end();
    });
    expect(status).toBe(413);
    expect(text).toMatch(/exceeds the limit of 1 MB/);
  });

  it('gzip bodies, other charsets, a trailing slash and other letter case reach the same handler', async () => {
    const body = { model: MODEL, prompt: 'café', max_tokens: 2, echo: true };
    const gz = await fetch(`${fe.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      body: zlib.gzipSync(JSON.stringify(body)),
    });
    expect(gz.status).toBe(200);
    expect(((await gz.json()) as { choices: { text: string }[] }).choices[0]!.text.startsWith('café')).toBe(
      true,
    );
    // "é" as the single latin1 byte 0xE9: decoded by the declared charset, not as UTF-8.
    const latin1 = await fetch(`${fe.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json; charset=latin1' },
      body: Buffer.from(JSON.stringify(body), 'latin1'),
    });
    expect(latin1.status).toBe(200);
    expect(
      ((await latin1.json()) as { choices: { text: string }[] }).choices[0]!.text.startsWith('café'),
    ).toBe(true);
    for (const path of ['/v1/completions/', '/V1/Completions', '/v1/completions?x=1']) {
      const r = await fetch(`${fe.url}${path}`, { method: 'POST', body: JSON.stringify(body) });
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toBe('application/json; charset=utf-8');
    }
  });

  it('direct mode without a worker pin is a 400 with the docs/configuration.md message', async () => {
    const d = await startFrontend(['--router-mode', 'direct', '--mocker-workers', '1']);
    try {
      const r = await fetch(`${d.url}/v1/chat/completions`, {
        method: 'POST',
        body: JSON.stringify(chat({})),
      });
      expect(r.status).toBe(400);
      const e = (await r.json()) as ErrBody;
      expect(e.error.message).toBe(
        'direct routing requires nvext.backend_instance_id or x-worker-instance-id',
      );
    } finally {
      await d.close(0);
    }
  });

  it('none of it left a booking', () => {
    expect(routerIdle(fe)).toBe(true);
  });
});

describe('routes', () => {
  it('media routes without a capable worker: 400 embeddings on a chat model, 501 images / videos; unknown routes 404', async () => {
    // The embedded fleet only chats: asked to embed, the model is the wrong kind (400 naming model).
    const e = await post('/v1/embeddings', { model: MODEL, input: 'x' });
    expect(e.status).toBe(400);
    expect((e.json as unknown as ErrBody).error.param).toBe('model');
    // No worker of the fleet declares images or videos: 501 in OpenAI error form.
    for (const p of ['/v1/images/generations', '/v1/videos/generations', '/v1/videos/generations/stream']) {
      const r = await post(p, { model: MODEL, prompt: 'x' });
      expect(r.status, p).toBe(501);
      expect((r.json as unknown as ErrBody).error.type).toBe('not_implemented_error');
    }
    // Anthropic routes exist only with --enable-anthropic-api.
    expect((await post('/v1/messages', {})).status).toBe(404);
    const r = await fetch(`${fe.url}/v2/nothing`);
    expect(r.status).toBe(404);
    expect(((await r.json()) as ErrBody).error.message).toMatch(/no route for GET \/v2\/nothing/);
  });

  it('health, live, models, openapi.json and the Swagger UI page with its assets', async () => {
    const h = await fetch(`${fe.url}/health`);
    expect(h.status).toBe(200);
    const hb = (await h.json()) as { status: string; models: string[]; instances: unknown[] };
    expect(hb.status).toBe('healthy');
    expect(hb.models).toEqual([MODEL]);
    expect(hb.instances).toHaveLength(4);
    expect((await fetch(`${fe.url}/live`)).status).toBe(200);
    const spec = (await (await fetch(`${fe.url}/openapi.json`)).json()) as {
      openapi: string;
      paths: Record<string, unknown>;
    };
    expect(spec.openapi).toMatch(/^3\./);
    expect(Object.keys(spec.paths)).toEqual(
      expect.arrayContaining(['/v1/chat/completions', '/v1/completions', '/v1/models', '/busy_threshold']),
    );
    const docs = await fetch(`${fe.url}/docs`);
    expect(docs.status).toBe(200);
    const html = await docs.text();
    expect(html).toContain('/docs/swagger-ui-bundle.js');
    expect(html).not.toMatch(/https?:\/\//);
    const bundle = await fetch(`${fe.url}/docs/swagger-ui-bundle.js`);
    expect(bundle.status).toBe(200);
    expect((await bundle.text()).length).toBeGreaterThan(100_000);
  });

  it('/busy_threshold: read, set, read back, clear; errors in {"error"} form', async () => {
    const all = (await (await fetch(`${fe.url}/busy_threshold`)).json()) as {
      thresholds: Record<string, unknown>[];
    };
    expect(all.thresholds.map((t) => t.model)).toEqual([MODEL]);
    const set = await post('/busy_threshold', {
      model: MODEL,
      active_decode_blocks_threshold: 0.5,
      active_prefill_tokens_threshold: 1000,
    });
    expect(set.status).toBe(200);
    expect(set.json).toMatchObject({
      model: MODEL,
      active_decode_blocks_threshold: 0.5,
      active_prefill_tokens_threshold: 1000,
    });
    const read = await post('/busy_threshold', { model: MODEL });
    expect(read.json).toMatchObject({
      active_decode_blocks_threshold: 0.5,
      active_prefill_tokens_threshold: 1000,
    });
    const cleared = await post('/busy_threshold', { model: MODEL, active_decode_blocks_threshold: null });
    expect(cleared.json.active_decode_blocks_threshold).toBeNull();
    expect(cleared.json.active_prefill_tokens_threshold).toBe(1000);
    const bad = await post('/busy_threshold', { model: MODEL, active_decode_blocks_threshold: 1.5 });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatch(/between 0\.0 and 1\.0/);
    expect(
      (await post('/busy_threshold', { model: 'nope', active_decode_blocks_threshold: 0.5 })).status,
    ).toBe(404);
    expect((await post('/busy_threshold', '{oops')).status).toBe(422);
    await post('/busy_threshold', { model: MODEL, active_prefill_tokens_threshold: null });
  });

  it('an admission threshold of 0 prefill tokens makes a loaded worker busy: 503 with Retry-After', async () => {
    const one = await startFrontend(
      ['--router-mode', 'kv', '--mocker-workers', '1', '--router-event-threads', '1'],
      {
        embedded: { engine: { speedupRatio: 0.05 } },
      },
    );
    try {
      const set = await fetch(`${one.url}/busy_threshold`, {
        method: 'POST',
        body: JSON.stringify({ model: MODEL, active_prefill_tokens_threshold: 0 }),
      });
      expect(set.status).toBe(200);
      // The first request books its prompt as prefill load (> 0 tokens) on the only worker until its
      // first token, which a 20x slowed engine delays; the second finds every worker busy.
      const ac = new AbortController();
      const first = fetch(`${one.url}/v1/chat/completions`, {
        method: 'POST',
        body: JSON.stringify(chat({ stream: true })),
        signal: ac.signal,
      });
      await new Promise((r) => setTimeout(r, 50));
      const second = await fetch(`${one.url}/v1/chat/completions`, {
        method: 'POST',
        body: JSON.stringify(chat({})),
      });
      expect(second.status).toBe(503);
      expect(second.headers.get('retry-after')).toBe('1');
      expect(((await second.json()) as ErrBody).error.message).toBe(
        'All workers are busy, please retry later',
      );
      ac.abort();
      await first.catch(() => undefined);
    } finally {
      await one.close(0);
    }
  });
});

describe('path overrides', () => {
  it('DYN_HTTP_SVC_*_PATH_ENV move the routes', async () => {
    const o = await startFrontend(['--mocker-workers', '1'], {
      env: {
        DYN_HTTP_SVC_CHAT_PATH_ENV: '/api/chat',
        DYN_HTTP_SVC_MODELS_PATH_ENV: '/api/models',
        DYN_HTTP_SVC_HEALTH_PATH_ENV: '/hz',
        DYN_HTTP_SVC_METRICS_PATH_ENV: '/prom',
      },
    });
    try {
      const r = await fetch(`${o.url}/api/chat`, { method: 'POST', body: JSON.stringify(chat({})) });
      expect(r.status).toBe(200);
      expect(
        (await fetch(`${o.url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify(chat({})) }))
          .status,
      ).toBe(404);
      expect(((await (await fetch(`${o.url}/api/models`)).json()) as { data: unknown[] }).data).toHaveLength(
        1,
      );
      expect((await fetch(`${o.url}/hz`)).status).toBe(200);
      expect((await fetch(`${o.url}/health`)).status).toBe(404);
      expect(await (await fetch(`${o.url}/prom`)).text()).toContain('dynamo_frontend_requests_total');
    } finally {
      await o.close(0);
    }
  });
});

describe('metrics', () => {
  it('exposition has the request families with this traffic, and promtool check metrics passes', async () => {
    // 600 words span many 16-token blocks: the worker stores them and the index applies the events.
    await post(
      '/v1/chat/completions',
      chat({ max_tokens: 3, messages: [{ role: 'user', content: 'alpha beta gamma '.repeat(200) }] }),
    );
    await new Promise((r) => setTimeout(r, 100));
    const text = await (await fetch(`${fe.url}/metrics`)).text();
    expect(text).toMatch(
      /dynamo_frontend_requests_total\{model="mock-model",endpoint="chat_completions",request_type="unary",status="success",error_type=""\} [1-9]/,
    );
    expect(text).toMatch(
      /dynamo_frontend_requests_total\{model="__unknown__",endpoint="chat_completions",request_type="unary",status="error",error_type="not_found"\} 1/,
    );
    expect(text).toMatch(
      /dynamo_frontend_requests_total\{model="mock-model",endpoint="chat_completions",request_type="unary",status="error",error_type="validation"\} [1-9]/,
    );
    expect(text).toContain('dynamo_component_router_requests_total');
    expect(text).toContain('dynamo_router_overhead_total_ms_bucket');
    expect(text).toContain('dynamo_frontend_worker_active_decode_blocks');
    expect(text).toMatch(/dynamo_component_kv_cache_events_applied\{status="ok",event_type="stored"\} [1-9]/);
    expect(promtoolProblems(text)).toEqual([]);
  });

  it('--metrics-prefix renames the frontend request family only', async () => {
    const o = await startFrontend(['--mocker-workers', '1', '--metrics-prefix', 'acme']);
    try {
      const text = await (await fetch(`${o.url}/metrics`)).text();
      expect(text).toContain('acme_requests_total');
      expect(text).not.toContain('dynamo_frontend_requests_total');
      expect(text).toContain('dynamo_component_router_requests_total');
    } finally {
      await o.close(0);
    }
  });
});

describe('config', () => {
  it('--dump-config-to writes the resolved configuration', async () => {
    const { parseAppConfig } = await import('@kvrouter/config/cli');
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'kvr-fe-')), 'cfg.json');
    parseAppConfig(
      'frontend',
      ['--dump-config-to', file, '--router-mode', 'kv'],
      {},
      {
        info: { name: 'x', description: 'x' },
        isDirectory: () => true,
        writeFile: (p, t) => fs.writeFileSync(p, t),
      },
    );
    const dumped = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>;
    expect(dumped.router_mode).toBe('kv');
    expect(dumped.http_port).toBe(8000);
  });

  it('--decision-log writes sampled routing decisions as JSON lines (sample 1 = every one)', async () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'kvr-dl-')), 'decisions.jsonl');
    const o = await startFrontend([
      '--router-mode',
      'kv',
      '--router-event-threads',
      '1',
      '--mocker-workers',
      '2',
      '--decision-log',
      file,
      '--decision-log-sample',
      '1',
    ]);
    try {
      for (let i = 0; i < 3; i++)
        expect(
          (await fetch(`${o.url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify(chat({})) }))
            .status,
        ).toBe(200);
    } finally {
      await o.close(0);
    }
    const lines = fs.readFileSync(file, 'utf8').trim().split('\n');
    expect(lines).toHaveLength(3);
    for (const l of lines) expect(JSON.parse(l)).toBeTypeOf('object');
    // Never prompt text.
    expect(fs.readFileSync(file, 'utf8')).not.toContain('"hi"');
  });

  it('--router-min-initial-workers: 503 until that many workers were ready', async () => {
    const o = await startFrontend(['--mocker-workers', '1', '--router-min-initial-workers', '2']);
    try {
      const r = await fetch(`${o.url}/v1/chat/completions`, {
        method: 'POST',
        body: JSON.stringify(chat({})),
      });
      expect(r.status).toBe(503);
      expect(((await r.json()) as ErrBody).error.message).toMatch(/waiting for --router-min-initial-workers/);
    } finally {
      await o.close(0);
    }
  });
});
