/**
 * No head-of-line blocking in tokenization (issue 17): a normal prompt finishes while a huge one is
 * still being tokenized, with one thread (the normal one runs inline) and with two (it gets the other
 * thread: large prompts never hold every thread); a prompt that runs past the time budget fails with
 * 413 `tokenize_budget_exceeded` naming the prompt, its thread is replaced, and the pool keeps serving.
 */
import type { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { KvrError } from '@kvrouter/protocols';
import { PromptEncoder } from './encoder.js';
import type { EncodeStats } from './types.js';
import { wordText as text } from '../test-helpers.js';
import { TokenizerPool } from './pool.js';
import { TiktokenTokenizer } from './tiktoken.js';

const SPEC = { kind: 'tiktoken', encoding: 'cl100k_base' } as const;
const tok = new TiktokenTokenizer();

/** Seconds of BPE (1.5 M characters of prose), a large job (>= 1 M characters here). */
const HUGE = text(1, 1_500_000);
/** A normal long prompt: ~5k tokens, above the offload threshold. */
const NORMAL = text(2, 20_000);

const pools: TokenizerPool[] = [];
afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.close()));
});
async function pool(threads: number, budgetMs = 0): Promise<TokenizerPool> {
  const p = new TokenizerPool(SPEC, threads, { budgetMs, largeChars: 1_000_000 });
  pools.push(p);
  await p.whenReady();
  return p;
}

/** Starts `huge`, then `normal`; reports whether the huge one was still running when normal finished. */
async function race(enc: PromptEncoder) {
  let hugeDone = false;
  // Not awaited: the pool is closed (and this rejected) after the test.
  void enc
    .encode(HUGE)
    .finally(() => (hugeDone = true))
    .catch(() => undefined);
  const stats: EncodeStats = { tokenizedChars: 0, offloaded: false };
  const ids = await enc.encode(NORMAL, stats);
  return { hugeRunning: !hugeDone, ids, stats };
}

describe('tokenizer pool: no head-of-line blocking', () => {
  it('one thread: a normal prompt is tokenized inline while a huge one holds the thread', async () => {
    const p = await pool(1);
    const enc = new PromptEncoder({
      tokenizer: tok,
      mode: 'default',
      pool: p,
      offloadChars: 1000,
      inlineWhenBlockedChars: 64_000,
    });
    const r = await race(enc);
    expect(r.hugeRunning).toBe(true);
    expect(r.stats.offloaded).toBe(false);
    expect(Array.from(r.ids)).toEqual(Array.from(tok.encode(NORMAL)));
  });

  it('two threads, two huge prompts: the second waits, and a normal prompt gets the other thread', async () => {
    const p = await pool(2);
    const enc = new PromptEncoder({
      tokenizer: tok,
      mode: 'default',
      pool: p,
      offloadChars: 1000,
      inlineWhenBlockedChars: 64_000,
    });
    let hugeDone = 0;
    for (let i = 0; i < 2; i++)
      void enc
        .encode(HUGE)
        .finally(() => hugeDone++)
        .catch(() => undefined);
    expect(p.queued).toBe(1); // large prompts hold at most threads - 1 threads
    const stats: EncodeStats = { tokenizedChars: 0, offloaded: false };
    const ids = await enc.encode(NORMAL, stats);
    expect(hugeDone).toBe(0);
    expect(stats.offloaded).toBe(true);
    expect(Array.from(ids)).toEqual(Array.from(tok.encode(NORMAL)));
  });

  it('a prompt past the time budget fails with 413 naming the prompt; the thread is replaced and serves again', async () => {
    const p = await pool(1, 200);
    const err = await p.encode([HUGE], true).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(KvrError);
    const k = err as KvrError;
    expect(k.code).toBe('tokenize_budget_exceeded');
    expect(k.status).toBe(413);
    expect(k.detail?.field).toBe('prompt');
    expect(k.message).toMatch(
      /^prompt: tokenizing 1500\d{3} characters did not finish within the budget of 200 ms/,
    );
    expect(p.replaced).toBe(1);
    const [ids] = await p.encode(['hello world'], true);
    expect(Array.from(ids!)).toEqual([15339, 1917]); // cl100k: "hello", " world"
  });

  it('a chat job past the time budget fails with 413 naming messages (the field the client sent)', async () => {
    const p = await pool(1, 200);
    const job = {
      messages: [{ role: 'user', content: HUGE }],
      options: { addGenerationPrompt: true },
      contextLength: 1 << 30,
    };
    const err = await p.encodeChat(job, HUGE.length, 7).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(KvrError);
    const k = err as KvrError;
    expect([k.code, k.status, k.detail?.field]).toEqual(['tokenize_budget_exceeded', 413, 'messages']);
    expect(k.message).toMatch(/^messages: tokenizing 1500\d{3} characters did not finish within the budget/);
    expect(p.replaced).toBe(1);
  });

  it('a queued chat job whose client went away leaves the queue with 499; a running one is not cut', async () => {
    const p = await pool(1);
    const running = p.encode([HUGE], true);
    const ac = new AbortController();
    const job = {
      messages: [{ role: 'user', content: NORMAL }],
      options: { addGenerationPrompt: true },
      contextLength: 1 << 30,
    };
    const queued = p.encodeChat(job, NORMAL.length, 3, undefined, ac.signal).catch((e: unknown) => e);
    expect([p.busy, p.queued]).toEqual([1, 1]);
    ac.abort();
    const err = (await queued) as KvrError;
    expect([err.code, err.status, p.queued]).toEqual(['cancelled', 499, 0]);
    expect((await running)[0]!.length).toBeGreaterThan(0);
    // Aborted before it was submitted: refused at once.
    const late = await p.encodeChat(job, NORMAL.length, 3, undefined, ac.signal).catch((e: unknown) => e);
    expect((late as KvrError).status).toBe(499);
  });

  it('a thread that exits mid-job without an error fails its job with 500; a fresh thread serves', async () => {
    const p = await pool(1);
    const running = p.encode([HUGE], true).catch((e: unknown) => e);
    // As a process.exit() inside the thread would: no 'error' event, only 'exit'.
    const threads = (p as unknown as { threads: { worker: Worker }[] }).threads;
    await threads[0]!.worker.terminate();
    const err = (await running) as KvrError;
    expect(err).toBeInstanceOf(KvrError);
    expect([err.code, err.status]).toEqual(['tokenizer_error', 500]);
    expect(err.message).toMatch(/^tokenizer thread exited with code 1/);
    expect(p.replaced).toBe(1);
    const [ids] = await p.encode(['hello world'], true);
    expect(Array.from(ids!)).toEqual([15339, 1917]); // cl100k: "hello", " world"
  });

  it('a job that would take the queue past its character bound gets 503 tokenizer_overloaded at once; one that finds it empty never does', async () => {
    const p = new TokenizerPool(SPEC, 1, { budgetMs: 0, largeChars: 1_000_000, maxQueuedChars: 50_000 });
    pools.push(p);
    await p.whenReady();
    const running = p.encode([HUGE], true); // holds the thread; the queue is empty, so accepted
    const first = p.encode([NORMAL], true); // queue: NORMAL.length (~20,000) characters
    const second = p.encode([NORMAL], true); // ~40,000 <= 50,000
    const third = (await p.encode([NORMAL], true).catch((e: unknown) => e)) as KvrError; // ~60,000 > 50,000
    expect(third).toBeInstanceOf(KvrError);
    expect([third.code, third.status, third.detail?.field, third.detail?.queued_chars]).toEqual([
      'tokenizer_overloaded',
      503,
      'prompt',
      2 * NORMAL.length, // the two queued texts
    ]);
    expect(p.queued).toBe(2);
    await Promise.all([running, first, second]);
    // Drained: the same job is accepted again.
    expect((await p.encode([NORMAL], true))[0]!.length).toBeGreaterThan(0);
  });

  it('refuses a thread count below one', () => {
    expect(() => new TokenizerPool(SPEC, 0)).toThrow(/positive integer/);
  });
});
