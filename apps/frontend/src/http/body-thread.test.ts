/**
 * Large bodies parsed on the body thread give what inline parsing gives: the same value (u64 as
 * bigint, non-ASCII text, a leading byte-order mark dropped, invalid UTF-8 as U+FFFD), the same
 * 400 `invalid_json` naming `body`, and over HTTP the same OpenAI error bodies (malformed JSON, a
 * bad field found by validation after the body was parsed) and a served request, both with the
 * default (large bodies parsed inline from their bytes) and with `--http-body-thread-bytes`.
 */
import { KvrError } from '@kvrouter/protocols';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Frontend } from '../frontend.js';
import { startFrontend } from '../test-helpers.js';
import { BYTES_PARSE_MIN, parseOnBodyThread } from './body-thread.js';
import { parseBody } from './util.js';

/** ~`n` bytes of whitespace: JSON allows it between tokens, so any body can be made large. */
const pad = (n: number) => ' '.repeat(n);

describe('parseOnBodyThread', () => {
  it('gives the value inline parsing gives', async () => {
    const content = 'Grüße, 世界 — ';
    const text = `{"model":"m","messages":[{"role":"user","content":"${content.repeat(8000)}"}],"nvext":{"backend_instance_id":18446744073709551615}}${pad(10)}`;
    const bytes = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text, 'utf8')]);
    expect(bytes.length).toBeGreaterThan(BYTES_PARSE_MIN);
    const v = (await parseOnBodyThread(bytes)).value as {
      messages: { content: string }[];
      nvext: { backend_instance_id: bigint };
    };
    expect(v.nvext.backend_instance_id).toBe(18446744073709551615n);
    expect(v.messages[0]!.content).toBe(content.repeat(8000));
    expect(v).toEqual(parseBody(text));
  });

  it('decodes invalid UTF-8 to U+FFFD, as the inline decoder does', async () => {
    const bytes = Buffer.concat([
      Buffer.from('{"a":"x'),
      Buffer.from([0xff, 0xc3]),
      Buffer.from(`y"}${pad(70_000)}`),
    ]);
    const v = (await parseOnBodyThread(bytes)).value as { a: string };
    expect(v.a).toBe('x\ufffd\ufffdy');
  });

  it('gives a value nested too deep to send back from the thread, and fails no other body', async () => {
    // 40 000 nested arrays: JSON.parse accepts them; structured clone overflows its stack.
    const depth = 40_000;
    const deep = Buffer.from(`{"model":"m","messages":${'['.repeat(depth)}${']'.repeat(depth)}}`);
    const other = Buffer.from(`{"a":1}${pad(70_000)}`);
    const [d, o] = await Promise.all([parseOnBodyThread(deep), parseOnBodyThread(other)]);
    let v = (d.value as { messages: unknown }).messages;
    let n = 0;
    while (Array.isArray(v) && v.length > 0) {
      v = v[0];
      n++;
    }
    expect([n + 1, Array.isArray(v)]).toEqual([depth, true]);
    expect(o.value).toEqual({ a: 1 });
    // And the next large body.
    expect((await parseOnBodyThread(Buffer.from(`[2]${pad(70_000)}`))).value).toEqual([2]);
  });

  it('fails like parseBody: 400 invalid_json naming the field body', async () => {
    const text = `{"model": "m", "messages": [${pad(70_000)}`;
    let inline: unknown;
    try {
      parseBody(text);
    } catch (e) {
      inline = e;
    }
    const threaded = await parseOnBodyThread(Buffer.from(text)).catch((e: unknown) => e);
    expect(threaded).toBeInstanceOf(KvrError);
    const k = threaded as KvrError;
    expect([k.code, k.status, k.detail?.field]).toEqual(['invalid_json', 400, 'body']);
    expect(k.message).toBe((inline as KvrError).message);
    expect(k.message).toMatch(/^request body is not valid JSON: /);
  });
});

describe.each([
  ['parsed inline from their bytes (default)', []],
  ['parsed on the body thread', ['--http-body-thread-bytes', String(BYTES_PARSE_MIN)]],
])('large bodies over HTTP, %s', (_, flags) => {
  let fe: Frontend;
  beforeAll(async () => {
    fe = await startFrontend(['--router-mode', 'kv', '--router-event-threads', '1', ...flags]);
  });
  afterAll(async () => {
    await fe.close(0);
  });
  const post = async (body: string) => {
    const r = await fetch(`${fe.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    return {
      status: r.status,
      json: (await r.json()) as { object?: string; error: { param?: string; message: string } },
    };
  };
  const chat = { model: 'mock-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 };

  it('serves a large valid body', async () => {
    const r = await post(JSON.stringify(chat) + pad(BYTES_PARSE_MIN));
    expect(r.status).toBe(200);
    expect(r.json.object).toBe('chat.completion');
  });

  it('answers malformed large JSON with 400 naming body', async () => {
    const r = await post(`{"model": "mock-model", "messages": [${pad(BYTES_PARSE_MIN)}`);
    expect(r.status).toBe(400);
    expect(r.json.error.param).toBe('body');
    expect(r.json.error.message).toMatch(/not valid JSON/);
  });

  it('answers a bad field of a large body with 400 naming the field', async () => {
    const r = await post(JSON.stringify({ ...chat, temperature: 'hot' }) + pad(BYTES_PARSE_MIN));
    expect(r.status).toBe(400);
    expect(r.json.error.param).toBe('temperature');
  });
});
