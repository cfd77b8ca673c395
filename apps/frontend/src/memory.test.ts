/**
 * Bounded memory of the frontend (issue 17): every table of docs/memory.md is on /metrics with its
 * limit; the client-driven ones are driven past their limit over HTTP and hold. (The session table
 * and the index are driven past their limits in packages/router and packages/radix-indexer.)
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_MODEL_LABELS } from '@kvrouter/metrics';
import { MAX_BLOCKS_PER_WORKER } from '@kvrouter/radix-indexer';
import {
  MAX_HASH_CHAIN_BYTES,
  MAX_LIVE_REQUESTS,
  MAX_PARKED_REQUESTS,
  MAX_SESSION_BINDINGS,
} from '@kvrouter/router';
import { parityModelDir } from '@kvrouter/testkit/parity';
import type { Frontend } from './frontend.js';
import { TABLES } from './memory.js';
import { startFrontend } from './test-helpers.js';

const MODEL = 'qwen3';
let fe: Frontend;
let client: OpenAI;

beforeAll(async () => {
  fe = await startFrontend([
    ...['--model-path', parityModelDir('qwen3'), '--model-name', MODEL],
    ...['--router-mode', 'kv', '--mocker-workers', '2'],
    ...['--tokenizer', 'fastokens', '--tokenizer-prefix-cache-tokens', '300'],
    ...['--responses-store-size', '3', '--http-body-string-cache-mb', '1'],
  ]);
  client = new OpenAI({ baseURL: `${fe.url}/v1`, apiKey: 'unused', maxRetries: 0 });
});
afterAll(() => fe?.close(0));

async function table(name: string): Promise<{ entries: number; limit: number; evicted?: number }> {
  const text = await (await fetch(`${fe.url}/metrics`)).text();
  const val = (family: string): number | undefined => {
    const line = text.split('\n').find((l) => l.startsWith(`${family}{table="${name}"} `));
    return line === undefined ? undefined : Number(line.split(' ')[1]);
  };
  const entries = val('dynamo_frontend_table_entries');
  const limit = val('dynamo_frontend_table_limit');
  if (entries === undefined || limit === undefined) throw new Error(`table ${name} is not on /metrics`);
  const evicted = val('dynamo_frontend_table_evicted_total');
  return { entries, limit, ...(evicted === undefined ? {} : { evicted }) };
}

/** `i`-th distinct prompt of about 60 tokens (no shared pieces beyond the template). */
const prompt = (i: number) =>
  `Document ${i}: ${Array.from({ length: 12 }, (_, k) => `word${i * 97 + k}x`).join(' ')} end ${i}.`;

describe('bounded tables on /metrics', () => {
  it('the prompt-prefix cache holds at most --tokenizer-prefix-cache-tokens ids', async () => {
    for (let i = 0; i < 30; i++)
      await client.chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: prompt(i) }],
        max_tokens: 1,
      });
    const t = await table(TABLES.prefixCache);
    expect(t.limit).toBe(300);
    // 30 prompts of ~60 ids each would be ~1,800 ids unbounded.
    expect(t.entries).toBeGreaterThan(0);
    expect(t.entries).toBeLessThanOrEqual(300);
    // The exact tokenizer's word cache: 65,536 words at most (cleared when full).
    const words = await table(TABLES.wordCache);
    expect(words.limit).toBe(65_536);
    expect(words.entries).toBeGreaterThan(0);
    expect(words.entries).toBeLessThanOrEqual(65_536);
  });

  it('long message strings: the body string cache and the fingerprint memo stay within their bounds', async () => {
    // 20 distinct ~31k-character ASCII messages: each kept string counts its bytes, 2 bytes per
    // character and 96 bytes (~93 kB, under 1/8 of the limit), so 1 MiB holds 11 of them;
    // unbounded it would be ~1.9 MB.
    for (let i = 0; i < 20; i++)
      await client.chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: `${prompt(i)} `.repeat(250) }],
        max_tokens: 1,
      });
    const strings = await table(TABLES.bodyStrings);
    expect(strings.limit).toBe(1 << 20);
    expect(strings.entries).toBeGreaterThan(10 * 90_000);
    expect(strings.entries).toBeLessThanOrEqual(1 << 20);
    expect(strings.evicted).toBeGreaterThanOrEqual(20 - 11);
    // Fingerprints: as many characters as the prefix cache holds ids (300), a ~31k-character
    // message over that is fingerprinted and let go.
    const fp = await table(TABLES.fingerprints);
    expect(fp.limit).toBe(300);
    expect(fp.entries).toBeLessThanOrEqual(300);
  });

  it('the responses store keeps --responses-store-size responses', async () => {
    for (let i = 0; i < 6; i++)
      await client.responses.create({ model: MODEL, input: `question ${i}`, max_output_tokens: 1 });
    expect(await table(TABLES.responses)).toMatchObject({ entries: 3, limit: 3 });
  });

  it('400 made-up model names (past MAX_MODEL_LABELS) add one model label', async () => {
    const before = (await table(TABLES.modelLabels)).entries;
    for (let b = 0; b < 400; b += 50)
      await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          fetch(`${fe.url}/v1/chat/completions`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ model: `made-up-${b + i}`, messages: [{ role: 'user', content: 'hi' }] }),
          }).then((r) => r.arrayBuffer()),
        ),
      );
    const t = await table(TABLES.modelLabels);
    expect(t.limit).toBe(MAX_MODEL_LABELS);
    expect(t.entries).toBeLessThanOrEqual(before + 1);
  });

  it("a conversation's next turn reuses the block hashes of the turn before (router hash chains)", async () => {
    const set = fe.registry.allSets()[0]!;
    const chains = () => set.router.hashChains;
    const before = chains().reusedBlocks;
    const first = [{ role: 'user' as const, content: `${prompt(900)} ${prompt(901)} ${prompt(902)}` }];
    const r1 = await client.chat.completions.create({ model: MODEL, messages: first, max_tokens: 3 });
    const p1 = r1.usage!.prompt_tokens;
    await client.chat.completions.create({
      model: MODEL,
      messages: [
        ...first,
        { role: 'assistant', content: 'Noted.' },
        { role: 'user', content: 'And the next one?' },
      ],
      max_tokens: 1,
    });
    // Turn 1's prompt ends `<|im_start|>assistant\n`: its last cached prefix ends at that
    // `<|im_start|>`, 2 tokens before the end ("assistant", "\n"); turn 2 extends it and takes its
    // full blocks' hashes.
    expect(p1).toBeGreaterThan(2 * set.blockSize);
    expect(chains().reusedBlocks - before).toBe(Math.floor((p1 - 2) / set.blockSize));
    const t = await table(TABLES.hashChains);
    expect(t.limit).toBe(MAX_HASH_CHAIN_BYTES); // one router
    expect(t.entries).toBeGreaterThan(0);
    expect(t.entries).toBeLessThanOrEqual(MAX_HASH_CHAIN_BYTES);
  });

  it('the index and the session table report their bounds', async () => {
    const ix = await table(TABLES.index);
    expect(ix.entries).toBeGreaterThan(0); // the prompts above were stored on the workers
    expect(ix.limit % MAX_BLOCKS_PER_WORKER).toBe(0);
    expect(ix.limit).toBeGreaterThanOrEqual(2 * MAX_BLOCKS_PER_WORKER);
    const sess = await table(TABLES.sessions);
    expect(sess.limit).toBe(MAX_SESSION_BINDINGS); // one router (one worker set)
    await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'bind me' }],
      max_tokens: 1,
      // @ts-expect-error nvext is kvrouter's extension
      nvext: { session_control: { session_id: 'memory-test', action: 'bind', timeout: 60 } },
    });
    expect(await table(TABLES.sessions)).toMatchObject({ entries: 1, evicted: 0 });
    expect(await table(TABLES.parked)).toEqual({ entries: 0, limit: MAX_PARKED_REQUESTS });
    expect(await table(TABLES.live)).toEqual({ entries: 0, limit: MAX_LIVE_REQUESTS });
  });
});
