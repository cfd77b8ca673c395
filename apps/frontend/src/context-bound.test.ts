/**
 * Issue 17: prompts that cannot fit the model's context are refused with 400 before tokenization,
 * from a lower bound on their tokens given by their length.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { maxTokenChars, minTokens, refuseIfCannotFit } from './context-bound.js';
import type { Frontend } from './frontend.js';
import { startFrontend } from './test-helpers.js';
import type { TextTokenizer } from './tokenizer/types.js';

/** A 5-entry vocabulary: the longest entry is "hello" (5 units), the longest special 7. */
function fakeTokenizer(specials: string[] = []): TextTokenizer & { decodes: number } {
  const vocab = ['a', 'bc', 'hello', ' ', 'xy'];
  const t = {
    name: 'fake',
    vocabSize: vocab.length,
    specialTokens: new Map(specials.map((s, i) => [s, 100 + i])),
    eosTokenIds: [],
    bosTokenIds: [],
    chunkSafe: true,
    decodes: 0,
    encodeText: () => {
      throw new Error('must not tokenize');
    },
    encode: () => {
      throw new Error('must not tokenize');
    },
    decode(ids: ArrayLike<number>) {
      t.decodes++;
      return vocab[ids[0]!]!;
    },
  };
  return t;
}

describe('the lower bound', () => {
  it('is ceil(length / (2 x longest entry)), the longest counting special tokens', () => {
    const t = fakeTokenizer();
    expect(maxTokenChars(t)).toBe(5);
    expect(maxTokenChars(fakeTokenizer(['<|end|>']))).toBe(7);
    // Cached per tokenizer: the vocabulary is decoded once.
    maxTokenChars(t);
    expect(t.decodes).toBe(5);
    // 1,000 units, longest 5, safety 2: at least ceil(1000 / 10) = 100 tokens.
    expect(minTokens('a'.repeat(1000), t, 100)).toBe(100);
    expect(minTokens('a'.repeat(1001), t, 100)).toBe(101);
    // Shorter than the context: never refused, and the vocabulary is not even read.
    const u = fakeTokenizer();
    expect(minTokens('a'.repeat(99), u, 100)).toBe(0);
    expect(u.decodes).toBe(0);
  });

  it('refuses at or over the context length with a 400 naming the field, never below', () => {
    const t = fakeTokenizer();
    expect(() => refuseIfCannotFit('a'.repeat(990), t, 100, 'messages')).not.toThrow(); // >= 99
    let err: unknown = null;
    try {
      refuseIfCannotFit('a'.repeat(1000), t, 100, 'prompt');
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ status: 400, detail: { field: 'prompt' } });
    expect((err as Error).message).toBe(
      "This model's maximum context length is 100 tokens. However, your prompt has at least 100 tokens (1000 characters), refused before tokenization.",
    );
  });
});

describe('through the HTTP API', () => {
  let fe: Frontend;
  let client: OpenAI;
  // 64 blocks of 16 tokens: a 1,024-token context.
  const CTX = 1024;
  beforeAll(async () => {
    fe = await startFrontend(['--mocker-workers', '1'], { embedded: { engine: { numGpuBlocks: 64 } } });
    client = new OpenAI({ baseURL: `${fe.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  });
  afterAll(async () => {
    await fe.close(0);
  });

  const tokenizeCount = async (): Promise<number> => {
    const text = await (await fetch(`${fe.url}/metrics`)).text();
    const line = text
      .split('\n')
      .find((l) => /^dynamo_frontend_tokenizer_latency_ms_count\{.*tokenize/.test(l));
    return line ? Number(line.split(' ').pop()) : 0;
  };

  it('a prompt that cannot fit is refused with 400 before it is tokenized; one that might fit gets the exact check', async () => {
    const tok = fe.service.encoderFor('mock-model').tokenizer;
    const longest = maxTokenChars(tok);
    const before = await tokenizeCount();
    // 2 x longest x 1,024 characters cannot be fewer than 1,024 tokens.
    const huge = 'word '.repeat(Math.ceil((2 * longest * CTX) / 5));
    const refused = (e: unknown) => e as { status: number; message: string; param?: string };
    const chat = await client.chat.completions
      .create({ model: 'mock-model', messages: [{ role: 'user', content: huge }], max_tokens: 1 })
      .then(() => null, refused);
    expect(chat?.status).toBe(400);
    expect(chat?.message).toMatch(
      /maximum context length is 1024 tokens.*at least \d+ tokens.*before tokenization/,
    );
    const completion = await client.completions
      .create({ model: 'mock-model', prompt: huge, max_tokens: 1 })
      .then(() => null, refused);
    expect(completion?.status).toBe(400);
    expect(completion?.message).toMatch(/before tokenization/);
    // Neither reached the tokenizer.
    expect(await tokenizeCount()).toBe(before);

    // 2,000 words (about 2,000 cl100k tokens, 10,000 characters) pass the bound but not the
    // exact check.
    const over = await client.completions
      .create({ model: 'mock-model', prompt: 'word '.repeat(2000), max_tokens: 1 })
      .then(() => null, refused);
    expect(over?.status).toBe(400);
    expect(over?.message).toMatch(
      /maximum context length is 1024 tokens\. However, your prompt has \d+ tokens\./,
    );
    expect(await tokenizeCount()).toBe(before + 1);
    // A prompt that fits is served.
    const ok = await client.completions.create({
      model: 'mock-model',
      prompt: 'word '.repeat(100),
      max_tokens: 1,
    });
    expect(ok.choices).toHaveLength(1);
  });
});
