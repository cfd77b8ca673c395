/**
 * Turns of one conversation tokenized one after the other: the key, the waiting, and with Qwen3's
 * real tokenizer and a tokenizer thread, what it saves (turns that overlap a new session's first
 * turn tokenize only what they add, instead of the whole 25 000-character context each).
 */
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CORPUS_FILE } from '@kvrouter/testkit/parity';
import { FAMILIES, familyDir } from '@kvrouter/tokenizer/testing';
import { PromptEncoder } from '../tokenizer/encoder.js';
import { loadTokenizer, type LoadedTokenizer } from '../tokenizer/load.js';
import { TokenizerPool } from '../tokenizer/pool.js';
import type { TemplateMessage } from '../tokenizer/template.js';
import type { EncodeStats } from '../tokenizer/types.js';
import { SINGLE_FLIGHT_CHARS, SingleFlight, conversationKey } from './single-flight.js';

const long = (c: string) => c.repeat(SINGLE_FLIGHT_CHARS);

describe('conversationKey', () => {
  it('one key for every turn of a conversation; system prompts keyed with the next message', () => {
    const sys = { role: 'system', content: long('s') };
    const t1 = [sys, { role: 'user', content: 'question 1' }];
    const t2 = [...t1, { role: 'assistant', content: 'answer' }, { role: 'user', content: 'question 2' }];
    expect(conversationKey(t1)).not.toBeNull();
    expect(conversationKey(t2)).toBe(conversationKey(t1));
    // One system prompt, another first question: another conversation.
    expect(conversationKey([sys, { role: 'user', content: 'question 3' }])).not.toBe(conversationKey(t1));
    // A long user message first: keyed on it alone.
    const u = { role: 'user', content: long('u') };
    expect(conversationKey([u])).toBe(conversationKey([u, { role: 'assistant', content: 'x' }]));
  });

  it('null for a short first message or content that is not a string', () => {
    expect(conversationKey([{ role: 'user', content: 'x'.repeat(SINGLE_FLIGHT_CHARS - 1) }])).toBeNull();
    expect(conversationKey([{ role: 'user', content: [{ type: 'text', text: long('p') }] }])).toBeNull();
    expect(
      conversationKey([
        { role: 'system', content: long('s') },
        { role: 'user', content: null },
      ]),
    ).toBeNull();
    expect(conversationKey([])).toBeNull();
  });
});

describe('SingleFlight', () => {
  it('three turns queued behind a running one start one after the other, in arrival order', async () => {
    const sf = new SingleFlight();
    const log: string[] = [];
    const gates: (() => void)[] = [];
    const run = (n: number) =>
      sf.run('k', () => {
        log.push(`start ${n}`);
        return new Promise<void>((r) => gates.push(() => (log.push(`end ${n}`), r())));
      });
    const runs = [run(1), run(2), run(3)];
    const tick = () => new Promise((r) => setImmediate(r));
    await tick();
    expect(log).toEqual(['start 1']);
    gates.shift()!();
    await tick();
    // The third waits for the second, not only for the first.
    expect(log).toEqual(['start 1', 'end 1', 'start 2']);
    gates.shift()!();
    await tick();
    expect(log).toEqual(['start 1', 'end 1', 'start 2', 'end 2', 'start 3']);
    gates.shift()!();
    await Promise.all(runs);
    expect(sf.size).toBe(0);
  });

  it('a run waits until the previous run of its key settled (also a failed one); other keys do not wait', async () => {
    const sf = new SingleFlight();
    const log: string[] = [];
    let release1!: () => void;
    let fail2!: (e: Error) => void;
    const r1 = sf.run('a', () => {
      log.push('start 1');
      return new Promise<number>((r) => (release1 = () => r(1)));
    });
    const r2 = sf.run('a', () => {
      log.push('start 2');
      return new Promise<number>((_, rej) => (fail2 = rej));
    });
    const r3 = sf.run('b', async () => {
      log.push('start b');
      return 3;
    });
    expect(await r3).toBe(3);
    expect(log).toEqual(['start 1', 'start b']);
    release1();
    expect(await r1).toBe(1);
    await new Promise((r) => setImmediate(r));
    expect(log).toEqual(['start 1', 'start b', 'start 2']);
    const r4 = sf.run('a', async () => {
      log.push('start 4');
      return 4;
    });
    fail2(new Error('tokenizer failed'));
    await expect(r2).rejects.toThrow('tokenizer failed');
    expect(await r4).toBe(4);
    expect(log).toEqual(['start 1', 'start b', 'start 2', 'start 4']);
    await new Promise((r) => setImmediate(r));
    expect(sf.size).toBe(0);
    // No key: runs at once.
    expect(await sf.run(null, async () => 5)).toBe(5);
  });
});

describe('overlapping turns of a new conversation, Qwen3 with a tokenizer thread', () => {
  let loaded: LoadedTokenizer;
  let pool: TokenizerPool;
  beforeAll(async () => {
    loaded = loadTokenizer(
      { kind: 'hf', dir: familyDir(FAMILIES.find((f) => f.name === 'qwen3')!) },
      () => undefined,
    );
    pool = new TokenizerPool(loaded.spec, 1, { budgetMs: 0, encoder: { mode: 'fastokens' } });
    await pool.whenReady();
  });
  afterAll(() => pool.close());

  const encoder = () =>
    new PromptEncoder({ tokenizer: loaded.tokenizer, mode: 'fastokens', pool, template: loaded.template });
  // A new session: a 25 000-character context (over the 16 384 that go to the thread), then turns.
  const context = fs.readFileSync(CORPUS_FILE, 'utf8').slice(1000, 26_000);
  const turns: TemplateMessage[][] = [
    [
      { role: 'system', content: context },
      { role: 'user', content: 'q1' },
    ],
  ];
  for (let k = 2; k <= 3; k++)
    turns.push([
      ...turns.at(-1)!,
      { role: 'assistant', content: `a${k - 1}` },
      { role: 'user', content: `q${k}` },
    ]);
  const encodeAll = (enc: PromptEncoder, sf: SingleFlight | null) =>
    Promise.all(
      turns.map(async (m) => {
        const stats: EncodeStats = { tokenizedChars: 0, offloaded: false };
        const go = () => enc.encodeChat(loaded.template, m, { addGenerationPrompt: true }, 1e9, stats);
        const ids = await (sf ? sf.run(conversationKey(m), go) : go());
        return { ids, stats };
      }),
    );

  it('each later turn tokenizes only its own messages, with the same ids as alone', async () => {
    const without = await encodeAll(encoder(), null);
    // Without waiting, all three encode the whole context (on the thread).
    for (const r of without) expect(r.stats.tokenizedChars).toBeGreaterThan(context.length);
    const withSf = await encodeAll(encoder(), new SingleFlight());
    expect(withSf[0]!.stats.tokenizedChars).toBeGreaterThan(context.length);
    expect(withSf[0]!.stats.offloaded).toBe(true);
    // Turn k adds "a{k-1}<|im_end|>\n<|im_start|>user\nq{k}<|im_end|>\n<|im_start|>assistant\n":
    // tens of characters after the cached prefix, far from the context's 25 000.
    for (const r of withSf.slice(1)) {
      expect(r.stats.tokenizedChars).toBeLessThan(100);
      expect(r.stats.offloaded).toBe(false);
    }
    for (let i = 0; i < turns.length; i++) expect(withSf[i]!.ids).toEqual(without[i]!.ids);
  });
});
