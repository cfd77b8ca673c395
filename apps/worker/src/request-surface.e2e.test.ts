/**
 * The request surface end to end with the official openai client: frontend (cl100k, kv routing)
 * → two worker adapters → two vLLM-compatible mocker engines (one process), each its own process
 * as deployed, meeting through file discovery and the ZMQ event plane. The adapters publish
 * `--dyn-tool-call-parser hermes --dyn-reasoning-parser qwen3` in their cards; the frontend parses
 * with them. Engines answer with given ids through the test hook
 * `vllm_xargs.mock_output_token_ids` (cl100k ids of the text the test wants back), and
 * `GET /debug/requests` shows what reached each engine.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as cl100k from 'gpt-tokenizer/encoding/cl100k_base';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killAll, line, listening, start, until } from './test-procs.js';

const MODEL = 'mock-vllm';

const ids = (text: string): number[] => cl100k.encode(text);
/** Body fields the openai client's types do not know (it sends them as given). */
const extra = (o: Record<string, unknown>) => o as object;

let url = '';
let client: OpenAI;
const engines: string[] = [];

/** Every body an engine received whose prompt contains `marker`'s ids, over both engines. */
async function received(marker: string): Promise<{ engine: number; body: Record<string, unknown> }[]> {
  const m = ids(marker);
  const out: { engine: number; body: Record<string, unknown> }[] = [];
  for (let e = 0; e < engines.length; e++) {
    const r = (await (await fetch(`${engines[e]}/debug/requests`)).json()) as {
      requests: Record<string, unknown>[];
    };
    for (const b of r.requests) {
      const p = (b.prompt as number[]).join(',');
      if (p.includes(m.join(','))) out.push({ engine: e, body: b });
    }
  }
  return out;
}

const WEATHER = {
  type: 'function' as const,
  function: {
    name: 'get_weather',
    description: 'Weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};

beforeAll(async () => {
  const env = { DYN_FILE_KV: mkdtempSync(join(tmpdir(), 'kvr-surface-')) };
  const fe = start(
    'frontend/src/main.ts',
    ['--discovery-backend', 'file', '--router-mode', 'kv', '--http-host', '127.0.0.1', '--http-port', '0'],
    env,
  );
  const feUrl = listening(fe);
  const mocker = start(
    'mocker/src/main.ts',
    [
      ...['--model-path', MODEL, '--num-workers', '2', '--http-host', '127.0.0.1', '--http-ports', '0,0'],
      ...['--zmq-kv-events-ports', '0,0', '--zmq-replay-ports', '0,0'],
      ...['--block-size', '16', '--num-gpu-blocks-override', '2048', '--speedup-ratio', '10'],
      ...['--lora-names', 'sql-adapter'],
    ],
    {},
  );
  const es = (
    JSON.parse(await line(mocker, /^\{"engines"/, 'mocker')) as {
      engines: Array<{ http: string; kv_events: string[]; replay: string[] }>;
    }
  ).engines;
  await Promise.all(
    es.map(async (e) => {
      engines.push(e.http);
      const w = start(
        'worker/src/main.ts',
        [
          ...['--engine-url', e.http, '--block-size', '16', '--total-kv-blocks', '2048'],
          ...['--kv-events-endpoint', e.kv_events[0]!, '--kv-events-replay-endpoint', e.replay[0]!],
          ...[
            '--discovery-backend',
            'file',
            '--dyn-tool-call-parser',
            'hermes',
            '--dyn-reasoning-parser',
            'qwen3',
          ],
        ],
        env,
      );
      await line(w, /^\{"instance_id"/, 'worker');
    }),
  );
  engines.sort((a, b) => es.findIndex((e) => e.http === a) - es.findIndex((e) => e.http === b));
  url = await feUrl;
  client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 });
  await until<{ instances: unknown[] }>(
    `${url}/health`,
    (b) => b.instances.length >= 2,
    'saw both workers',
    60_000,
  );
}, 180_000);

afterAll(() => {
  killAll();
});

describe('request surface: openai client → frontend → worker adapters → vLLM-compatible engines', () => {
  it('models.retrieve: the served model; an unknown id is a 404 in OpenAI form', async () => {
    const m = await client.models.retrieve(MODEL);
    expect(m).toMatchObject({ id: MODEL, object: 'model', owned_by: 'kvrouter' });
    const err = await client.models.retrieve('no-such-model').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect((err as InstanceType<typeof OpenAI.NotFoundError>).error).toMatchObject({
      code: 'model_not_found',
    });
  });

  const CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';

  it('tool call, unary: tool_calls, content null, finish_reason tool_calls', async () => {
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Weather in Paris? (unary tool call)' }],
      tools: [WEATHER],
      max_tokens: 64,
      ...extra({ vllm_xargs: { mock_output_token_ids: ids(CALL) } }),
    });
    const c = r.choices[0]!;
    expect(c.finish_reason).toBe('tool_calls');
    expect(c.message.content).toBeNull();
    expect(c.message.tool_calls).toHaveLength(1);
    const t = c.message.tool_calls![0]! as {
      id: string;
      type: string;
      function: { name: string; arguments: string };
    };
    expect(t.type).toBe('function');
    expect(t.id).toMatch(/^call_/);
    expect(t.function).toEqual({ name: 'get_weather', arguments: '{"city": "Paris"}' });
    expect(JSON.parse(t.function.arguments)).toEqual({ city: 'Paris' });
  });

  it('tool call, streaming: id/type/name on the first delta only, argument deltas concatenate', async () => {
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Weather in Paris? (streamed tool call)' }],
      tools: [WEATHER],
      stream: true,
      max_tokens: 64,
      ...extra({ vllm_xargs: { mock_output_token_ids: ids(CALL) } }),
    });
    const deltas: {
      index: number;
      id?: string;
      type?: string;
      function?: { name?: string; arguments?: string };
    }[] = [];
    let finish: string | null = null;
    let content = '';
    for await (const ch of stream) {
      const c = ch.choices[0];
      if (!c) continue;
      for (const t of c.delta.tool_calls ?? []) deltas.push(t);
      if (c.delta.content) content += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
    expect(finish).toBe('tool_calls');
    expect(content).toBe('');
    expect(deltas[0]).toMatchObject({ index: 0, type: 'function', function: { name: 'get_weather' } });
    expect(deltas[0]!.id).toMatch(/^call_/);
    expect(deltas.slice(1).every((d) => d.id === undefined && d.function?.name === undefined)).toBe(true);
    expect(deltas.map((d) => d.function?.arguments ?? '').join('')).toBe('{"city": "Paris"}');
    // How many argument deltas there are depends on how the engine's tokens batch on the way (the
    // parser tests check piece-by-piece release); here: they concatenate to the arguments.
  });

  const THINK = '<think>The user greets me.</think>\n\nHello!';

  it('reasoning (qwen3 parser from the card): reasoning_content apart from content, unary and streaming', async () => {
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Hi (reasoning)' }],
      max_tokens: 64,
      ...extra({ vllm_xargs: { mock_output_token_ids: ids(THINK) } }),
    });
    const m = r.choices[0]!.message as { content: string; reasoning_content?: string };
    expect(m.reasoning_content).toBe('The user greets me.');
    expect(m.content).toBe('Hello!');
    expect(r.choices[0]!.finish_reason).toBe('stop');
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Hi (streamed reasoning)' }],
      max_tokens: 64,
      stream: true,
      ...extra({ vllm_xargs: { mock_output_token_ids: ids(THINK) } }),
    });
    let reasoning = '';
    let content = '';
    let reasoningDeltas = 0;
    for await (const ch of stream) {
      const d = ch.choices[0]?.delta as { content?: string; reasoning_content?: string } | undefined;
      if (d?.reasoning_content) {
        reasoning += d.reasoning_content;
        reasoningDeltas++;
      }
      if (d?.content) content += d.content;
    }
    expect(reasoning).toBe('The user greets me.');
    expect(content).toBe('Hello!');
    expect(reasoningDeltas).toBeGreaterThan(0);
  });

  it('tool_choice named: the engine is guided by the function schema; the answer is its arguments', async () => {
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Weather in Rome? (named tool choice)' }],
      tools: [WEATHER],
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      max_tokens: 32,
      ...extra({ vllm_xargs: { mock_output_token_ids: ids('{"city": "Rome"}') } }),
    });
    const t = r.choices[0]!.message.tool_calls![0]! as { function: { name: string; arguments: string } };
    expect(t.function).toEqual({ name: 'get_weather', arguments: '{"city": "Rome"}' });
    const [got] = await received('Weather in Rome? (named tool choice)');
    expect(got!.body.response_format).toEqual({
      type: 'json_schema',
      json_schema: { name: 'schema', schema: WEATHER.function.parameters },
    });
  });

  it('response_format json_schema and json_object reach the engine', async () => {
    const schema = { type: 'object', properties: { a: { type: 'integer' } } };
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'JSON please (schema)' }],
      response_format: { type: 'json_schema', json_schema: { name: 'thing', schema } },
      max_tokens: 16,
      ...extra({ vllm_xargs: { mock_output_token_ids: ids('{"a": 1}') } }),
    });
    expect(JSON.parse(r.choices[0]!.message.content!)).toEqual({ a: 1 });
    expect((await received('JSON please (schema)'))[0]!.body.response_format).toEqual({
      type: 'json_schema',
      json_schema: { name: 'schema', schema },
    });
    await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'JSON please (object)' }],
      response_format: { type: 'json_object' },
      max_tokens: 4,
    });
    expect((await received('JSON please (object)'))[0]!.body.response_format).toEqual({
      type: 'json_object',
    });
  });

  it('n = 2: two choices, both on the engine that holds the prompt, seeds seed and seed + 1', async () => {
    const prompt = 'Two answers please: ' + 'shared prefix words '.repeat(40);
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: prompt }],
      n: 2,
      seed: 7,
      max_tokens: 3,
    });
    expect(r.choices.map((c) => c.index)).toEqual([0, 1]);
    expect(r.usage!.completion_tokens).toBe(6);
    const got = await received('Two answers please:');
    expect(got).toHaveLength(2);
    expect(got[0]!.engine).toBe(got[1]!.engine);
    expect(got.map((g) => g.body.seed).sort()).toEqual([7, 8]);
  });

  it('logprobs: chat top_logprobs and completions logprobs in OpenAI form, values from the synthetic formula', async () => {
    const out = ids(' alpha beta gamma');
    // The mocker's synthetic log probability of id t at position p (extras.ts), worked out here:
    // h = (imul(t ^ 0x9e3779b9, 0x85ebca6b) + imul(p, 0xc2b2ae35)) >>> 0; logprob = -(h mod 3000) / 1000.
    const lp = (t: number, p: number) =>
      -((((Math.imul(t ^ 0x9e3779b9, 0x85ebca6b) + Math.imul(p, 0xc2b2ae35)) >>> 0) % 3000) / 1000);
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'logprobs (chat)' }],
      logprobs: true,
      top_logprobs: 2,
      max_tokens: 8,
      ...extra({ vllm_xargs: { mock_output_token_ids: out } }),
    });
    const content = r.choices[0]!.logprobs!.content!;
    expect(content.map((c) => c.token)).toEqual(out.map((t) => cl100k.decode([t])));
    expect(content.map((c) => c.logprob)).toEqual(out.map((t, p) => lp(t, p)));
    for (const [p, c] of content.entries()) {
      expect(c.bytes).toEqual(Array.from(Buffer.from(c.token)));
      expect(c.top_logprobs).toHaveLength(2);
      expect(c.top_logprobs[0]).toMatchObject({ token: c.token, logprob: lp(out[p]!, p) });
      expect(c.top_logprobs[1]!.logprob).toBeCloseTo(lp(out[p]!, p) - 0.5, 12);
    }
    const cr = await client.completions.create({
      model: MODEL,
      prompt: 'logprobs (completions)',
      logprobs: 1,
      max_tokens: 8,
      ...extra({ vllm_xargs: { mock_output_token_ids: out } }),
    });
    const l = cr.choices[0]!.logprobs!;
    expect(l.tokens).toEqual(out.map((t) => cl100k.decode([t])));
    expect(l.token_logprobs).toEqual(out.map((t, p) => lp(t, p)));
    expect(l.text_offset).toEqual([0, 6, 11]);
    expect(l.top_logprobs!.map((m) => Object.keys(m!))).toEqual(out.map((t) => [cl100k.decode([t])]));
  });

  it('stop strings cut the text; min_tokens, logit_bias, seed, stop ids, ignore_eos, max_completion_tokens reach the engine', async () => {
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'stop strings and the rest' }],
      stop: ['STOP'],
      stop_token_ids: [4242],
      min_tokens: 2,
      logit_bias: { '1234': -50 },
      seed: 11,
      max_completion_tokens: 12,
      ...extra({ vllm_xargs: { mock_output_token_ids: ids('Hello world. STOP here and more') } }),
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    expect(r.choices[0]!.message.content).toBe('Hello world. ');
    expect(r.choices[0]!.finish_reason).toBe('stop');
    const [got] = await received('stop strings and the rest');
    expect(got!.body).toMatchObject({ min_tokens: 2, logit_bias: { '1234': -50 }, seed: 11, max_tokens: 12 });
    expect(got!.body.stop_token_ids).toContain(4242);
    await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'ignore eos please' }],
      max_tokens: 3,
      ...extra({ ignore_eos: true }),
    });
    expect((await received('ignore eos please'))[0]!.body.ignore_eos).toBe(true);
  });

  it('image_url parts reach the engine as multi_modal_data', async () => {
    const img = 'data:image/png;base64,iVBORw0KGgo=';
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is in this picture (image part)?' },
            { type: 'image_url', image_url: { url: img } },
          ],
        },
      ],
      max_tokens: 3,
    });
    expect(r.choices[0]!.finish_reason).toBe('length');
    // The template joins the parts with "\n" and an image placeholder: the text's last token may merge with it.
    const [got] = await received('What is in this picture');
    expect(got!.body.multi_modal_data).toEqual({ image_url: [{ url: img }] });
  });

  it('a LoRA adapter of the engines is a model: listed, retrieved, served with lora_name as the engine model', async () => {
    const list = await client.models.list();
    expect(list.data.map((m) => m.id).sort()).toEqual([MODEL, 'sql-adapter']);
    expect((await client.models.retrieve('sql-adapter')).id).toBe('sql-adapter');
    const r = await client.chat.completions.create({
      model: 'sql-adapter',
      messages: [{ role: 'user', content: 'SELECT through the adapter' }],
      max_tokens: 3,
    });
    expect(r.model).toBe('sql-adapter');
    expect(r.usage!.completion_tokens).toBe(3);
    const [got] = await received('SELECT through the adapter');
    expect(got!.body.model).toBe('sql-adapter');
  });

  it('completions: batched prompts give one choice each; suffix becomes a fill-in-the-middle prompt', async () => {
    const r = await client.completions.create({
      model: MODEL,
      prompt: ['batch one', 'batch two'],
      max_tokens: 2,
    });
    expect(r.choices.map((c) => c.index)).toEqual([0, 1]);
    expect(r.usage!.prompt_tokens).toBe(ids('batch one').length + ids('batch two').length);
    await client.completions.create({
      model: MODEL,
      prompt: 'def add(a, b):',
      suffix: '\n    return c',
      max_tokens: 2,
    });
    const [got] = await received('def add(a, b):');
    // cl100k: <|fim_prefix|> 100258, <|fim_suffix|> 100260, <|fim_middle|> 100259.
    expect(got!.body.prompt).toEqual([
      100258,
      ...ids('def add(a, b):'),
      100260,
      ...ids('\n    return c'),
      100259,
    ]);
  });
});
