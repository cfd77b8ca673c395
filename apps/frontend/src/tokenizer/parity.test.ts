/**
 * Tokenizer + chat-template parity with the reference (Python jinja2 rendering as transformers'
 * apply_chat_template, Hugging Face `tokenizers` ids with add_special_tokens=False), through the
 * library: template.render + the prompt encoder in both `--tokenizer` modes, with both tokenizer
 * engines (the exact fast tokenizer of @kvrouter/tokenizer and @huggingface/tokenizers). Fixtures:
 * packages/testkit/fixtures/tokenizer-parity (regenerate: pnpm --filter @kvrouter/testkit parity:generate).
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { KvrError } from '@kvrouter/protocols';
import {
  PARITY_TOKENIZERS,
  compareCase,
  parityConversations,
  parityFixture,
  parityModelDir,
} from '@kvrouter/testkit/parity';
import { PromptEncoder } from './encoder.js';
import { loadTokenizer } from './load.js';

/** The date the reference's strftime_now is pinned to. */
const FIXED_NOW = new Date(2024, 6, 26, 12, 0, 0);

beforeAll(() => {
  vi.useFakeTimers({ toFake: ['Date'] });
  vi.setSystemTime(FIXED_NOW);
});
afterAll(() => {
  vi.useRealTimers();
});

const cases = PARITY_TOKENIZERS.flatMap((name) =>
  (['fast', 'hf'] as const).map((engine) => [name, engine] as const),
);

describe.each(cases)('parity with transformers: %s (%s engine)', (name, engine) => {
  it('every conversation renders to the reference text and ids (default and fastokens)', async () => {
    const fixture = parityFixture(name);
    const convs = new Map(parityConversations().map((c) => [c.id, c]));
    const loaded = loadTokenizer({ kind: 'hf', dir: parityModelDir(name), engine });
    expect(loaded.engine).toBe(engine);
    const { tokenizer, template } = loaded;
    const encoders = [
      new PromptEncoder({ tokenizer, mode: 'default' }),
      new PromptEncoder({ tokenizer, mode: 'fastokens' }),
    ];
    const mismatches: string[] = [];
    for (const c of fixture.cases) {
      const conv = convs.get(c.id)!;
      let text: string | null;
      try {
        text = template.render(conv.messages as { role: string; content: unknown }[], {
          addGenerationPrompt: conv.add_generation_prompt ?? false,
          continueFinalMessage: conv.continue_final_message ?? false,
          ...(conv.tools ? { tools: conv.tools } : {}),
          ...(conv.documents ? { documents: conv.documents } : {}),
          ...(conv.chat_template_kwargs ? { kwargs: conv.chat_template_kwargs } : {}),
        });
      } catch (e) {
        if (!(e instanceof KvrError) || e.status !== 400) throw e;
        text = null;
      }
      for (const enc of encoders) {
        const ids = text === null ? null : await enc.encode(text);
        const diff = compareCase(c, text, ids);
        if (diff) mismatches.push(`${c.id} (${enc.mode}): ${diff}`);
      }
    }
    expect(fixture.cases.length).toBeGreaterThanOrEqual(50);
    expect(mismatches).toEqual([]);
  }, 120_000);
});
