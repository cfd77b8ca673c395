/**
 * The official `@anthropic-ai/sdk` client against the frontend (`--enable-anthropic-api`) with its
 * embedded simulated workers (cl100k + ChatML; block size 16), in kv mode, with the hermes tool-call
 * and qwen3 reasoning parsers. Engines answer with given cl100k ids through the test hook
 * `vllm_xargs.mock_output_token_ids` (passed through like on chat completions). Expected prompt
 * lengths are worked out from the ChatML rendering with the vocabulary package directly.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import * as cl100k from 'gpt-tokenizer/encoding/cl100k_base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Frontend } from '../frontend.js';
import { captureLog, eventually, routerIdle, startFrontend } from '../test-helpers.js';

let fe: Frontend;
let client: Anthropic;
const MODEL = 'mock-model';
const BS = 16;
const log = captureLog();
const bpe = (t: string) => cl100k.encode(t).length;
/** Engine output given as cl100k ids (test hook of the simulated engine). */
const mock = (text: string) => ({ vllm_xargs: { mock_output_token_ids: cl100k.encode(text) } }) as object;
/** A system prompt no other test shares (its first block differs, so nothing is cached for it). */
const fresh = (tag: string) =>
  `${tag} ${Math.random().toString(36).slice(2)}: ${'lorem ipsum dolor sit amet '.repeat(12)}`;
/** ChatML length of `system` + one user turn + the generation prompt: 5 specials + BPE of the pieces between them. */
const chatMlLength = (system: string, user: string) =>
  5 + bpe(`system\n${system}`) + 2 * bpe('\n') + bpe(`user\n${user}`) + bpe('assistant\n');

beforeAll(async () => {
  fe = await startFrontend(
    [
      ...['--router-mode', 'kv', '--router-event-threads', '1', '--enable-anthropic-api'],
      ...['--dyn-tool-call-parser', 'hermes', '--dyn-reasoning-parser', 'qwen3'],
    ],
    { log },
  );
  client = new Anthropic({ baseURL: fe.url, apiKey: 'unused', maxRetries: 0 });
});
afterAll(async () => {
  await fe.close(0);
});

/** The raw SSE of a streamed request: [event name, parsed data] pairs. */
async function rawEvents(body: Record<string, unknown>): Promise<[string, Record<string, unknown>][]> {
  const r = await fetch(`${fe.url}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...body, stream: true }),
  });
  expect(r.status).toBe(200);
  expect(r.headers.get('content-type')).toContain('text/event-stream');
  const text = await r.text();
  return text
    .split('\n\n')
    .filter((f) => f.trim() !== '')
    .map((f) => {
      const ev = /^event: (.*)$/m.exec(f)![1]!;
      const data = /^data: (.*)$/m.exec(f)![1]!;
      return [ev, JSON.parse(data) as Record<string, unknown>];
    });
}

/**
 * A streamed request through the SDK on `f`: the event types as they arrive, and the error that
 * ended the stream (null when it ended normally).
 */
function streamOf(f: Frontend, maxTokens: number) {
  const c = new Anthropic({ baseURL: f.url, apiKey: 'unused', maxRetries: 0 });
  const events: string[] = [];
  const run = (async (): Promise<InstanceType<typeof Anthropic.APIError> | null> => {
    const s = await c.messages.create({
      model: MODEL,
      max_tokens: maxTokens,
      stream: true,
      messages: [{ role: 'user', content: 'hi' }],
    });
    try {
      for await (const e of s) events.push(e.type);
    } catch (e) {
      return e as InstanceType<typeof Anthropic.APIError>;
    }
    return null;
  })();
  return { events, run };
}

/** Event names with each run of identical (name, delta type) collapsed into one entry. */
function shape(evs: [string, Record<string, unknown>][]): string[] {
  const out: string[] = [];
  for (const [name, data] of evs) {
    const d = (data.delta as { type?: string } | undefined)?.type;
    const cb = (data.content_block as { type?: string } | undefined)?.type;
    const s = d && name === 'content_block_delta' ? `${name}:${d}` : cb ? `${name}:${cb}` : name;
    if (out[out.length - 1] !== s) out.push(s);
  }
  return out;
}

describe('anthropic messages through @anthropic-ai/sdk', () => {
  it('unary with a system prompt: max_tokens cuts, usage adds up to the ChatML prompt', async () => {
    const system = fresh('Terse');
    const r = await client.messages.create({
      model: MODEL,
      system,
      messages: [{ role: 'user', content: 'Say hello.' }],
      max_tokens: 7,
    });
    expect(r.id).toMatch(/^msg_[0-9a-f]{32}$/);
    expect(r.type).toBe('message');
    expect(r.role).toBe('assistant');
    expect(r.model).toBe(MODEL);
    expect(r.stop_reason).toBe('max_tokens');
    expect(r.stop_sequence).toBeNull();
    expect(r.usage.output_tokens).toBe(7);
    const isl = chatMlLength(system, 'Say hello.');
    // No breakpoint, a prompt no worker has seen: everything is plain input.
    expect(r.usage).toMatchObject({
      input_tokens: isl,
      cache_read_input_tokens: 0,
      cache_creation_input_tokens: 0,
    });
    expect(r.content.map((b) => b.type)).toEqual(['text']);
  });

  it('system as a block list: the blocks are joined with "\\n" by the template', async () => {
    const a = fresh('A');
    const count = await client.messages.countTokens({
      model: MODEL,
      system: [
        { type: 'text', text: a },
        { type: 'text', text: 'Be brief.' },
      ],
      messages: [{ role: 'user', content: 'Hi' }],
    });
    expect(count.input_tokens).toBe(chatMlLength(`${a}\nBe brief.`, 'Hi'));
  });

  it('thinking and text: unary blocks, and the exact stream event order (ping after the first block opens)', async () => {
    const out = '<think>Plan the greeting.</think>Hi there, friend.';
    const body = {
      model: MODEL,
      max_tokens: 2048,
      thinking: { type: 'enabled' as const, budget_tokens: 1024 },
      messages: [{ role: 'user' as const, content: 'Greet me.' }],
    };
    const r = await client.messages.create({ ...body, ...mock(out) });
    expect(r.content).toEqual([
      { type: 'thinking', thinking: 'Plan the greeting.', signature: '' },
      { type: 'text', text: 'Hi there, friend.' },
    ]);
    expect(r.stop_reason).toBe('end_turn');
    expect(r.usage.output_tokens).toBe(bpe(out));

    const evs = await rawEvents({ ...body, ...mock(out) });
    expect(shape(evs)).toEqual([
      'message_start',
      'content_block_start:thinking',
      'ping',
      'content_block_delta:thinking_delta',
      'content_block_delta:signature_delta',
      'content_block_stop',
      'content_block_start:text',
      'content_block_delta:text_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    const start = evs[0]![1].message as Record<string, unknown>;
    expect(start).toMatchObject({ type: 'message', role: 'assistant', content: [], stop_reason: null });
    expect(evs.filter(([n]) => n === 'content_block_stop').map(([, d]) => d.index)).toEqual([0, 1]);
    const md = evs[evs.length - 2]![1];
    expect(md.delta).toEqual({ stop_reason: 'end_turn', stop_sequence: null });
    expect((md.usage as { output_tokens: number }).output_tokens).toBe(bpe(out));

    // The SDK's stream helper assembles the same message.
    const stream = client.messages.stream({ ...body, ...mock(out) });
    const final = await stream.finalMessage();
    expect(final.content).toEqual(r.content);
    expect(final.stop_reason).toBe('end_turn');
  });

  it('tools round trip: tool_use out (unary and streamed), tool_result in; the prompt holds both', async () => {
    const tools = [
      {
        name: 'add',
        input_schema: {
          type: 'object' as const,
          properties: { a: { type: 'number' }, b: { type: 'number' } },
        },
      },
    ];
    const call = 'Adding.<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>';
    const user = { role: 'user' as const, content: 'What is 1 + 2?' };
    const r = await client.messages.create({
      model: MODEL,
      max_tokens: 64,
      tools,
      messages: [user],
      ...mock(call),
    });
    expect(r.stop_reason).toBe('tool_use');
    expect(r.content).toHaveLength(2);
    expect(r.content[0]).toEqual({ type: 'text', text: 'Adding.' });
    const use = r.content[1] as Anthropic.ToolUseBlock;
    expect(use.type).toBe('tool_use');
    expect(use.id).toMatch(/^toolu_[0-9a-f]{24}$/);
    expect(use.name).toBe('add');
    expect(use.input).toEqual({ a: 1, b: 2 });

    // Streamed: the call's arguments arrive as input_json_delta pieces the SDK parses.
    const evs = await rawEvents({ model: MODEL, max_tokens: 64, tools, messages: [user], ...mock(call) });
    expect(shape(evs)).toEqual([
      'message_start',
      'content_block_start:text',
      'ping',
      'content_block_delta:text_delta',
      'content_block_stop',
      'content_block_start:tool_use',
      'content_block_delta:input_json_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    const json = evs
      .filter(([, d]) => (d.delta as { type?: string } | undefined)?.type === 'input_json_delta')
      .map(([, d]) => (d.delta as { partial_json: string }).partial_json)
      .join('');
    expect(JSON.parse(json)).toEqual({ a: 1, b: 2 });
    expect((evs[evs.length - 2]![1].delta as { stop_reason: string }).stop_reason).toBe('tool_use');
    const streamed = await client.messages
      .stream({ model: MODEL, max_tokens: 64, tools, messages: [user], ...mock(call) })
      .finalMessage();
    expect((streamed.content[1] as Anthropic.ToolUseBlock).input).toEqual({ a: 1, b: 2 });

    // Second turn: the call and its result go back; the engine answers in text.
    const turn2 = {
      model: MODEL,
      tools,
      messages: [
        user,
        { role: 'assistant' as const, content: r.content },
        {
          role: 'user' as const,
          content: [{ type: 'tool_result' as const, tool_use_id: use.id, content: '3' }],
        },
      ],
    };
    const r2 = await client.messages.create({ ...turn2, max_tokens: 64, ...mock('The sum is 3.') });
    expect(r2.content).toEqual([{ type: 'text', text: 'The sum is 3.' }]);
    expect(r2.stop_reason).toBe('end_turn');
    // ChatML with tools: a tools system turn, the user turn, the assistant turn (its text, then its
    // tool_calls as JSON), the tool turn, the generation prompt: 9 specials + the pieces between.
    const toolsJson = JSON.stringify([
      { type: 'function', function: { name: 'add', parameters: tools[0]!.input_schema } },
    ]);
    const callsJson = JSON.stringify([
      { id: use.id, type: 'function', function: { name: 'add', arguments: '{"a":1,"b":2}' } },
    ]);
    const isl =
      9 +
      bpe(`system\n# Tools\n${toolsJson}`) +
      4 * bpe('\n') +
      bpe('user\nWhat is 1 + 2?') +
      bpe(`assistant\nAdding.\n${callsJson}`) +
      bpe('tool\n3') +
      bpe('assistant\n');
    const u = r2.usage;
    expect(u.input_tokens + u.cache_read_input_tokens! + u.cache_creation_input_tokens!).toBe(isl);
    expect((await client.messages.countTokens(turn2)).input_tokens).toBe(isl);
  });

  it('tool_choice any is forced (guided JSON array of calls)', async () => {
    const r = await client.messages.create({
      model: MODEL,
      max_tokens: 64,
      tools: [{ name: 'neg', input_schema: { type: 'object' } }],
      tool_choice: { type: 'any' },
      messages: [{ role: 'user', content: 'negate 2' }],
      ...mock('[{"name": "neg", "parameters": {"x": 2}}]'),
    });
    expect(r.stop_reason).toBe('tool_use');
    expect(r.content).toHaveLength(1);
    expect(r.content[0]).toMatchObject({ type: 'tool_use', name: 'neg', input: { x: 2 } });
  });

  it('stop_sequences: the text ends before the first one met, stop_reason stop_sequence names it', async () => {
    const body = {
      model: MODEL,
      max_tokens: 64,
      // Five sequences: more than OpenAI's four, as Anthropic allows.
      stop_sequences: ['never1', 'never2', 'never3', 'END', 'STOP'],
      messages: [{ role: 'user' as const, content: 'count' }],
      ...mock('one two STOP three END'),
    };
    const r = await client.messages.create(body);
    expect(r.content).toEqual([{ type: 'text', text: 'one two ' }]);
    expect(r.stop_reason).toBe('stop_sequence');
    expect(r.stop_sequence).toBe('STOP');
    const evs = await rawEvents(body);
    expect(evs[evs.length - 2]![1].delta).toEqual({ stop_reason: 'stop_sequence', stop_sequence: 'STOP' });
  });

  it('count_tokens: the prompt /v1/messages would send, equal to the usage of the same request', async () => {
    const system = fresh('Count');
    const req = { model: MODEL, system, messages: [{ role: 'user' as const, content: 'Say hello.' }] };
    const c = await client.messages.countTokens(req);
    expect(c).toEqual({ input_tokens: chatMlLength(system, 'Say hello.') });
    const r = await client.messages.create({ ...req, max_tokens: 1 });
    const u = r.usage;
    expect(u.input_tokens + u.cache_read_input_tokens! + u.cache_creation_input_tokens!).toBe(c.input_tokens);
  });

  it('an agent-size body (64 KiB and more, parsed from its bytes): same count, same answer, same 400s', async () => {
    // ~190 kB of system prompt with multi-byte text: over BYTES_PARSE_MIN, so the body is parsed
    // value by value from its bytes (http/json-bytes.ts), as /v1/chat/completions does.
    const system = `${fresh('Agent')} ${'Prüfung — データ '.repeat(6_000)}`;
    const req = { model: MODEL, system, messages: [{ role: 'user' as const, content: 'Say hello.' }] };
    expect(Buffer.byteLength(JSON.stringify(req))).toBeGreaterThan(64 * 1024);
    const c = await client.messages.countTokens(req);
    expect(c).toEqual({ input_tokens: chatMlLength(system, 'Say hello.') });
    const r = await client.messages.create({ ...req, max_tokens: 2 });
    const u = r.usage;
    expect(u.output_tokens).toBe(2);
    expect(u.input_tokens + u.cache_read_input_tokens! + u.cache_creation_input_tokens!).toBe(c.input_tokens);
    // Malformed JSON of that size: 400 in Anthropic's shape, as a small malformed body gets.
    const text = JSON.stringify({ ...req, max_tokens: 1 });
    for (const body of [text.slice(0, -1), '{"model": 1,'.padEnd(70_000, ' ')]) {
      const raw = await fetch(`${fe.url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      });
      expect(raw.status).toBe(400);
      expect(((await raw.json()) as { error: { type: string } }).error.type).toBe('invalid_request_error');
    }
  });

  it('cache_control: creation = the breakpoint prefix not read from cache; read = what the engine reused', async () => {
    const system = fresh('Cached');
    const body = {
      model: MODEL,
      max_tokens: 2,
      system: [{ type: 'text' as const, text: system, cache_control: { type: 'ephemeral' as const } }],
      messages: [{ role: 'user' as const, content: 'Question one?' }],
    };
    const isl = chatMlLength(system, 'Question one?');
    // The prefix up to the breakpoint: "<|im_start|>system\n{system}<|im_end|>\n".
    const prefix = 2 + bpe(`system\n${system}`) + bpe('\n');
    const first = await client.messages.create(body);
    expect(first.usage).toMatchObject({
      cache_read_input_tokens: 0,
      cache_creation_input_tokens: prefix,
      input_tokens: isl - prefix,
      // The default TTL of a breakpoint is 5 minutes.
      cache_creation: { ephemeral_5m_input_tokens: prefix, ephemeral_1h_input_tokens: 0 },
    });
    // The same prompt again, once the workers' KV events reached the index: the engine reuses every
    // full block but the one holding the last prompt token.
    let again = await client.messages.create(body);
    for (let i = 0; i < 20 && again.usage.cache_read_input_tokens === 0; i++)
      again = await client.messages.create(body);
    const read = Math.floor((isl - 1) / BS) * BS;
    expect(again.usage).toMatchObject({
      cache_read_input_tokens: read,
      cache_creation_input_tokens: Math.max(0, prefix - read),
      input_tokens: isl - read - Math.max(0, prefix - read),
    });
  });

  it('max_tokens 0 prewarms: no content, and the next request reads the prompt from cache', async () => {
    const system = fresh('Warm');
    const body = { model: MODEL, system, messages: [{ role: 'user' as const, content: 'Later.' }] };
    const w = await client.messages.create({ ...body, max_tokens: 0 });
    expect(w.content).toEqual([]);
    expect(w.stop_reason).toBe('max_tokens');
    expect(w.usage.output_tokens).toBe(0);
    const isl = chatMlLength(system, 'Later.');
    let r = await client.messages.create({ ...body, max_tokens: 1 });
    for (let i = 0; i < 20 && r.usage.cache_read_input_tokens === 0; i++)
      r = await client.messages.create({ ...body, max_tokens: 1 });
    expect(r.usage.cache_read_input_tokens).toBe(Math.floor((isl - 1) / BS) * BS);
  });

  it('errors: Anthropic error shape and status, the SDK error classes, a log line naming the field', async () => {
    const raw = await fetch(`${fe.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(raw.status).toBe(400);
    expect(await raw.json()).toEqual({
      type: 'error',
      error: { type: 'invalid_request_error', message: 'max_tokens: Field required' },
    });
    expect(log.lines.some((l) => l.startsWith('warn') && l.includes('(field max_tokens)'))).toBe(true);

    const bad = async (body: Record<string, unknown>) =>
      client.messages
        .create({ model: MODEL, max_tokens: 8, messages: [{ role: 'user', content: 'x' }], ...body })
        .then(
          () => null,
          (e: unknown) => e as InstanceType<typeof Anthropic.APIError>,
        );
    const cases: [Record<string, unknown>, string][] = [
      [{ max_tokens: -1 }, 'max_tokens'],
      [{ temperature: 1.5 }, 'temperature'],
      [{ tools: [{ name: 'f' }] }, 'tools.0.input_schema'],
      [
        { messages: [{ role: 'user', content: [{ type: 'document', source: {} }] }] },
        'messages.0.content.0.type',
      ],
      [{ thinking: { type: 'enabled', budget_tokens: 1024 } }, 'thinking.budget_tokens'],
      [{ tool_choice: { type: 'any' } }, 'tool_choice'],
    ];
    for (const [body, field] of cases) {
      const e = await bad(body);
      expect(e, field).toBeInstanceOf(Anthropic.BadRequestError);
      expect(e!.status).toBe(400);
      expect((e!.error as { error: { type: string; message: string } }).error.type).toBe(
        'invalid_request_error',
      );
      expect((e!.error as { error: { message: string } }).error.message.startsWith(`${field}:`)).toBe(true);
    }
    const nf = await bad({ model: 'no-such-model' });
    expect(nf).toBeInstanceOf(Anthropic.NotFoundError);
    expect((nf!.error as { error: { type: string } }).error.type).toBe('not_found_error');
    const nc = await client.messages
      .countTokens({ model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] })
      .catch((e: unknown) => e);
    expect(nc).toBeInstanceOf(Anthropic.NotFoundError);
  });

  it('the prewarm stream: message_start, ping, message_delta (max_tokens, 0 output tokens), message_stop', async () => {
    const evs = await rawEvents({
      model: MODEL,
      max_tokens: 0,
      system: fresh('WarmStream'),
      messages: [{ role: 'user', content: 'x' }],
    });
    expect(evs.map(([n]) => n)).toEqual(['message_start', 'ping', 'message_delta', 'message_stop']);
    expect(evs[2]![1].delta).toEqual({ stop_reason: 'max_tokens', stop_sequence: null });
    expect((evs[2]![1].usage as { output_tokens: number }).output_tokens).toBe(0);
  });

  it('DYN_HTTP_SVC_ANTHROPIC_PATH_ENV moves both routes; /openapi.json lists them (no 501)', async () => {
    const other = await startFrontend(['--enable-anthropic-api', '--mocker-workers', '1'], {
      env: { DYN_HTTP_SVC_ANTHROPIC_PATH_ENV: '/anthropic/v1/messages', DYN_HTTP_BODY_LIMIT_MB: '1' },
    });
    try {
      // The SDK posts to {baseURL}/v1/messages.
      const c = new Anthropic({ baseURL: `${other.url}/anthropic`, apiKey: 'unused', maxRetries: 0 });
      const r = await c.messages.create({
        model: MODEL,
        max_tokens: 3,
        messages: [{ role: 'user', content: 'x' }],
      });
      expect(r.usage.output_tokens).toBe(3);
      const n = await c.messages.countTokens({ model: MODEL, messages: [{ role: 'user', content: 'x' }] });
      expect(n.input_tokens).toBe(3 + bpe('user\nx') + bpe('\n') + bpe('assistant\n'));
      expect((await fetch(`${other.url}/v1/messages`, { method: 'POST', body: '{}' })).status).toBe(404);
      // A body over DYN_HTTP_BODY_LIMIT_MB: 413 in Anthropic's shape.
      const big = await fetch(`${other.url}/anthropic/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model: MODEL,
          max_tokens: 1,
          messages: [{ role: 'user', content: 'x'.repeat(1_100_000) }],
        }),
      });
      expect(big.status).toBe(413);
      expect(((await big.json()) as { error: { type: string } }).error.type).toBe('request_too_large');
      const spec = (await (await fetch(`${other.url}/openapi.json`)).json()) as {
        paths: Record<string, { post: { summary: string } }>;
      };
      for (const p of ['/anthropic/v1/messages', '/anthropic/v1/messages/count_tokens'])
        expect(spec.paths[p]!.post.summary).not.toContain('501');
    } finally {
      await other.close(0);
    }
  });

  it('a stream still running at the end of the shutdown grace period ends with an Anthropic error event', async () => {
    // A slow engine: 5,000 tokens take far longer than the 0.3 s grace period.
    const slow = await startFrontend(['--enable-anthropic-api', '--mocker-workers', '1'], {
      embedded: { engine: { speedupRatio: 0.5 } },
    });
    const { events, run } = streamOf(slow, 5000);
    await eventually(() => events.includes('content_block_delta'), 5000, 'a streaming delta');
    await slow.close(0.3);
    const err = await run;
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect(err!.error).toMatchObject({ type: 'error', error: { type: 'overloaded_error' } });
    expect(err!.message).toMatch(/shutting down/);
    expect(events[0]).toBe('message_start');
    expect(events).not.toContain('message_stop');
  });

  it('a worker dying mid-stream without a migration budget: the stream ends with an error event', async () => {
    const one = await startFrontend(['--enable-anthropic-api', '--mocker-workers', '1'], {
      embedded: { engine: { speedupRatio: 2 } },
    });
    try {
      const { events, run } = streamOf(one, 2000);
      await eventually(
        () => events.filter((e) => e === 'content_block_delta').length >= 3,
        5000,
        'three deltas',
      );
      one.fleet!.workers[0]!.crash();
      const err = await run;
      expect(err).toBeInstanceOf(Anthropic.APIError);
      // The engine failure in Anthropic's shape (an internal error of the in-process request plane).
      expect(err!.error).toMatchObject({ type: 'error', error: { type: 'api_error' } });
      expect(err!.message).toMatch(/died mid-stream/);
      expect(events).not.toContain('message_stop');
      await eventually(() => routerIdle(one), 5000, 'an idle router');
    } finally {
      await one.close(0);
    }
  });

  it('request metrics count the Anthropic requests under endpoint="anthropic_messages"', async () => {
    const m = await (await fetch(`${fe.url}/metrics`)).text();
    const ok = m
      .split('\n')
      .filter(
        (l) => l.startsWith('dynamo_frontend_requests_total{') && l.includes('endpoint="anthropic_messages"'),
      );
    expect(ok.length).toBeGreaterThan(0);
    expect(ok.some((l) => l.includes('status="success"') && Number(l.split(' ').pop()) > 0)).toBe(true);
  });

  it('every booking ended', async () => {
    await eventually(() => routerIdle(fe), 5000, 'an idle router');
  });
});

describe('cache_control as a routing hint', () => {
  it('a request with a breakpoint gets full overlap credit where --router-kv-overlap-score-credit is 0.25', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'kvr-anthropic-'));
    const file = path.join(dir, 'decisions.jsonl');
    const hinted = await startFrontend(
      [
        ...[
          '--router-mode',
          'kv',
          '--router-event-threads',
          '1',
          '--enable-anthropic-api',
          '--mocker-workers',
          '2',
        ],
        ...['--router-kv-overlap-score-credit', '0.25', '--decision-log', file, '--decision-log-sample', '1'],
      ],
      { log },
    );
    try {
      const c = new Anthropic({ baseURL: hinted.url, apiKey: 'unused', maxRetries: 0 });
      const system = fresh('Hint');
      const ask = (bp: boolean) =>
        c.messages.create({
          model: MODEL,
          max_tokens: 1,
          system: [
            { type: 'text', text: system, ...(bp ? { cache_control: { type: 'ephemeral' as const } } : {}) },
          ],
          messages: [{ role: 'user', content: 'q' }],
        });
      type Cand = { effective_overlap: number; credit_blocks: number };
      /** The logged decision of a response: its candidate that holds the most of the prompt. */
      const best = (id: string): Cand | undefined => {
        const rid = id.slice(4).replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, '$1-$2-$3-$4-$5');
        const line = readFileSync(file, 'utf8')
          .split('\n')
          .filter((l) => l.includes(rid))[0];
        if (!line) return undefined;
        const cands = (JSON.parse(line) as { candidates: Cand[] }).candidates;
        return cands.reduce((a, b) => (b.effective_overlap > a.effective_overlap ? b : a));
      };
      await ask(false);
      // Once the first request's blocks are in the index, the repeat sees them on one worker.
      let plain = best((await ask(false)).id);
      for (let i = 0; i < 40 && !(plain && plain.effective_overlap > 0); i++) {
        await new Promise((r) => setTimeout(r, 25));
        plain = best((await ask(false)).id);
      }
      expect(plain!.effective_overlap).toBeGreaterThan(0);
      // §8.3: credit = overlap_score_credit × device overlap (no decay by default).
      expect(plain!.credit_blocks).toBe(0.25 * plain!.effective_overlap);
      const withBp = best((await ask(true)).id)!;
      expect(withBp.effective_overlap).toBe(plain!.effective_overlap);
      expect(withBp.credit_blocks).toBe(withBp.effective_overlap);
    } finally {
      await hinted.close(0);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
