/**
 * The request surface against the frontend's embedded simulated workers (the default `npm start`
 * fleet), with the official openai client: the parsers chosen by the frontend flags, streaming
 * with several choices, `tool_choice: "required"`, synthetic logprobs from the simulated engine,
 * and the frontend's refusals. Engines answer with given cl100k ids through the test hook
 * `vllm_xargs.mock_output_token_ids`.
 */
import * as cl100k from 'gpt-tokenizer/encoding/cl100k_base';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Frontend } from '../frontend.js';
import { eventually, routerIdle, startFrontend } from '../test-helpers.js';

let fe: Frontend;
let client: OpenAI;
const MODEL = 'mock-model';
const ids = (t: string) => cl100k.encode(t);
const extra = (o: Record<string, unknown>) => o as object;
const TOOLS = [
  { type: 'function' as const, function: { name: 'add', parameters: { type: 'object' } } },
  { type: 'function' as const, function: { name: 'neg', parameters: { type: 'object' } } },
];

beforeAll(async () => {
  fe = await startFrontend([
    ...['--router-mode', 'kv', '--router-event-threads', '1'],
    ...['--dyn-tool-call-parser', 'mistral', '--dyn-reasoning-parser', 'deepseek_r1'],
  ]);
  client = new OpenAI({ baseURL: `${fe.url}/v1`, apiKey: 'unused', maxRetries: 0 });
});
afterAll(async () => {
  await fe.close(0);
});

describe('request surface on embedded simulated workers', () => {
  it('flags pick the parsers: deepseek_r1 reasoning then a mistral call, streamed with n = 2 and usage', async () => {
    const text = 'Adding.</think>[TOOL_CALLS][{"name": "add", "arguments": {"a": 1, "b": 2}}]';
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'add 1 and 2' }],
      tools: TOOLS,
      n: 2,
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: 64,
      ...extra({ vllm_xargs: { mock_output_token_ids: ids(text) } }),
    });
    const per = [0, 1].map(() => ({ reasoning: '', args: '', name: '', finish: '' }));
    let usage: OpenAI.CompletionUsage | null | undefined = null;
    for await (const ch of stream) {
      if (ch.usage) usage = ch.usage;
      for (const c of ch.choices) {
        const p = per[c.index]!;
        const d = c.delta as {
          reasoning_content?: string;
          tool_calls?: OpenAI.ChatCompletionChunk.Choice.Delta.ToolCall[];
        };
        p.reasoning += d.reasoning_content ?? '';
        for (const t of d.tool_calls ?? []) {
          p.name += t.function?.name ?? '';
          p.args += t.function?.arguments ?? '';
        }
        if (c.finish_reason) p.finish = c.finish_reason;
      }
    }
    for (const p of per)
      expect(p).toEqual({
        reasoning: 'Adding.',
        args: '{"a": 1, "b": 2}',
        name: 'add',
        finish: 'tool_calls',
      });
    expect(usage!.completion_tokens).toBe(2 * ids(text).length);
  });

  it('tool_choice required: the guided array becomes calls', async () => {
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'both' }],
      tools: TOOLS,
      tool_choice: 'required',
      max_tokens: 64,
      ...extra({
        vllm_xargs: {
          mock_output_token_ids: ids(
            '</think>[{"name": "add", "parameters": {"a": 1}}, {"name": "neg", "parameters": {"x": 2}}]',
          ),
        },
      }),
    });
    const calls = r.choices[0]!.message.tool_calls! as { function: { name: string; arguments: string } }[];
    expect(calls.map((c) => c.function)).toEqual([
      { name: 'add', arguments: '{"a": 1}' },
      { name: 'neg', arguments: '{"x": 2}' },
    ]);
    expect(r.choices[0]!.finish_reason).toBe('tool_calls');
  });

  it('completions logprobs from the simulated engine: one entry per token, in (-3, 0]', async () => {
    const r = await client.completions.create({ model: MODEL, prompt: 'count', max_tokens: 5, logprobs: 3 });
    const l = r.choices[0]!.logprobs!;
    expect(l.token_logprobs).toHaveLength(5);
    expect(l.token_logprobs!.every((x) => x <= 0 && x > -3)).toBe(true);
    expect(l.top_logprobs!.every((m) => Object.keys(m!).length >= 1)).toBe(true);
  });

  it('refusals name the field', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [
        { messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: {} }] }] },
        'messages[0].content[0].type',
      ],
      [{ tool_choice: 'auto' }, 'tool_choice'],
      [{ response_format: { type: 'json_object' }, guided_regex: 'a' }, 'guided_regex'],
      [{ top_logprobs: 2 }, 'top_logprobs'],
    ];
    for (const [body, param] of cases) {
      const err = await client.chat.completions
        .create({
          model: MODEL,
          messages: [{ role: 'user', content: 'x' }],
          ...body,
        } as OpenAI.ChatCompletionCreateParamsNonStreaming)
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.BadRequestError);
      expect((err as InstanceType<typeof OpenAI.BadRequestError>).param).toBe(param);
    }
    const fim = await client.completions
      .create({ model: MODEL, prompt: [1, 2, 3], suffix: 'x' })
      .catch((e: unknown) => e);
    expect((fim as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('suffix');
  });

  it('every booking ended', async () => {
    await eventually(() => routerIdle(fe), 5000, 'an idle router');
  });
});
