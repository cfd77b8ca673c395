/**
 * Long chat prompts rendered and tokenized on tokenizer threads (`PromptEncoder.encodeChat`) give
 * the ids of a cold tokenization of the same rendering on the main thread, with Qwen3's real
 * tokenizer.json and chat template; every turn of a conversation reaches the thread whose prefix
 * cache holds its earlier turns (affinity), so with two threads each later turn reuses ids; errors
 * found on the thread (a prompt that cannot fit) come back as the same 400 naming `messages`.
 * Random agent conversations with special-token text (whole and halves) in their messages, through
 * Qwen3's and Llama 3.1's real templates: the threads' ids and the inline chat path's (both cut and
 * hash the template's pieces without joining them) equal a cold tokenization of the rendered text.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KvrError } from '@kvrouter/protocols';
import { Rng } from '@kvrouter/testkit';
import { corpusFiles, FAMILIES, familyDir, readCorpus } from '@kvrouter/tokenizer/testing';
import { PromptEncoder } from './encoder.js';
import type { EncodeStats } from './types.js';
import { loadTokenizer, type LoadedTokenizer } from './load.js';
import { TokenizerPool } from './pool.js';
import type { TemplateMessage } from './template.js';

const texts = corpusFiles().map(readCorpus);
const fam = FAMILIES.find((f) => f.name === 'qwen3')!;
let loaded: LoadedTokenizer;
const pools: TokenizerPool[] = [];

beforeAll(() => {
  loaded = loadTokenizer({ kind: 'hf', dir: familyDir(fam) }, () => undefined);
});
afterAll(async () => {
  await Promise.all(pools.map((p) => p.close()));
});

async function encoder(mode: 'default' | 'fastokens', threads: number): Promise<PromptEncoder> {
  const pool = new TokenizerPool(loaded.spec, threads, { budgetMs: 0, encoder: { mode } });
  pools.push(pool);
  await pool.whenReady();
  return new PromptEncoder({
    tokenizer: loaded.tokenizer,
    mode,
    pool,
    template: loaded.template,
    offloadChatChars: 2000,
  });
}

const slice = (rng: Rng, n: number) => {
  const t = rng.pick(texts);
  const at = rng.int(0, Math.max(0, t.length - n));
  return t.slice(at, at + n);
};

/** One agent turn: an assistant tool call and its result. */
function grow(rng: Rng, conv: TemplateMessage[], k: number): void {
  const id = `call_${k}`;
  conv.push({
    role: 'assistant',
    content: '',
    tool_calls: [
      { id, type: 'function', function: { name: 'read_file', arguments: `{"path": "src/f${k}.ts"}` } },
    ],
  } as TemplateMessage);
  conv.push({ role: 'tool', tool_call_id: id, content: slice(rng, rng.int(200, 1500)) } as TemplateMessage);
}

describe('chat prompts on tokenizer threads (Qwen3)', () => {
  it(
    'fastokens, two threads: ids equal a cold tokenization; later turns hit the same thread cache',
    { timeout: 120_000 },
    async () => {
      const enc = await encoder('fastokens', 2);
      const rng = new Rng(14);
      const convs: TemplateMessage[][] = [0, 1, 2, 3].map((s) => [
        { role: 'system', content: `agent ${s}: ${slice(rng, 1500)}` },
        { role: 'user', content: slice(rng, 1500) },
      ]);
      const turns = [0, 0, 0, 0];
      const prev = [0, 0, 0, 0];
      const opts = { addGenerationPrompt: true };
      const turn = async (s: number, step: number) => {
        const conv = convs[s]!;
        grow(rng, conv, step);
        const stats: EncodeStats = { tokenizedChars: 0, offloaded: false };
        const got = await enc.encodeChat(loaded.template, [...conv], opts, 1 << 30, stats);
        return { s, text: loaded.template.render(conv, opts), got, stats };
      };
      // Two conversations at a time, so both threads are busy and a job could take either.
      for (let step = 0; step < 12; step++) {
        const a = rng.int(0, convs.length - 1);
        const b = (a + rng.int(1, convs.length - 1)) % convs.length;
        for (const { s, text, got, stats } of await Promise.all([turn(a, 2 * step), turn(b, 2 * step + 1)])) {
          expect(Array.from(got)).toEqual(Array.from(loaded.tokenizer.encode(text)));
          expect(stats.offloaded).toBe(true);
          // From its second turn on, a conversation finds most of its previous turn in its
          // thread's cache (a thread that never saw it shares only the opening special token).
          if (turns[s]! > 0) expect(stats.cachedTokens).toBeGreaterThan(prev[s]! / 2);
          else expect(stats.cachedTokens).toBeLessThanOrEqual(1);
          expect(stats.tokenizedChars).toBeLessThan(text.length);
          // A thread's prefix-cache names are its own: never handed to this thread's router.
          expect(stats.prefix).toBeUndefined();
          prev[s] = got.length;
          turns[s]!++;
        }
      }
    },
  );

  it('default mode on a thread tokenizes the whole prompt, same ids', { timeout: 60_000 }, async () => {
    const enc = await encoder('default', 1);
    const rng = new Rng(15);
    const conv: TemplateMessage[] = [{ role: 'user', content: slice(rng, 3000) }];
    grow(rng, conv, 1);
    const stats: EncodeStats = { tokenizedChars: 0, offloaded: false };
    const got = await enc.encodeChat(loaded.template, conv, { addGenerationPrompt: true }, 1 << 30, stats);
    const text = loaded.template.render(conv, { addGenerationPrompt: true });
    expect(Array.from(got)).toEqual(Array.from(loaded.tokenizer.encode(text)));
    expect([stats.offloaded, stats.tokenizedChars]).toEqual([true, text.length]);
  });

  it('a job that cannot be sent to a thread is rendered inline; the thread keeps serving', async () => {
    const enc = await encoder('fastokens', 1);
    const pool = pools.at(-1)!;
    const rng = new Rng(17);
    // A template variable nested 40 000 deep (the template never reads it): structured clone
    // overflows its stack on it.
    let deep: unknown = [];
    for (let i = 0; i < 40_000; i++) deep = [deep];
    const conv = (): TemplateMessage[] => [{ role: 'user', content: slice(rng, 3000) }];
    const plain = { addGenerationPrompt: true };
    const odd = { addGenerationPrompt: true, kwargs: { unused: deep } };
    const [c1, c2, c3] = [conv(), conv(), conv()];
    const s3: EncodeStats = { tokenizedChars: 0, offloaded: false };
    // c1 holds the only thread, so c2 waits in the queue and is posted when c1's reply arrives.
    const [a, b] = await Promise.all([
      enc.encodeChat(loaded.template, c1, plain, 1 << 30),
      enc.encodeChat(loaded.template, c2, odd, 1 << 30),
    ]);
    const c = await enc.encodeChat(loaded.template, c3, plain, 1 << 30, s3);
    expect(Array.from(a)).toEqual(Array.from(loaded.tokenizer.encode(loaded.template.render(c1, plain))));
    expect(Array.from(b)).toEqual(Array.from(loaded.tokenizer.encode(loaded.template.render(c2, odd))));
    expect(Array.from(c)).toEqual(Array.from(loaded.tokenizer.encode(loaded.template.render(c3, plain))));
    expect([s3.offloaded, pool.busy, pool.queued]).toEqual([true, 0, 0]);
  });

  it("the threads' prefix caches are counted with their bound (dynamo_frontend_table_*)", async () => {
    const enc = await encoder('fastokens', 2);
    const inline = new PromptEncoder({ tokenizer: loaded.tokenizer, mode: 'fastokens' });
    const conv: TemplateMessage[] = [{ role: 'user', content: slice(new Rng(18), 4000) }];
    const opts = { addGenerationPrompt: true };
    // Two threads, each bounded by the default --tokenizer-prefix-cache-tokens (16 Mi ids).
    expect(enc.threadCacheTokenLimit).toBe(2 * 16 * 1024 * 1024);
    expect(enc.threadCacheTokensHeld).toBe(0);
    await enc.encodeChat(loaded.template, conv, opts, 1 << 30);
    // The thread's encoder holds what the same encoder holds after the same prompt inline.
    await inline.encode(loaded.template.render(conv, opts));
    expect(inline.cacheTokensHeld).toBeGreaterThan(0);
    expect(enc.threadCacheTokensHeld).toBe(inline.cacheTokensHeld);
    expect(enc.cacheTokensHeld).toBe(0);
  });

  it('conversations that share one system prompt are spread over the threads', async () => {
    const enc = await encoder('fastokens', 2);
    const pool = pools.at(-1)!;
    const rng = new Rng(19);
    const system = { role: 'system', content: `You are a coding agent. ${slice(rng, 1000)}` };
    const convs: TemplateMessage[][] = [0, 1, 2, 3, 4, 5].map((i) => [
      system,
      { role: 'user', content: `task ${i}: ${slice(rng, 2500)}` },
    ]);
    const opts = { addGenerationPrompt: true };
    const all = convs.map((c) => enc.encodeChat(loaded.template, c, opts, 1 << 30));
    // Keyed on the system prompt alone, all six waited for one thread (busy 1, queued 5).
    expect([pool.busy, pool.queued]).toEqual([2, 4]);
    const got = await Promise.all(all);
    for (const [i, c] of convs.entries())
      expect(Array.from(got[i]!)).toEqual(
        Array.from(loaded.tokenizer.encode(loaded.template.render(c, opts))),
      );
  });

  it('unset --tokenizer-thread-chat-chars: long chats go to the thread in default mode, stay inline with fastokens', async () => {
    const pool = new TokenizerPool(loaded.spec, 1, { budgetMs: 0, encoder: { mode: 'fastokens' } });
    pools.push(pool);
    await pool.whenReady();
    const opts = { addGenerationPrompt: true };
    // 70 000 characters of messages: over 65 536, and 8 000 of them new in the second turn (under
    // the 16 384 uncached characters that would send fastokens' BPE to a thread).
    const rng = new Rng(20);
    const text = (n: number) => {
      let t = '';
      while (t.length < n) t += slice(rng, 4000);
      return t.slice(0, n);
    };
    const conv: TemplateMessage[] = [{ role: 'user', content: text(62_000) }];
    const next = [...conv, { role: 'assistant', content: text(8000) }, { role: 'user', content: 'go on' }];
    const whole = new PromptEncoder({
      tokenizer: loaded.tokenizer,
      mode: 'default',
      pool,
      template: loaded.template,
    });
    const s1: EncodeStats = { tokenizedChars: 0, offloaded: false };
    await whole.encodeChat(loaded.template, next, opts, 1 << 30, s1);
    // On the thread: rendered and tokenized there (its own encoder's cache took the prompt).
    expect(s1.offloaded).toBe(true);
    const threadHeld = pool.cacheTokensHeld;
    expect(threadHeld).toBeGreaterThan(0);
    const fast = new PromptEncoder({
      tokenizer: loaded.tokenizer,
      mode: 'fastokens',
      pool,
      template: loaded.template,
    });
    await fast.encodeChat(loaded.template, conv, opts, 1 << 30);
    const s2: EncodeStats = { tokenizedChars: 0, offloaded: false };
    const ids = await fast.encodeChat(loaded.template, next, opts, 1 << 30, s2);
    // Inline: this encoder's own cache, nothing on the thread; only the new turn was tokenized.
    expect([s2.offloaded, pool.cacheTokensHeld]).toEqual([false, threadHeld]);
    expect(fast.cacheTokensHeld).toBeGreaterThan(0);
    expect(s2.tokenizedChars).toBeLessThan(8100);
    // Inline, the ids name the cached prefix they extend (the previous turn's) and the one they end in.
    const named = s2.prefix!;
    expect(named.reused).toBeGreaterThanOrEqual(0);
    expect(named.reusedTokens).toBe(s2.cachedTokens);
    expect(named.leaf).toBeGreaterThan(named.reused);
    expect(named.leafTokens).toBeGreaterThan(named.reusedTokens);
    expect(named.leafTokens).toBeLessThanOrEqual(ids.length);
    expect(Array.from(ids)).toEqual(Array.from(loaded.tokenizer.encode(loaded.template.render(next, opts))));
  });

  it('a prompt that cannot fit is refused on the thread with the inline 400 naming messages', async () => {
    const enc = await encoder('fastokens', 1);
    const inline = new PromptEncoder({ tokenizer: loaded.tokenizer, mode: 'fastokens' });
    const conv: TemplateMessage[] = [{ role: 'user', content: slice(new Rng(16), 5000) }];
    const opts = { addGenerationPrompt: true };
    const [a, b] = await Promise.all([
      enc.encodeChat(loaded.template, conv, opts, 8).catch((e: unknown) => e),
      inline.encodeChat(loaded.template, conv, opts, 8).catch((e: unknown) => e),
    ]);
    expect(a).toBeInstanceOf(KvrError);
    expect(b).toBeInstanceOf(KvrError);
    const [x, y] = [a as KvrError, b as KvrError];
    expect([x.code, x.status, x.detail?.field]).toEqual(['invalid_request', 400, 'messages']);
    expect([x.code, x.status, x.message]).toEqual([y.code, y.status, y.message]);
  });
});

describe.each(['qwen3', 'llama3_1'])('agent conversations with special-token text: %s', (name) => {
  it('threads and inline (template pieces) = a cold tokenization', { timeout: 120_000 }, async () => {
    const l = loadTokenizer(
      { kind: 'hf', dir: familyDir(FAMILIES.find((f) => f.name === name)!) },
      () => undefined,
    );
    const pool = new TokenizerPool(l.spec, 1, { budgetMs: 0, encoder: { mode: 'fastokens' } });
    pools.push(pool);
    await pool.whenReady();
    const threaded = new PromptEncoder({
      tokenizer: l.tokenizer,
      mode: 'fastokens',
      pool,
      template: l.template,
      offloadChatChars: 2000,
    });
    const inline = new PromptEncoder({ tokenizer: l.tokenizer, mode: 'fastokens' });
    const specials = [...l.tokenizer.specialTokens.keys()].slice(0, 30);
    const rng = new Rng(name.length * 31);
    const text = (n: number) => {
      let t = slice(rng, n);
      for (let k = rng.int(0, 3); k > 0; k--) {
        const sp = rng.pick(specials);
        const at = rng.int(0, t.length);
        // A whole special, or its head or tail (which the template's own text may complete).
        const bit = rng.next() < 0.5 ? sp : rng.next() < 0.5 ? sp.slice(0, 3) : sp.slice(3);
        t = t.slice(0, at) + bit + t.slice(at);
      }
      return t;
    };
    const convs: TemplateMessage[][] = [0, 1].map(() => [
      { role: 'system', content: text(1500) },
      { role: 'user', content: text(1500) },
    ]);
    const opts = { addGenerationPrompt: true };
    let reused = 0;
    for (let step = 0; step < 8; step++) {
      const conv = convs[step % 2]!;
      const id = `call_${step}`;
      conv.push(
        {
          role: 'assistant',
          content: '',
          tool_calls: [
            { id, type: 'function', function: { name: 'read_file', arguments: { path: `src/f${step}.ts` } } },
          ],
        } as TemplateMessage,
        { role: 'tool', tool_call_id: id, content: text(rng.int(200, 1500)) } as TemplateMessage,
      );
      const cold = Array.from(l.tokenizer.encode(l.template.render(conv, opts)));
      const stats: EncodeStats = { tokenizedChars: 0, offloaded: false };
      expect(Array.from(await threaded.encodeChat(l.template, [...conv], opts, 1 << 30, stats))).toEqual(
        cold,
      );
      expect(stats.offloaded).toBe(true);
      expect(Array.from(await inline.encodeChat(l.template, conv, opts, 1 << 30))).toEqual(cold);
      reused += stats.cachedTokens ?? 0;
    }
    expect(reused).toBeGreaterThan(0);
  });
});
