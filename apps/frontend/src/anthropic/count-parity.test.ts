/**
 * `/v1/messages/count_tokens` on real chat templates and tokenizers (`--model-path` with the
 * tokenizer-parity fixtures): Anthropic-shaped versions of fixture conversations, written by hand,
 * count exactly the tokens of the reference rendering (Python jinja2 + Hugging Face tokenizers)
 * of the OpenAI-shaped originals in packages/testkit/fixtures/tokenizer-parity.
 */
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { parityFixture, parityModelDir } from '@kvrouter/testkit/parity';
import { startFrontend } from '../test-helpers.js';

beforeAll(() => {
  // The reference pins strftime_now to this day (templates that print the date).
  vi.useFakeTimers({ toFake: ['Date'] });
  vi.setSystemTime(new Date(2024, 6, 26, 12, 0, 0));
});
afterAll(() => {
  vi.useRealTimers();
});

const weather = {
  name: 'get_weather',
  description: 'Get the current weather in a city',
  input_schema: {
    type: 'object' as const,
    properties: {
      city: { type: 'string', description: 'City name, e.g. 東京 or Paris' },
      unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
    },
    required: ['city'],
  },
};

/** Fixture conversation id → the same conversation as an Anthropic count_tokens body (minus model). */
const CASES: Record<string, Omit<Anthropic.MessageCountTokensParams, 'model'>> = {
  'system-user': {
    system: 'You are a helpful assistant.',
    messages: [{ role: 'user', content: 'What is the capital of France?' }],
  },
  'multi-turn': {
    system: [{ type: 'text', text: 'You answer in one sentence.' }],
    messages: [
      { role: 'user', content: 'Name a prime number.' },
      { role: 'assistant', content: 'Seven is a prime number.' },
      { role: 'user', content: 'And an even one?' },
      { role: 'assistant', content: [{ type: 'text', text: 'Two is the only even prime.' }] },
      { role: 'user', content: [{ type: 'text', text: 'Why is that?' }] },
    ],
  },
  // Object arguments reach the template as compact JSON (the serving rule the reference applies too).
  'toolcall-object-args': {
    tools: [weather],
    messages: [
      { role: 'user', content: 'Weather?' },
      {
        role: 'assistant',
        content: [
          { type: 'tool_use', id: 'o1', name: 'get_weather', input: { city: 'Oslo', unit: 'celsius' } },
        ],
      },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'o1', content: 'cold' }] },
    ],
  },
  'reasoning-history': {
    messages: [
      { role: 'user', content: 'Is 97 prime?' },
      {
        role: 'assistant',
        content: [
          {
            type: 'thinking',
            thinking: 'Check divisors up to 9: 2, 3, 5, 7 do not divide 97.',
            signature: '',
          },
          { type: 'text', text: 'Yes, 97 is prime.' },
        ],
      },
      { role: 'user', content: 'And 91?' },
    ],
  },
  'enable-thinking-false': {
    thinking: { type: 'disabled' },
    messages: [{ role: 'user', content: 'Quick: capital of Italy?' }],
  },
  'continue-final': {
    messages: [
      { role: 'user', content: 'Write a haiku about rain.' },
      { role: 'assistant', content: 'Soft rain on the roof' },
    ],
  },
  'parts-history': {
    system: 'Describe images briefly.',
    messages: [
      {
        role: 'user',
        content: [
          { type: 'image', source: { type: 'url', url: 'https://example.com/cat.jpg' } },
          { type: 'text', text: 'And this one?' },
        ],
      },
      { role: 'assistant', content: 'A cat on a sofa.' },
      { role: 'user', content: 'Thanks 🐈' },
    ],
  },
};

// Two template families (ChatML with <think>, DeepSeek's `content is none`); llama3_1 and gptoss
// matched too when run, left out to keep this file to seconds (each tokenizer takes seconds to load).
describe.each(['qwen3', 'deepseek_v3'] as const)('count_tokens parity: %s', (name) => {
  it('each Anthropic conversation counts the reference ids of its OpenAI original', async () => {
    const fe = await startFrontend([
      ...['--model-path', parityModelDir(name), '--model-name', name],
      ...['--mocker-workers', '1', '--enable-anthropic-api'],
    ]);
    try {
      const client = new Anthropic({ baseURL: fe.url, apiKey: 'unused', maxRetries: 0 });
      const ref = new Map(parityFixture(name).cases.map((c) => [c.id, c.count]));
      const got: Record<string, number> = {};
      const want: Record<string, number> = {};
      for (const [id, body] of Object.entries(CASES)) {
        want[id] = ref.get(id)!;
        got[id] = (await client.messages.countTokens({ model: name, ...body })).input_tokens;
      }
      expect(got).toEqual(want);

      // A breakpoint on the system prompt: its prefix is the rendered system turn alone, in the
      // reference ids of system-user: Qwen3 "<|im_start|>system\n…<|im_end|>\n" = the first 11 ids;
      // DeepSeek V3 "<｜begin▁of▁sentence｜>You are a helpful assistant." = the first 7 (then <｜User｜>).
      const r = await client.messages.create({
        model: name,
        max_tokens: 1,
        system: [
          { type: 'text', text: 'You are a helpful assistant.', cache_control: { type: 'ephemeral' } },
        ],
        messages: [{ role: 'user', content: 'What is the capital of France?' }],
      });
      const prefix = { qwen3: 11, deepseek_v3: 7 }[name];
      // Nothing was dispatched before on this fresh fleet: nothing to read from cache.
      expect(r.usage).toMatchObject({
        cache_read_input_tokens: 0,
        cache_creation_input_tokens: prefix,
        input_tokens: ref.get('system-user')! - prefix,
      });
    } finally {
      await fe.close(0);
    }
  });
});
