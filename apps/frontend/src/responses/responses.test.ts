/**
 * The Responses API with the official openai client against the frontend's embedded simulated
 * workers (mistral tool-call and deepseek_r1 reasoning parsers from the flags; engines answer with
 * given cl100k ids through `vllm_xargs.mock_output_token_ids`): unary and streamed responses,
 * reasoning and function-call items, a function-call round trip over `previous_response_id`, 404
 * for an unknown id, and the bounded store.
 */
import * as cl100k from 'gpt-tokenizer/encoding/cl100k_base';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Frontend } from '../frontend.js';
import { eventually, startFrontend } from '../test-helpers.js';
import { ResponseStore } from './store.js';

let fe: Frontend;
let client: OpenAI;
const MODEL = 'mock-model';
const ids = (t: string) => cl100k.encode(t);
const bpe = (t: string) => cl100k.encode(t).length;
/** The engine answers with exactly this text (then stops). */
const answer = (text: string) => ({ vllm_xargs: { mock_output_token_ids: ids(text) } }) as object;
const WEATHER = [
  {
    type: 'function' as const,
    name: 'get_weather',
    description: 'Weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } } },
    strict: false,
  },
];

beforeAll(async () => {
  fe = await startFrontend([
    ...['--router-mode', 'kv', '--router-event-threads', '1'],
    ...['--dyn-tool-call-parser', 'mistral', '--dyn-reasoning-parser', 'deepseek_r1'],
    ...['--responses-store-size', '8'],
  ]);
  client = new OpenAI({ baseURL: `${fe.url}/v1`, apiKey: 'unused', maxRetries: 0 });
});
afterAll(async () => {
  await fe.close(0);
});

describe('Responses API (openai client)', () => {
  it('unary: instructions + input string; message item, output_text, usage from the ChatML prompt', async () => {
    const r = await client.responses.create({
      model: MODEL,
      instructions: 'Be terse.',
      input: 'Say hi.',
      ...answer('</think>Hi there.'),
    });
    expect(r.object).toBe('response');
    expect(r.id).toMatch(/^resp_/);
    expect(r.status).toBe('completed');
    expect(r.output).toHaveLength(1);
    const m = r.output[0]!;
    expect(m.type).toBe('message');
    expect(r.output_text).toBe('Hi there.');
    // ChatML: <|im_start|>system\nBe terse.<|im_end|>\n<|im_start|>user\nSay hi.<|im_end|>\n<|im_start|>assistant\n
    const isl = 5 + bpe('system\nBe terse.') + 2 * bpe('\n') + bpe('user\nSay hi.') + bpe('assistant\n');
    expect(r.usage!.input_tokens).toBe(isl);
    expect(r.usage!.output_tokens).toBe(ids('</think>Hi there.').length);
    expect(r.usage!.total_tokens).toBe(isl + ids('</think>Hi there.').length);
    expect(r.instructions).toBe('Be terse.');
  });

  it('max_output_tokens cuts the answer: status incomplete, reason max_output_tokens', async () => {
    const r = await client.responses.create({
      model: MODEL,
      input: [{ role: 'user', content: [{ type: 'input_text', text: 'Count.' }] }],
      max_output_tokens: 4,
      ...answer('</think>one two three four five six seven'),
    });
    expect(r.status).toBe('incomplete');
    expect(r.incomplete_details).toEqual({ reason: 'max_output_tokens' });
    expect(r.usage!.output_tokens).toBe(4);
  });

  it('streaming: created, in_progress, item/part/delta events, completed; the client accumulates the text', async () => {
    const s = client.responses.stream({ model: MODEL, input: 'Greet.', ...answer('</think>Hello, world!') });
    const types: string[] = [];
    const seqs: number[] = [];
    let deltas = '';
    for await (const e of s) {
      types.push(e.type);
      seqs.push(e.sequence_number);
      if (e.type === 'response.output_text.delta') deltas += e.delta;
    }
    const final = await s.finalResponse();
    expect(deltas).toBe('Hello, world!');
    expect(final.output_text).toBe('Hello, world!');
    expect(final.status).toBe('completed');
    expect(seqs).toEqual(seqs.map((_, i) => i));
    const dedup = types.filter((t, i) => t !== types[i - 1]);
    expect(dedup).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
  });

  it('raw stream framing: each block is `event: <type>` + `data:` of that type, and no [DONE]', async () => {
    const r = await fetch(`${fe.url}/v1/responses`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, input: 'x', stream: true, ...answer('</think>ok') }),
    });
    expect(r.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const blocks = (await r.text()).split('\n\n').filter((b) => b.length > 0);
    expect(blocks.length).toBeGreaterThan(4);
    for (const b of blocks) {
      const [ev, data] = b.split('\n');
      expect(ev).toMatch(/^event: /);
      expect((JSON.parse(data!.slice('data: '.length)) as { type: string }).type).toBe(
        ev!.slice('event: '.length),
      );
    }
    expect(blocks[blocks.length - 1]).toMatch(/^event: response.completed\n/);
  });

  it('reasoning then a function call, streamed; the call round-trips over previous_response_id', async () => {
    const text =
      'Need the weather.</think>[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}]';
    const s = client.responses.stream({
      model: MODEL,
      instructions: 'Use tools.',
      input: 'Weather in Paris?',
      tools: WEATHER,
      ...answer(text),
    });
    const types = new Set<string>();
    let args = '';
    for await (const e of s) {
      types.add(e.type);
      if (e.type === 'response.function_call_arguments.delta') args += e.delta;
    }
    const r1 = await s.finalResponse();
    for (const t of [
      'response.reasoning_text.delta',
      'response.reasoning_text.done',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
    ])
      expect(types).toContain(t);
    expect(args).toBe('{"city": "Paris"}');
    expect(r1.output.map((o) => o.type)).toEqual(['reasoning', 'function_call']);
    const reasoning = r1.output[0] as { content?: { type: string; text: string }[] };
    expect(reasoning.content).toEqual([{ type: 'reasoning_text', text: 'Need the weather.' }]);
    const call = r1.output[1] as OpenAI.Responses.ResponseFunctionToolCall;
    expect(call.name).toBe('get_weather');
    expect(call.arguments).toBe('{"city": "Paris"}');
    expect(call.status).toBe('completed');
    expect(r1.usage!.output_tokens).toBe(ids(text).length);

    // Second turn: the tool's result after the stored conversation (instructions are not carried over).
    const output = {
      type: 'function_call_output' as const,
      call_id: call.call_id,
      output: '{"celsius": 21}',
    };
    const r2 = await client.responses.create({
      model: MODEL,
      previous_response_id: r1.id,
      input: [output],
      tools: WEATHER,
      ...answer('</think>It is 21 degrees.'),
    });
    expect(r2.previous_response_id).toBe(r1.id);
    expect(r2.output_text).toBe('It is 21 degrees.');
    // The same conversation written out by the client renders the same prompt.
    const explicit = await client.responses.create({
      model: MODEL,
      input: [
        { role: 'user', content: 'Weather in Paris?' },
        { type: 'function_call', call_id: call.call_id, name: 'get_weather', arguments: '{"city": "Paris"}' },
        output,
      ],
      tools: WEATHER,
      store: false,
      ...answer('</think>ok'),
    });
    expect(r2.usage!.input_tokens).toBe(explicit.usage!.input_tokens);
    expect(r2.usage!.input_tokens).toBeGreaterThan(r1.usage!.input_tokens - bpe('system\nUse tools.'));

    // The stored response is readable by id.
    const got = await client.responses.retrieve(r2.id);
    expect(got.output_text).toBe('It is 21 degrees.');
  });

  it('404 for an unknown previous_response_id and for a response created with store: false', async () => {
    const unknown = await client.responses
      .create({ model: MODEL, previous_response_id: 'resp_nope', input: 'hi' })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(unknown).toBeInstanceOf(OpenAI.NotFoundError);
    expect((unknown as InstanceType<typeof OpenAI.NotFoundError>).code).toBe('previous_response_not_found');
    expect((unknown as InstanceType<typeof OpenAI.NotFoundError>).param).toBe('previous_response_id');
    const unstored = await client.responses.create({
      model: MODEL,
      input: 'x',
      store: false,
      ...answer('</think>y'),
    });
    await expect(
      client.responses.create({ model: MODEL, previous_response_id: unstored.id, input: 'again' }),
    ).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    // GET /v1/responses/{id}: neither an unknown id nor a store: false response is readable.
    for (const id of ['resp_nope', unstored.id]) {
      const e = await client.responses.retrieve(id).then(
        () => null,
        (x: unknown) => x,
      );
      expect(e, id).toBeInstanceOf(OpenAI.NotFoundError);
      expect((e as InstanceType<typeof OpenAI.NotFoundError>).code).toBe('not_found');
      expect((e as InstanceType<typeof OpenAI.NotFoundError>).param).toBe('response_id');
    }
  });

  it('400 naming the field: built-in tools, bad items, unknown model is 404', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ input: 'x', tools: [{ type: 'web_search' }] }, 'tools[0].type'],
      [{ input: [{ type: 'function_call', name: 'f', arguments: '{}' }] }, 'input[0].call_id'],
      [{ input: [{ role: 'robot', content: 'x' }] }, 'input[0].role'],
      [{ input: 'x', max_output_tokens: 0 }, 'max_output_tokens'],
      [{ input: 'x', reasoning: { effort: 'extreme' } }, 'reasoning.effort'],
      [{}, 'input'],
    ];
    for (const [body, param] of cases) {
      const e = await client.responses
        .create({ model: MODEL, ...body } as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming)
        .then(
          () => null,
          (x: unknown) => x as InstanceType<typeof OpenAI.BadRequestError>,
        );
      expect(e, param).toBeInstanceOf(OpenAI.BadRequestError);
      expect(e!.param).toBe(param);
    }
    await expect(client.responses.create({ model: 'no-such-model', input: 'x' })).rejects.toBeInstanceOf(
      OpenAI.NotFoundError,
    );
  });
});

describe('Responses stream at shutdown', () => {
  it('a stream still running when the grace period ends gets an error event (shutting_down), no completed', async () => {
    const slow = await startFrontend(['--mocker-workers', '1'], {
      embedded: { engine: { speedupRatio: 0.5 } },
    });
    const c = new OpenAI({ baseURL: `${slow.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const events: { type: string; code?: string }[] = [];
    const run = (async () => {
      const s = await c.responses.create({
        model: MODEL,
        input: 'hi',
        max_output_tokens: 5000,
        stream: true,
      });
      for await (const e of s) events.push(e as { type: string; code?: string });
    })();
    await eventually(
      () =>
        events.some(
          (e) => e.type === 'response.output_text.delta' || e.type.startsWith('response.reasoning'),
        ),
      5000,
      'a delta',
    );
    await slow.close(0.3);
    await run;
    expect(events[0]!.type).toBe('response.created');
    const last = events[events.length - 1]!;
    expect(last.type).toBe('error');
    expect(last.code).toBe('shutting_down');
    expect(events.map((e) => e.type)).not.toContain('response.completed');
  });
});

describe('ResponseStore', () => {
  const entry = (n: number) => ({ conversation: [{ role: 'user', content: String(n) }], response: { n } });

  it('keeps at most size entries, least recently used out first', () => {
    const s = new ResponseStore(2, 60, () => 0);
    s.put('a', entry(1));
    s.put('b', entry(2));
    expect(s.get('a')?.response).toEqual({ n: 1 }); // a is now the most recently used
    s.put('c', entry(3));
    expect(s.get('b')).toBeNull();
    expect(s.get('a')).not.toBeNull();
    expect(s.get('c')).not.toBeNull();
    expect(s.count).toBe(2);
  });

  it('forgets an entry ttl seconds after it was stored; size 0 keeps nothing', () => {
    let now = 1_000;
    const s = new ResponseStore(10, 30, () => now);
    s.put('a', entry(1));
    now += 29_999;
    expect(s.get('a')).not.toBeNull();
    now += 1;
    expect(s.get('a')).toBeNull();
    const none = new ResponseStore(0, 30, () => now);
    none.put('a', entry(1));
    expect(none.get('a')).toBeNull();
  });
});
