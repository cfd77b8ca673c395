/**
 * The official openai npm client against the frontend with embedded simulated workers: chat and
 * completions, streaming and not, usage and cached tokens, and the client's error classes.
 */
import * as cl100k from 'gpt-tokenizer/encoding/cl100k_base';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Frontend } from '../frontend.js';
import { routerIdle, startFrontend, eventually } from '../test-helpers.js';

let fe: Frontend;
let client: OpenAI;
const MODEL = 'mock-model';

beforeAll(async () => {
  fe = await startFrontend(['--router-mode', 'kv', '--router-event-threads', '1']);
  client = new OpenAI({ baseURL: `${fe.url}/v1`, apiKey: 'unused', maxRetries: 0 });
});
afterAll(async () => {
  await fe.close(0);
});

describe('openai client', () => {
  it('lists the embedded model', async () => {
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual([MODEL]);
    expect(models.data[0]!.object).toBe('model');
  });

  it('chat completion, unary: max_tokens tokens, finish_reason length, usage adds up', async () => {
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: 'Say hello.' },
      ],
      max_tokens: 7,
    });
    expect(r.object).toBe('chat.completion');
    expect(r.choices).toHaveLength(1);
    expect(r.choices[0]!.message.role).toBe('assistant');
    expect(typeof r.choices[0]!.message.content).toBe('string');
    expect(r.choices[0]!.finish_reason).toBe('length');
    expect(r.usage!.completion_tokens).toBe(7);
    // ChatML: "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nSay hello.<|im_end|>\n<|im_start|>assistant\n"
    // = 5 special tokens (3 im_start, 2 im_end) + the BPE of the four text pieces between them,
    // counted here with the vocabulary package directly.
    const bpe = (t: string) => cl100k.encode(t).length;
    const isl =
      5 + bpe('system\nYou are terse.') + 2 * bpe('\n') + bpe('user\nSay hello.') + bpe('assistant\n');
    expect(r.usage!.prompt_tokens).toBe(isl);
    expect(r.usage!.total_tokens).toBe(isl + 7);
    expect(r.usage!.prompt_tokens_details!.cached_tokens).toBeGreaterThanOrEqual(0);
  });

  it('chat completion, streaming with include_usage: role first, content deltas, one finish, usage chunk last', async () => {
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Count to five.' }],
      max_tokens: 5,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
    const finishes = chunks.flatMap((c) => c.choices.map((ch) => ch.finish_reason).filter((f) => f));
    expect(finishes).toEqual(['length']);
    const last = chunks[chunks.length - 1]!;
    expect(last.choices).toEqual([]);
    expect(last.usage!.completion_tokens).toBe(5);
    for (const c of chunks.slice(0, -1)) expect(c.usage).toBeNull();
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
    expect(text.length).toBeGreaterThan(0);
  });

  it('completions, unary and streaming; token-id prompts', async () => {
    const r = await client.completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 4 });
    expect(r.object).toBe('text_completion');
    expect(r.choices[0]!.finish_reason).toBe('length');
    // "Once upon a time" = ["Once", " upon", " a", " time"] in cl100k (no BOS for tiktoken vocabularies).
    expect(r.usage!.prompt_tokens).toBe(4);
    expect(r.usage!.completion_tokens).toBe(4);

    const s = await client.completions.create({
      model: MODEL,
      prompt: [1, 2, 3, 4, 5, 6],
      max_tokens: 3,
      stream: true,
    });
    let n = 0;
    let finish: string | null = null;
    for await (const c of s) {
      n++;
      if (c.choices[0]?.finish_reason) finish = c.choices[0].finish_reason;
    }
    expect(n).toBeGreaterThan(0);
    expect(finish).toBe('length');
  });

  it('a repeated conversation hits the prefix cache of the worker it was routed to (kv mode)', async () => {
    const content = 'lorem ipsum dolor sit amet '.repeat(60);
    const ask = () =>
      client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content }], max_tokens: 2 });
    const first = await ask();
    // The workers' KV events reach the index asynchronously.
    let second = await ask();
    for (let i = 0; i < 20 && second.usage!.prompt_tokens_details!.cached_tokens === 0; i++)
      second = await ask();
    expect(first.usage!.prompt_tokens).toBe(second.usage!.prompt_tokens);
    // bs 16: every full block but the last computed token's block is reusable.
    const isl = second.usage!.prompt_tokens;
    expect(second.usage!.prompt_tokens_details!.cached_tokens).toBe(Math.floor((isl - 1) / 16) * 16);
  });

  it('errors surface as the client error classes', async () => {
    await expect(
      client.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] }),
    ).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(client.chat.completions.create({ model: MODEL, messages: [] })).rejects.toBeInstanceOf(
      OpenAI.BadRequestError,
    );
    const e: unknown = await client.chat.completions
      .create({ model: MODEL, messages: [{ role: 'user', content: 'x' }], max_tokens: -1 })
      .then(
        () => null,
        (x: unknown) => x,
      );
    expect(e).toBeInstanceOf(OpenAI.BadRequestError);
    expect((e as Error).message).toContain('max_tokens');
  });

  it('leaves no booking behind', async () => {
    await eventually(() => routerIdle(fe), 5000, 'idle router');
  });
});
