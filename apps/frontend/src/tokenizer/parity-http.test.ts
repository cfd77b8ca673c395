/**
 * Tokenizer + chat-template parity through the HTTP API: the frontend with `--model-path` set to
 * each real tokenizer answers every parity conversation (tools, documents, chat_template_kwargs,
 * add_generation_prompt, continue_final_message as request fields) in query-only mode
 * (`nvext.annotations: ["query_instance_id:"]`), and `nvext.token_data` equals the reference ids
 * of packages/testkit/fixtures/tokenizer-parity exactly; conversations the reference template
 * refuses get 400.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  PARITY_TOKENIZERS,
  compareIds,
  parityConversations,
  parityFixture,
  parityModelDir,
} from '@kvrouter/testkit/parity';
import { startFrontend } from '../test-helpers.js';

beforeAll(() => {
  // The reference pins strftime_now to this day (gpt-oss's template prints the date).
  vi.useFakeTimers({ toFake: ['Date'] });
  vi.setSystemTime(new Date(2024, 6, 26, 12, 0, 0));
});
afterAll(() => {
  vi.useRealTimers();
});

describe.each(PARITY_TOKENIZERS)('HTTP parity: %s', (name) => {
  it('nvext.token_data of every conversation equals the reference ids', async () => {
    const fe = await startFrontend([
      '--model-path',
      parityModelDir(name),
      '--model-name',
      name,
      '--mocker-workers',
      '1',
    ]);
    try {
      const fixture = parityFixture(name);
      const convs = new Map(parityConversations().map((c) => [c.id, c]));
      const mismatches: string[] = [];
      for (const c of fixture.cases) {
        const conv = convs.get(c.id)!;
        const res = await fetch(`${fe.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            model: name,
            messages: conv.messages,
            max_tokens: 1,
            ...(conv.tools ? { tools: conv.tools } : {}),
            ...(conv.documents ? { documents: conv.documents } : {}),
            ...(conv.chat_template_kwargs ? { chat_template_kwargs: conv.chat_template_kwargs } : {}),
            add_generation_prompt: conv.add_generation_prompt ?? false,
            ...(conv.continue_final_message ? { continue_final_message: true } : {}),
            nvext: { annotations: ['query_instance_id:'] },
          }),
        });
        const body = (await res.json()) as { nvext?: { token_data?: number[] }; error?: { message: string } };
        if (res.status !== 200 && res.status !== 400) {
          mismatches.push(`${c.id}: HTTP ${res.status} ${body.error?.message}`);
          continue;
        }
        const ids = res.status === 200 ? (body.nvext?.token_data ?? []) : null;
        const diff = compareIds(c, ids);
        if (diff) mismatches.push(`${c.id}: ${diff}${res.status === 400 ? ` (${body.error?.message})` : ''}`);
      }
      expect(fixture.cases.length).toBeGreaterThanOrEqual(50);
      expect(mismatches).toEqual([]);
    } finally {
      await fe.close(0);
    }
  }, 180_000);
});
