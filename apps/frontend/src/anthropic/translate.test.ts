/**
 * The Anthropic → chat translation and the usage / stop-reason / block rules, on hand-written
 * inputs with hand-written expectations (no frontend).
 */
import { KvrError } from '@kvrouter/protocols';
import { describe, expect, it } from 'vitest';
import { BlockBuilder, commonPrefix, stopReason, usageOf } from './blocks.js';
import { parseMessagesRequest } from './translate.js';

const base = { model: 'm', max_tokens: 16 };
const user = (content: unknown) => ({ role: 'user', content });

function fieldOf(f: () => unknown): string | null {
  try {
    f();
  } catch (e) {
    return e instanceof KvrError ? ((e.detail?.field as string) ?? null) : 'not a KvrError';
  }
  return null;
}

describe('parseMessagesRequest', () => {
  it('a tool round trip becomes system, user, assistant tool_calls, tool (named), then the user text', () => {
    const { chat } = parseMessagesRequest({
      ...base,
      system: 'S',
      tools: [{ name: 'add', description: 'sum', input_schema: { type: 'object' } }],
      tool_choice: { type: 'any', disable_parallel_tool_use: true },
      messages: [
        user('1+2?'),
        {
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: 'easy', signature: 'x' },
            { type: 'text', text: 'Adding.' },
            { type: 'tool_use', id: 't1', name: 'add', input: { a: 1, b: 2 } },
          ],
        },
        user([
          { type: 'text', text: 'here:' },
          { type: 'tool_result', tool_use_id: 't1', content: [{ type: 'text', text: '3' }] },
        ]),
      ],
    });
    expect(chat.messages).toEqual([
      { role: 'system', content: 'S' },
      { role: 'user', content: '1+2?' },
      {
        role: 'assistant',
        content: 'Adding.',
        reasoning_content: 'easy',
        tool_calls: [{ id: 't1', type: 'function', function: { name: 'add', arguments: '{"a":1,"b":2}' } }],
      },
      { role: 'tool', tool_call_id: 't1', name: 'add', content: [{ type: 'text', text: '3' }] },
      { role: 'user', content: [{ type: 'text', text: 'here:' }] },
    ]);
    // Templates print tools as JSON: OpenAI's key order.
    expect(JSON.stringify(chat.tools)).toBe(
      '[{"type":"function","function":{"name":"add","description":"sum","parameters":{"type":"object"}}}]',
    );
    expect(chat.toolMode).toBe('required');
    expect(chat.parallelToolCalls).toBe(false);
    expect(chat.maxTokens).toBe(16);
    expect(chat.addGenerationPrompt).toBe(true);
  });

  it('sampling, metadata, thinking, stop sequences, a final assistant turn continued', () => {
    const { chat, prewarm } = parseMessagesRequest({
      ...base,
      max_tokens: 4096,
      temperature: 0.5,
      top_p: 0.9,
      top_k: 40,
      metadata: { user_id: 'u-1' },
      thinking: { type: 'enabled', budget_tokens: 2048 },
      stop_sequences: ['a', 'b', 'c', 'd', 'e'],
      messages: [user('Q'), { role: 'assistant', content: 'The answer is (' }],
    });
    expect(prewarm).toBe(false);
    expect(chat.sampling).toEqual({ temperature: 0.5, top_p: 0.9, top_k: 40 });
    expect(chat.user).toBe('u-1');
    expect(chat.templateKwargs).toEqual({ enable_thinking: true, thinking: true });
    expect(chat.stop).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(chat.continueFinalMessage).toBe(true);
    expect(chat.addGenerationPrompt).toBe(false);
  });

  it('max_tokens 0 is a prewarm: one token is generated and dropped', () => {
    const r = parseMessagesRequest({ ...base, max_tokens: 0, messages: [user('x')] });
    expect(r.prewarm).toBe(true);
    expect(r.chat.maxTokens).toBe(1);
  });

  it('cache_control: the last breakpoint cuts the prefix; it adds the full-credit routing hint unless nvext has one', () => {
    const r = parseMessagesRequest({
      ...base,
      system: [{ type: 'text', text: 'S', cache_control: { type: 'ephemeral' } }],
      messages: [
        user([
          { type: 'text', text: 'A', cache_control: { type: 'ephemeral', ttl: '1h' } },
          { type: 'text', text: 'B' },
        ]),
        { role: 'assistant', content: 'ok' },
        user('C'),
      ],
    });
    expect(r.cache.breakpoints).toBe(2);
    expect(r.cache.ttl).toBe('1h');
    expect(r.cache.prefix!.messages).toEqual([
      { role: 'system', content: [{ type: 'text', text: 'S' }] },
      { role: 'user', content: [{ type: 'text', text: 'A' }] },
    ]);
    expect(r.cache.prefix!.addGenerationPrompt).toBe(false);
    expect(r.chat.nvext.agent_hints).toEqual({ kv_overlap_score_credit: 1 });

    const own = parseMessagesRequest({
      ...base,
      nvext: { agent_hints: { kv_overlap_score_credit: 0.25, priority: 2 } },
      messages: [user([{ type: 'text', text: 'A', cache_control: { type: 'ephemeral' } }])],
    });
    expect(own.chat.nvext.agent_hints).toEqual({ kv_overlap_score_credit: 0.25, priority: 2 });

    const none = parseMessagesRequest({ ...base, messages: [user('A')] });
    expect(none.cache).toEqual({ breakpoints: 0, ttl: null, prefix: null });
    expect(none.chat.nvext.agent_hints).toBeUndefined();

    // A breakpoint on the tools only: the prefix is the tools (no message).
    const tools = parseMessagesRequest({
      ...base,
      tools: [{ name: 'f', input_schema: { type: 'object' }, cache_control: { type: 'ephemeral' } }],
      messages: [user('A')],
    });
    expect(tools.cache.prefix!.messages).toEqual([]);
    expect(tools.cache.prefix!.tools).toHaveLength(1);

    // Top-level cache_control: on the last block of the last message.
    const top = parseMessagesRequest({
      ...base,
      cache_control: { type: 'ephemeral' },
      messages: [user('A'), { role: 'assistant', content: 'B' }, user('C')],
    });
    expect(top.cache.breakpoints).toBe(1);
    expect(top.cache.prefix!.messages.map((m) => m.content)).toEqual(['A', 'B', 'C']);
  });

  it('refusals name the field (Anthropic dotted paths)', () => {
    const bp = { type: 'text', text: 't', cache_control: { type: 'ephemeral' } };
    const cases: [Record<string, unknown>, string][] = [
      [{ messages: [user('x')], max_tokens: undefined }, 'max_tokens'],
      [{ messages: [user('x')], max_tokens: 1.5 }, 'max_tokens'],
      [{ messages: [] }, 'messages'],
      [{ model: '', messages: [user('x')] }, 'model'],
      [{ messages: [{ role: 'tool', content: 'x' }] }, 'messages.0.role'],
      [{ messages: [user([{ type: 'text' }])] }, 'messages.0.content.0.text'],
      [{ messages: [user([{ type: 'tool_result' }])] }, 'messages.0.content.0.tool_use_id'],
      [
        {
          messages: [
            user([{ type: 'image', source: { type: 'base64', media_type: 'image/bmp', data: '' } }]),
          ],
        },
        'messages.0.content.0.source.media_type',
      ],
      [
        { messages: [{ role: 'assistant', content: [{ type: 'image', source: {} }] }] },
        'messages.0.content.0.type',
      ],
      [{ messages: [user('x')], system: [{ type: 'image' }] }, 'system.0.type'],
      [{ messages: [user('x')], tools: [{ name: 'bad name', input_schema: {} }] }, 'tools.0.name'],
      [
        { messages: [user('x')], tools: [{ type: 'web_search_20250305', name: 'web_search' }] },
        'tools.0.type',
      ],
      [
        { messages: [user('x')], tools: [{ name: 'f', input_schema: {} }], tool_choice: { type: 'tool' } },
        'tool_choice.name',
      ],
      [
        {
          messages: [user('x')],
          tools: [{ name: 'f', input_schema: {} }],
          tool_choice: { type: 'tool', name: 'g' },
        },
        'tool_choice.name',
      ],
      [{ messages: [user('x')], top_p: 2 }, 'top_p'],
      [{ messages: [user('x')], top_k: -1 }, 'top_k'],
      [{ messages: [user('x')], stop_sequences: ['a', ''] }, 'stop_sequences.1'],
      [{ messages: [user('x')], metadata: { user_id: 'u'.repeat(257) } }, 'metadata.user_id'],
      [
        { messages: [user('x')], thinking: { type: 'enabled', budget_tokens: 100 } },
        'thinking.budget_tokens',
      ],
      [{ messages: [user('x')], thinking: { type: 'sometimes' } }, 'thinking.type'],
      [
        { messages: [user([{ ...bp, cache_control: { type: 'persistent' } }])] },
        'messages.0.content.0.cache_control.type',
      ],
      [
        { messages: [user([{ ...bp, cache_control: { type: 'ephemeral', ttl: '2h' } }])] },
        'messages.0.content.0.cache_control.ttl',
      ],
      [{ messages: [user([bp, bp, bp, bp, bp])] }, 'messages.0.content.4.cache_control'],
      [
        { messages: [user('x')], nvext: { agent_hints: { kv_overlap_score_credit: 2 } } },
        'nvext.agent_hints.kv_overlap_score_credit',
      ],
    ];
    for (const [body, field] of cases)
      expect(
        fieldOf(() => parseMessagesRequest({ ...base, ...body })),
        field,
      ).toBe(field);
    // count_tokens takes no max_tokens.
    expect(parseMessagesRequest({ model: 'm', messages: [user('x')] }, true).chat.maxTokens).toBeNull();
  });
});

describe('usage, stop reason, blocks', () => {
  it('usage sums to the prompt: read = engine reuse, creation = breakpoint prefix not read, input = the rest', () => {
    // 100-token prompt, 48 reused, prefix of 80: 32 of the prefix computed now, 20 after it.
    expect(usageOf(100, 48, 80, 5, '1h')).toEqual({
      input_tokens: 20,
      output_tokens: 5,
      cache_creation_input_tokens: 32,
      cache_read_input_tokens: 48,
      cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 32 },
    });
    // Reuse beyond the prefix: nothing to create.
    expect(usageOf(100, 96, 80, 1)).toMatchObject({ input_tokens: 4, cache_creation_input_tokens: 0 });
    // No breakpoint: what was not reused is plain input.
    expect(usageOf(100, 32, 0, 1)).toMatchObject({ input_tokens: 68, cache_creation_input_tokens: 0 });
    expect(commonPrefix([1, 2, 3, 4], [1, 2, 9])).toBe(2);
  });

  it('stop reasons', () => {
    expect(stopReason('length', undefined, true)).toBe('max_tokens');
    expect(stopReason('stop', 'X', true)).toBe('stop_sequence');
    expect(stopReason('stop', undefined, true)).toBe('tool_use');
    expect(stopReason('stop', undefined, false)).toBe('end_turn');
  });

  it('one block open at a time; a thinking block closes with a signature; tool input parsed at the end', () => {
    const b = new BlockBuilder();
    const evs = [
      ...b.push({ reasoning_content: 'r' }),
      ...b.push({ content: 'hi' }),
      ...b.push({
        tool_calls: [
          { index: 0, id: 'toolu_1', type: 'function', function: { name: 'f', arguments: '{"a"' } },
        ],
      }),
      ...b.push({ tool_calls: [{ index: 0, function: { arguments: ': 1}' } }] }),
      ...b.push({
        tool_calls: [{ index: 1, id: 'toolu_2', type: 'function', function: { name: 'g', arguments: '' } }],
      }),
      ...b.finish(),
    ];
    expect(evs.map((e) => `${e.type}:${e.index as number}`)).toEqual([
      'content_block_start:0',
      'content_block_delta:0',
      'content_block_delta:0',
      'content_block_stop:0',
      'content_block_start:1',
      'content_block_delta:1',
      'content_block_stop:1',
      'content_block_start:2',
      'content_block_delta:2',
      'content_block_delta:2',
      'content_block_stop:2',
      'content_block_start:3',
      'content_block_stop:3',
    ]);
    expect(evs[2]!.delta).toEqual({ type: 'signature_delta', signature: '' });
    expect(b.content).toEqual([
      { type: 'thinking', thinking: 'r', signature: '' },
      { type: 'text', text: 'hi' },
      { type: 'tool_use', id: 'toolu_1', name: 'f', input: { a: 1 } },
      { type: 'tool_use', id: 'toolu_2', name: 'g', input: {} },
    ]);
    expect(b.calledTools).toBe(true);
  });
});
