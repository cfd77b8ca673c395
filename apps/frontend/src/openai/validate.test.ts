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

  it('joins text content parts and keeps tool calls', () => {
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
    expect(r.messages[0]!.content).toBe('ab');
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
    ).toBe('messages[0].content[0].type');
    expect(fieldOf(() => parseChatRequest({ ...base, stop: ['a', 'b', 'c', 'd', 'e'] }))).toBe('stop');
    expect(fieldOf(() => parseChatRequest({ ...base, top_p: 1.5 }))).toBe('top_p');
    expect(fieldOf(() => parseChatRequest({ ...base, logprobs: true }))).toBe('logprobs');
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
    expect(fieldOf(() => parseCompletionRequest({ model: 'm', prompt: 'x', suffix: 'y' }))).toBe('suffix');
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
