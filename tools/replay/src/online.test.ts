import { TokenSynth, buildReport, type TraceRow } from '@kvrouter/sim';
import { describe, expect, it } from 'vitest';
import { readStream, runOnline } from './online.js';

const enc = new TextEncoder();
async function* pieces(text: string, size: number): AsyncIterable<Uint8Array> {
  const b = enc.encode(text);
  for (let i = 0; i < b.length; i += size) yield b.subarray(i, i + size);
}

const sse = (...events: unknown[]): string =>
  events.map((e) => `data: ${typeof e === 'string' ? e : JSON.stringify(e)}\n\n`).join('');
const delta = (content: string) => ({ choices: [{ index: 0, delta: { content } }] });

describe('readStream', () => {
  it('parses SSE split anywhere, timing the first output chunk and taking usage when sent', async () => {
    let t = 100;
    const body = sse(
      { choices: [{ index: 0, delta: { role: 'assistant' } }] }, // no output yet
      delta('a'),
      delta('b'),
      { choices: [{ index: 0, delta: { content: 'c' }, finish_reason: 'length' }] },
      {
        choices: [],
        usage: { prompt_tokens: 10, completion_tokens: 3, prompt_tokens_details: { cached_tokens: 8 } },
      },
      '[DONE]',
    );
    const clock = () => (t += 1);
    const s = await readStream(pieces(body, 7), clock, 100);
    expect(s.tokens).toBe(3);
    expect(s.cachedTokens).toBe(8);
    expect(s.firstTokenMs).toBeGreaterThan(0);
    expect(s.endMs).toBeGreaterThan(s.firstTokenMs);
  });

  it('counts output chunks without usage and rejects error events and empty streams', async () => {
    const s = await readStream(pieces(sse(delta('x'), delta('y'), '[DONE]'), 5), () => 0, 0);
    expect(s).toMatchObject({ tokens: 2, cachedTokens: null });
    await expect(readStream(pieces(sse({ error: { message: 'boom' } }), 64), () => 0, 0)).rejects.toThrow(
      /boom/,
    );
    await expect(readStream(pieces('', 1), () => 0, 0)).rejects.toThrow(/without output/);
  });
});

describe('runOnline', () => {
  it('sends each row as a streaming chat completion with the §18 tokens, sessions in order', async () => {
    const rows: TraceRow[] = [
      { timestamp: 0, input_length: 20, output_length: 2, hash_ids: [1, 2], index: 0, session_id: 's' },
      {
        timestamp: 0,
        input_length: 30,
        output_length: 3,
        hash_ids: [1, 2, 3, 4],
        index: 1,
        session_id: 's',
        delay: 1,
      },
      { timestamp: 4, input_length: 5, output_length: 1, hash_ids: [], index: 2 },
    ];
    const synth = new TokenSynth({ traceBlockSize: 8 });
    const log: string[] = [];
    const fake = (async (url: string, init?: { body: string }): Promise<Response> => {
      const u = url;
      if (u.endsWith('/v1/models')) return Response.json({ data: [{ id: 'm1' }] });
      const body = JSON.parse(init!.body) as {
        model: string;
        stream: boolean;
        max_tokens: number;
        nvext: { token_data: number[] };
      };
      const k = rows.findIndex((r) => r.input_length === body.nvext.token_data.length);
      expect(u).toBe('http://x:1/v1/chat/completions');
      expect(body.model).toBe('m1');
      expect(body.stream).toBe(true);
      expect(body.max_tokens).toBe(rows[k]!.output_length);
      expect(body.nvext.token_data).toEqual(Array.from(synth.promptTokens(rows[k]!)));
      log.push(`start ${k}`);
      const text = sse(
        ...Array.from({ length: rows[k]!.output_length }, () => delta('t')),
        {
          choices: [],
          usage: { completion_tokens: rows[k]!.output_length, prompt_tokens_details: { cached_tokens: k } },
        },
        '[DONE]',
      );
      return new Response(
        new ReadableStream({
          start(c) {
            c.enqueue(enc.encode(text));
            log.push(`end ${k}`);
            c.close();
          },
        }),
        { status: 200 },
      );
    }) as unknown as typeof fetch;
    const data = await runOnline(rows, {
      url: 'http://x:1/',
      traceBlockSize: 8,
      arrivalSpeedupRatio: 1,
      fetchImpl: fake,
    });
    expect(log.indexOf('start 1')).toBeGreaterThan(log.indexOf('end 0'));
    expect(Array.from(data.requests.status)).toEqual([1, 1, 1]);
    expect(Array.from(data.requests.tokens)).toEqual([2, 3, 1]);
    expect(data.requests.arrival[1]).toBeGreaterThanOrEqual(data.requests.finish[0]! + 1);
    const r = buildReport(data, null);
    expect(r.policy).toBe('online');
    expect(r.requests.finished).toBe(3);
    // Cached tokens as the server reported them: (0 + 1 + 2) / (20 + 30 + 5).
    expect(r.cache.hit_rate).toBeCloseTo(3 / 55, 6);
  });

  it('counts HTTP errors as rejections', async () => {
    const fake = (async () => new Response('overloaded', { status: 503 })) as typeof fetch;
    const data = await runOnline(
      [{ timestamp: 0, input_length: 3, output_length: 1, hash_ids: [], index: 0 }],
      {
        url: 'http://x:1',
        model: 'm',
        traceBlockSize: 8,
        arrivalSpeedupRatio: 1,
        fetchImpl: fake,
      },
    );
    expect(data.requests.status[0]).toBe(2);
    expect(data.rejections.http_error).toEqual({ count: 1, example: 'HTTP 503: overloaded' });
  });
});
