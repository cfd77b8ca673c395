/**
 * EngineClient against a scripted HTTP engine: what it sends, how SSE chunks become items, and the
 * error codes migration depends on.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { isMigratable } from '@kvrouter/runtime';
import type { GenerateItem, ParsedGenerate } from '@kvrouter/protocols';
import { EngineClient } from './engine-client.js';

type Script = (req: IncomingMessage, body: Record<string, unknown>, res: ServerResponse) => void;
const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

async function engine(script: Script): Promise<string> {
  const s = createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    req.on('end', () => script(req, JSON.parse(raw) as Record<string, unknown>, res));
  });
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
}

const req: ParsedGenerate = {
  requestId: 'r1',
  model: 'x',
  tokenIds: Uint32Array.from([5, 6, 7]),
  dpRank: 1,
  maxTokens: 4,
  stopTokenIds: new Set([2]),
};

const chunk = (ids: number[], fin: string | null = null) =>
  `data: ${JSON.stringify({ choices: [{ index: 0, text: 'x', token_ids: ids, finish_reason: fin }] })}\n\n`;

async function collect(
  c: EngineClient,
  signal = new AbortController().signal,
): Promise<{ items: GenerateItem[]; err: unknown }> {
  const items: GenerateItem[] = [];
  try {
    for await (const it of c.generate(req, signal)) items.push(it);
    return { items, err: null };
  } catch (err) {
    return { items, err };
  }
}

describe('EngineClient', () => {
  it('sends token ids, limits and the dp rank; maps chunks to items and finish reasons', async () => {
    let seen: { body: Record<string, unknown>; rank: unknown } | null = null;
    const url = await engine((r, body, res) => {
      seen = { body, rank: r.headers['x-data-parallel-rank'] };
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      // vLLM's first chunk may carry only the prompt ids; the usage chunk has no choices.
      res.write(
        `data: ${JSON.stringify({ choices: [{ index: 0, text: '', token_ids: [], prompt_token_ids: [5, 6, 7], finish_reason: null }] })}\n\n`,
      );
      res.write(chunk([11, 12]));
      res.write(chunk([13], 'stop'));
      res.write(`data: ${JSON.stringify({ choices: [], usage: { completion_tokens: 3 } })}\n\n`);
      res.end('data: [DONE]\n\n');
    });
    const { items, err } = await collect(new EngineClient({ baseUrl: url, model: 'served' }));
    expect(err).toBeNull();
    expect(items).toEqual([{ token_ids: [11, 12] }, { token_ids: [13], finish_reason: 'stop' }]);
    expect(seen).toEqual({
      rank: '1',
      body: {
        model: 'served',
        prompt: [5, 6, 7],
        max_tokens: 4,
        stream: true,
        return_token_ids: true,
        stop_token_ids: [2],
        ignore_eos: true,
      },
    });
  });

  it('without max_tokens the request may run to the end of the context (max_model_len − prompt)', async () => {
    const bodies: Array<Record<string, unknown>> = [];
    const url = await engine((_r, body, res) => {
      bodies.push(body);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(`${chunk([1], 'length')}data: [DONE]\n\n`);
    });
    const open = { ...req, maxTokens: null };
    const run = async (c: EngineClient) => {
      for await (const it of c.generate(open, new AbortController().signal)) void it;
    };
    await run(new EngineClient({ baseUrl: url, model: 'm', maxModelLen: 1000 }));
    await run(new EngineClient({ baseUrl: url, model: 'm' }));
    // 1000 − 3 prompt tokens; unknown context length → the engine's own default.
    expect(bodies.map((b) => b.max_tokens)).toEqual([997, undefined]);
  });

  it('an engine that is not there: engine_shutdown (migratable)', async () => {
    const url = await engine(() => undefined);
    const s = servers.pop()!;
    await new Promise((r) => s.close(r));
    const { err } = await collect(new EngineClient({ baseUrl: url, model: 'm' }));
    expect((err as { code: string }).code).toBe('engine_shutdown');
    expect(isMigratable(err)).toBe(true);
  });

  it('a stream cut before its finish reason: disconnected (migratable), after the items already sent', async () => {
    const url = await engine((_r, _b, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(chunk([1]));
      setTimeout(() => res.socket?.destroy(), 20);
    });
    const { items, err } = await collect(new EngineClient({ baseUrl: url, model: 'm' }));
    expect(items).toEqual([{ token_ids: [1] }]);
    expect((err as { code: string }).code).toBe('disconnected');
    expect(isMigratable(err)).toBe(true);
  });

  it("the engine's refusal (4xx) keeps its type and is not migratable; 503 is engine_shutdown", async () => {
    const url = await engine((_r, _b, res) => {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({ error: { message: 'prompt too long', type: 'request_too_large', code: 400 } }),
      );
    });
    const { err } = await collect(new EngineClient({ baseUrl: url, model: 'm' }));
    expect(err).toMatchObject({ code: 'request_too_large', status: 400, message: 'engine: prompt too long' });
    expect(isMigratable(err)).toBe(false);
    const url2 = await engine((_r, _b, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(
        `data: ${JSON.stringify({ error: { message: 'shutting down', type: 'engine_shutdown', code: 503 } })}\n\ndata: [DONE]\n\n`,
      );
    });
    expect(
      ((await collect(new EngineClient({ baseUrl: url2, model: 'm' }))).err as { code: string }).code,
    ).toBe('engine_shutdown');
  });

  it('an engine that ignores return_token_ids is a protocol error naming the requirement', async () => {
    const url = await engine((_r, _b, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(`data: ${JSON.stringify({ choices: [{ index: 0, text: 'hi', finish_reason: null }] })}\n\n`);
    });
    const { err } = await collect(new EngineClient({ baseUrl: url, model: 'm' }));
    expect(err).toMatchObject({ code: 'protocol_error' });
    expect((err as Error).message).toMatch(/return_token_ids/);
  });

  it('cancelling ends the HTTP request (the engine sees its connection close)', async () => {
    let closed!: () => void;
    const engineSawClose = new Promise<void>((r) => (closed = r));
    const url = await engine((_r, _b, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(chunk([1]));
      res.once('close', closed);
    });
    const ac = new AbortController();
    const it = new EngineClient({ baseUrl: url, model: 'm' }).generate(req, ac.signal);
    expect((await it.next()).value).toEqual({ token_ids: [1] });
    ac.abort();
    await expect(it.next()).rejects.toMatchObject({ code: 'cancelled' });
    await engineSawClose;
  });
});

describe('EngineClient: the request surface in vLLM names', () => {
  const extras: ParsedGenerate['extras'] = {
    samplingOptions: {
      temperature: 0.5,
      seed: 3,
      logit_bias: { '9': -5 },
      guided_decoding: { regex: 'a+' },
      vllm_xargs: { k: 1 },
    },
    minTokens: 2,
    logprobs: 1,
    images: [{ url: 'https://x.test/i.png' }],
    ignoreEos: false,
  };

  it('forwards sampling, guided decoding, min_tokens, logprobs and images; logprobs come back by id', async () => {
    let seen: Record<string, unknown> = {};
    const url = await engine((_r, body, res) => {
      seen = body;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const lp = {
        tokens: ['token_id:11', 'token_id:12'],
        token_logprobs: [-0.25, -1.5],
        top_logprobs: [
          { 'token_id:11': -0.25, 'token_id:40': -2 },
          { 'token_id:41': -1, 'token_id:12': -1.5 },
        ],
        text_offset: [0, 1],
      };
      res.end(
        `data: ${JSON.stringify({ choices: [{ index: 0, text: 'x', token_ids: [11, 12], logprobs: lp, finish_reason: 'stop' }] })}\n\ndata: [DONE]\n\n`,
      );
    });
    const c = new EngineClient({ baseUrl: url, model: 'm' });
    const items: GenerateItem[] = [];
    for await (const it of c.generate({ ...req, extras }, new AbortController().signal)) items.push(it);
    expect(seen).toMatchObject({
      temperature: 0.5,
      seed: 3,
      logit_bias: { '9': -5 },
      structured_outputs: { regex: 'a+' },
      vllm_xargs: { k: 1 },
      min_tokens: 2,
      logprobs: 1,
      return_tokens_as_token_ids: true,
      multi_modal_data: { image_url: [{ url: 'https://x.test/i.png' }] },
    });
    expect(items).toEqual([
      {
        token_ids: [11, 12],
        finish_reason: 'stop',
        log_probs: [-0.25, -1.5],
        top_logprobs: [
          [
            { token_id: 11, logprob: -0.25 },
            { token_id: 40, logprob: -2 },
          ],
          [
            { token_id: 41, logprob: -1 },
            { token_id: 12, logprob: -1.5 },
          ],
        ],
      },
    ]);
  });

  it('a sampling option the adapter does not know is a 400 naming it, before anything is sent', async () => {
    let calls = 0;
    const url = await engine((_r, _b, res) => {
      calls++;
      res.end();
    });
    const c = new EngineClient({ baseUrl: url, model: 'm' });
    const bad = { ...req, extras: { ...extras, samplingOptions: { mirostat: 1 } } };
    await expect(c.generate(bad, new AbortController().signal).next()).rejects.toMatchObject({
      status: 400,
      detail: { field: 'sampling_options.mirostat' },
    });
    expect(calls).toBe(0);
  });
});

describe('EngineClient.embed (--model-type embedding)', () => {
  it('posts token-id inputs to /v1/embeddings (float) and returns the vectors in input order', async () => {
    let seen: { path?: string; body?: Record<string, unknown> } = {};
    const url = await engine((r, body, res) => {
      seen = { path: r.url, body };
      res.writeHead(200, { 'content-type': 'application/json' });
      // Out of order on purpose: the client orders by index.
      res.end(
        JSON.stringify({
          object: 'list',
          data: [
            { object: 'embedding', index: 1, embedding: [0, 1] },
            { object: 'embedding', index: 0, embedding: [0.6, 0.8] },
          ],
          usage: { prompt_tokens: 5, total_tokens: 5 },
        }),
      );
    });
    const c = new EngineClient({ baseUrl: url, model: 'e5' });
    const r = await c.embed(
      {
        request_id: 'q',
        model: 'e5',
        inputs: [
          [1, 2, 3],
          [4, 5],
        ],
      },
      new AbortController().signal,
    );
    expect(seen.path).toBe('/v1/embeddings');
    expect(seen.body).toEqual({
      model: 'e5',
      input: [
        [1, 2, 3],
        [4, 5],
      ],
      encoding_format: 'float',
    });
    expect(r).toEqual({
      embeddings: [
        [0.6, 0.8],
        [0, 1],
      ],
      prompt_tokens: 5,
    });
  });

  it("the engine's 400 stays a 400 with its message; a short answer is engine_error", async () => {
    const bad = await engine((_r, _b, res) => {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          error: { message: 'This model does not support embeddings', type: 'BadRequestError', code: 400 },
        }),
      );
    });
    const e = await new EngineClient({ baseUrl: bad, model: 'm' })
      .embed({ request_id: 'q', model: 'm', inputs: [[1]] }, new AbortController().signal)
      .then(
        () => null,
        (x: unknown) => x as { status: number; message: string },
      );
    expect(e!.status).toBe(400);
    expect(e!.message).toMatch(/does not support embeddings/);
    const short = await engine((_r, _b, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ data: [{ index: 0, embedding: [1] }] }));
    });
    const s = await new EngineClient({ baseUrl: short, model: 'm' })
      .embed({ request_id: 'q', model: 'm', inputs: [[1], [2]] }, new AbortController().signal)
      .then(
        () => null,
        (x: unknown) => x as { code: string; status: number },
      );
    expect([s!.code, s!.status]).toEqual(['engine_error', 502]);
  });
});
