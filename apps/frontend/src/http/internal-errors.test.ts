/**
 * No silent 500s, and the --model-path regression behind them: with a real Hugging Face tokenizer
 * (Qwen3's tokenizer.json) every chat and completion request used to fail with 500 and log nothing
 * (the streaming detokenizer called tokenizers.js `decode([])`). Now they succeed; an internal error
 * is logged once with its request id, route and stack, answered with that id in `x-request-id`, and
 * counted in dynamo_frontend_internal_errors_total{route}.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parityModelDir } from '@kvrouter/testkit/parity';
import type { Frontend } from '../frontend.js';
import type { Logger } from '../models.js';
import { startFrontend } from '../test-helpers.js';

const lines: string[] = [];
const log: Logger = {
  info: (m) => lines.push(`info ${m}`),
  warn: (m) => lines.push(`warn ${m}`),
  error: (m) => lines.push(`error ${m}`),
};

let fe: Frontend;
let client: OpenAI;
const MODEL = 'qwen3';

beforeAll(async () => {
  fe = await startFrontend(['--model-path', parityModelDir('qwen3'), '--model-name', MODEL], { log });
  client = new OpenAI({ baseURL: `${fe.url}/v1`, apiKey: 'unused', maxRetries: 0 });
});
afterAll(async () => {
  await fe.close(0);
});

async function internalErrors(route: string): Promise<number> {
  const text = await (await fetch(`${fe.url}/metrics`)).text();
  const m = new RegExp(
    `^dynamo_frontend_internal_errors_total\\{route="${route.replace(/\//g, '\\/')}"\\} (\\d+)`,
    'm',
  ).exec(text);
  return m ? Number(m[1]) : 0;
}

describe('--model-path with a real tokenizer', () => {
  it('chat and completions succeed, unary and streaming', async () => {
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: '你好 👋' }],
      max_tokens: 6,
    });
    expect(r.choices[0]!.finish_reason).toBe('length');
    expect(r.usage!.completion_tokens).toBe(6);
    const s = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Stream, please.' }],
      max_tokens: 5,
      stream: true,
    });
    let finish: string | null = null;
    for await (const c of s) finish = c.choices[0]?.finish_reason ?? finish;
    expect(finish).toBe('length');
    const c = await client.completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 4 });
    expect(c.usage!.completion_tokens).toBe(4);
    const cs = await client.completions.create({ model: MODEL, prompt: 'Once', max_tokens: 3, stream: true });
    for await (const _ of cs) void _;
    expect(lines.filter((l) => l.startsWith('error'))).toEqual([]);
    expect(await internalErrors('/v1/chat/completions')).toBe(0);
  });
});

describe('internal errors', () => {
  it('a 500 before the response is logged once with request id, route and stack, and counted', async () => {
    const svc = fe.service as unknown as { start: (...a: unknown[]) => Promise<unknown> };
    const orig = svc.start;
    svc.start = () => Promise.reject(new TypeError('boom: a bug in the pipeline'));
    try {
      const before = await internalErrors('/v1/chat/completions');
      const res = await fetch(`${fe.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-request-id': 'req-123' },
        body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
      });
      expect(res.status).toBe(500);
      expect(res.headers.get('x-request-id')).toBe('req-123');
      const body = (await res.json()) as { error: { message: string; code: string } };
      // The client sees no internals.
      expect(body.error).toMatchObject({ message: 'internal server error', code: 'internal' });
      const logged = lines.filter((l) => l.includes('req-123'));
      expect(logged).toHaveLength(1);
      expect(logged[0]).toMatch(
        /^error internal error: request req-123 on \/v1\/chat\/completions: TypeError: boom/,
      );
      expect(logged[0]).toContain('internal-errors.test.ts'); // the stack
      expect(await internalErrors('/v1/chat/completions')).toBe(before + 1);

      // Without a client id one is made up, and the response says which.
      const res2 = await fetch(`${fe.url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL, prompt: 'x', max_tokens: 2 }),
      });
      expect(res2.status).toBe(500);
      const id = res2.headers.get('x-request-id')!;
      expect(id).toMatch(/^[0-9a-f-]{36}$/);
      expect(lines.filter((l) => l.includes(id))).toHaveLength(1);
      expect(await internalErrors('/v1/completions')).toBe(1);
    } finally {
      svc.start = orig;
    }
  });

  it('a failure mid-stream is logged and counted too; deliberate errors (400, 404) are not', async () => {
    const svc = fe.service as unknown as { start: (...a: unknown[]) => Promise<{ deltas: AsyncGenerator }> };
    const orig = svc.start.bind(svc);
    svc.start = async (...a: unknown[]) => {
      const c = await orig(...a);
      const inner = c.deltas;
      c.deltas = (async function* () {
        yield* [(await inner.next()).value];
        throw new RangeError('broke after the first delta');
      })() as AsyncGenerator;
      return c;
    };
    try {
      const before = await internalErrors('/v1/chat/completions');
      const res = await fetch(`${fe.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-request-id': 'req-stream' },
        body: JSON.stringify({
          model: MODEL,
          messages: [{ role: 'user', content: 'hi' }],
          max_tokens: 8,
          stream: true,
        }),
      });
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(text).toContain('"internal server error"');
      expect(lines.filter((l) => l.includes('req-stream') && l.includes('RangeError'))).toHaveLength(1);
      expect(await internalErrors('/v1/chat/completions')).toBe(before + 1);
    } finally {
      svc.start = orig;
    }
    const n = lines.length;
    await fetch(`${fe.url}/v1/chat/completions`, { method: 'POST', body: '{"model": 1}' });
    await fetch(`${fe.url}/v1/nothing-here`);
    expect(lines.slice(n).filter((l) => l.startsWith('error'))).toEqual([]);
  });
});
