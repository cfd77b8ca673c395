import { describe, expect, it } from 'vitest';
import { KvrError } from '@kvrouter/protocols';
import { migrationBudget } from '../service.js';
import { parseChatRequest, parseCompletionRequest } from './validate.js';

function fieldOf(f: () => unknown): string | undefined {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(KvrError);
    expect((e as KvrError).status).toBe(400);
    return (e as KvrError).detail?.field as string;
  }
  throw new Error('did not throw');
}

const base = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };

describe('parseChatRequest', () => {
  it('accepts a minimal body and fills the defaults', () => {
    const r = parseChatRequest(base);
    expect(r).toMatchObject({
      kind: 'chat',
      model: 'm',
      stream: false,
      includeUsage: false,
      maxTokens: null,
      stop: [],
      addGenerationPrompt: true,
    });
    expect(r.messages).toEqual([{ role: 'user', content: 'hi' }]);
  });

  it('keeps content parts as sent and tool calls', () => {
    const r = parseChatRequest({
      ...base,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'a' },
            { type: 'text', text: 'b' },
          ],
        },
        { role: 'assistant', content: null, tool_calls: [{ id: 't' }] },
      ],
    });
    expect(r.messages[0]!.content).toEqual([
      { type: 'text', text: 'a' },
      { type: 'text', text: 'b' },
    ]);
    expect(r.messages[1]!.content).toBeNull();
  });

  it('max_completion_tokens wins over max_tokens; stream_options needs stream', () => {
    expect(parseChatRequest({ ...base, max_tokens: 5, max_completion_tokens: 9 }).maxTokens).toBe(9);
    expect(fieldOf(() => parseChatRequest({ ...base, stream_options: { include_usage: true } }))).toBe(
      'stream_options',
    );
    expect(
      parseChatRequest({ ...base, stream: true, stream_options: { include_usage: true } }).includeUsage,
    ).toBe(true);
  });

  it('names the offending field', () => {
    expect(fieldOf(() => parseChatRequest({ ...base, model: '' }))).toBe('model');
    expect(
      fieldOf(() =>
        parseChatRequest({ ...base, messages: [{ role: 'user', content: [{ type: 'image_url' }] }] }),
      ),
    ).toBe('messages[0].content[0].image_url.url');
    expect(
      fieldOf(() =>
        parseChatRequest({ ...base, messages: [{ role: 'user', content: [{ type: 'input_audio' }] }] }),
      ),
    ).toBe('messages[0].content[0].type');
    expect(fieldOf(() => parseChatRequest({ ...base, stop: ['a', 'b', 'c', 'd', 'e'] }))).toBe('stop');
    expect(fieldOf(() => parseChatRequest({ ...base, top_p: 1.5 }))).toBe('top_p');
    expect(fieldOf(() => parseChatRequest({ ...base, logprobs: 3 }))).toBe('logprobs');
    expect(fieldOf(() => parseChatRequest({ ...base, top_logprobs: 3 }))).toBe('top_logprobs');
    expect(fieldOf(() => parseChatRequest({ ...base, best_of: 2 }))).toBe('best_of');
    expect(fieldOf(() => parseChatRequest({ ...base, max_tokens: 0 }))).toBe('max_tokens');
    expect(fieldOf(() => parseChatRequest({ ...base, max_tokens: 4294967296 }))).toBe('max_tokens');
  });

  it('nvext.token_data makes messages optional; nvext u64 ids stay exact', () => {
    const r = parseChatRequest({
      model: 'm',
      nvext: { token_data: [1, 2, 3], backend_instance_id: 18446744073709551615n },
    });
    expect(Array.from(r.nvext.token_data!)).toEqual([1, 2, 3]);
    expect(r.nvext.backend_instance_id).toBe(18446744073709551615n);
    expect(r.messages).toEqual([]);
  });
});

describe('parseCompletionRequest', () => {
  it('string, one-string array, token ids and one nested token list', () => {
    expect(parseCompletionRequest({ model: 'm', prompt: 'x' }).prompt).toBe('x');
    expect(parseCompletionRequest({ model: 'm', prompt: ['y'] }).prompt).toBe('y');
    expect(Array.from(parseCompletionRequest({ model: 'm', prompt: [5, 6] }).promptTokens!)).toEqual([5, 6]);
    expect(Array.from(parseCompletionRequest({ model: 'm', prompt: [[7]] }).promptTokens!)).toEqual([7]);
    expect(fieldOf(() => parseCompletionRequest({ model: 'm', prompt: [1, 'a'] }))).toBe('prompt[1]');
    expect(fieldOf(() => parseCompletionRequest({ model: 'm', prompt: [[1], 2] }))).toBe('prompt[1]');
    expect(fieldOf(() => parseCompletionRequest({ model: 'm', prompt: [1], suffix: 'y' }))).toBe('suffix');
    expect(fieldOf(() => parseCompletionRequest({ model: 'm', prompt: 'x', echo: true, logprobs: 1 }))).toBe(
      'echo',
    );
  });

  it('batched prompts, suffix, logprobs', () => {
    const r = parseCompletionRequest({ model: 'm', prompt: ['a', [1, 2]], n: 2, logprobs: 2 });
    expect(r.batch.map((b) => b.prompt)).toEqual(['a', null]);
    expect(Array.from(r.batch[1]!.promptTokens!)).toEqual([1, 2]);
    expect(r.n).toBe(2);
    expect(r.logprobs).toBe(2);
  });
});

describe('request surface (chat)', () => {
  it('sampling, guided decoding, min_tokens, logit_bias, logprobs, n', () => {
    const r = parseChatRequest({
      ...base,
      n: 3,
      seed: 7,
      min_p: 0.1,
      min_tokens: 2,
      max_tokens: 5,
      logit_bias: { '50256': -100 },
      logprobs: true,
      top_logprobs: 2,
      response_format: { type: 'json_schema', json_schema: { name: 's', schema: { type: 'object' } } },
    });
    expect(r.n).toBe(3);
    expect(r.minTokens).toBe(2);
    expect(r.logprobs).toBe(2);
    expect(r.sampling).toEqual({
      seed: 7,
      min_p: 0.1,
      logit_bias: { '50256': -100 },
      guided_decoding: { json: { type: 'object' } },
    });
    expect(
      parseChatRequest({ ...base, response_format: { type: 'json_object' } }).sampling.guided_decoding,
    ).toEqual({
      json_object: true,
    });
    expect(parseChatRequest({ ...base, guided_regex: 'a+' }).sampling.guided_decoding).toEqual({
      regex: 'a+',
    });
    expect(fieldOf(() => parseChatRequest({ ...base, guided_regex: 'a', guided_choice: ['x'] }))).toBe(
      'guided_choice',
    );
    expect(fieldOf(() => parseChatRequest({ ...base, min_tokens: 9, max_tokens: 2 }))).toBe('min_tokens');
    expect(fieldOf(() => parseChatRequest({ ...base, logit_bias: { x: 1 } }))).toBe('logit_bias.x');
    expect(fieldOf(() => parseChatRequest({ ...base, logit_bias: { '1': 101 } }))).toBe('logit_bias.1');
    expect(fieldOf(() => parseChatRequest({ ...base, response_format: { type: 'xml' } }))).toBe(
      'response_format.type',
    );
  });

  it('tools and tool_choice', () => {
    const tools = [
      { type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { a: {} } } } },
      { type: 'function', function: { name: 'g' } },
    ];
    expect(parseChatRequest({ ...base, tools }).toolMode).toBe('auto');
    const none = parseChatRequest({ ...base, tools, tool_choice: 'none' });
    expect(none.toolMode).toBeNull();
    expect(none.tools).toBeUndefined();
    const named = parseChatRequest({
      ...base,
      tools,
      tool_choice: { type: 'function', function: { name: 'f' } },
    });
    expect(named.toolMode).toEqual({ name: 'f' });
    expect(named.sampling.guided_decoding).toEqual({ json: { type: 'object', properties: { a: {} } } });
    const req = parseChatRequest({ ...base, tools, tool_choice: 'required' });
    expect((req.sampling.guided_decoding!.json as { items: { anyOf: unknown[] } }).items.anyOf).toHaveLength(
      2,
    );
    expect(fieldOf(() => parseChatRequest({ ...base, tool_choice: 'auto' }))).toBe('tool_choice');
    expect(
      fieldOf(() =>
        parseChatRequest({ ...base, tools, tool_choice: { type: 'function', function: { name: 'h' } } }),
      ),
    ).toBe('tool_choice.function.name');
    expect(fieldOf(() => parseChatRequest({ ...base, tools: [{ type: 'x' }] }))).toBe('tools[0]');
  });

  it('image parts are collected in order', () => {
    const r = parseChatRequest({
      ...base,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'what is this?' },
            { type: 'image_url', image_url: { url: 'https://x.test/a.png' } },
          ],
        },
      ],
    });
    expect(r.images).toEqual([{ url: 'https://x.test/a.png' }]);
  });
});

describe('migrationBudget (§14: the smaller non-zero value wins)', () => {
  it.each([
    [0, 0, 0],
    [3, 0, 3],
    [0, 2, 2],
    [3, 2, 2],
    [1, 5, 1],
  ])('flag %i, card %i → %i', (flag, card, want) => {
    expect(migrationBudget(flag, card)).toBe(want);
  });
});
