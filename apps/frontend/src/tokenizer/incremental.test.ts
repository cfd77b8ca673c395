/**
 * Incremental tokenization (`--tokenizer fastokens`) equals a cold tokenization, id for id, on
 * random multi-turn conversations rendered by each real model's own chat template (Qwen3, Llama
 * 3.1, DeepSeek V3, gpt-oss tokenizer.json + tokenizer_config.json) and tokenized by the exact fast
 * tokenizer: conversations interleave, grow by a few messages per turn, carry tool-call markers and
 * real special tokens inside message text, and a small id budget forces evictions in between.
 */
import { describe, expect, it } from 'vitest';
import { Rng } from '@kvrouter/testkit';
import { corpusFiles, FAMILIES, familyDir, readCorpus } from '@kvrouter/tokenizer/testing';
import { PromptEncoder } from './encoder.js';
import type { EncodeStats } from './types.js';
import { loadTokenizer } from './load.js';
import type { TemplateMessage } from './template.js';

const texts = corpusFiles().map(readCorpus);

function content(rng: Rng, specials: readonly string[]): string {
  const parts: string[] = [];
  for (let k = rng.int(1, 3); k > 0; k--) {
    const r = rng.next();
    if (r < 0.7) {
      const t = rng.pick(texts);
      const at = rng.int(0, t.length - 1);
      parts.push(t.slice(at, at + rng.int(0, 900)));
    } else if (r < 0.85) parts.push(rng.pick(specials));
    else
      parts.push(
        rng.pick([' ', '\n', '\n\n', '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>', '']),
      );
  }
  return parts.join('');
}

describe.each(FAMILIES)('incremental = cold: $name', (fam) => {
  it('random interleaved conversations, with and without evictions', { timeout: 240_000 }, async () => {
    const loaded = loadTokenizer({ kind: 'hf', dir: familyDir(fam) }, () => undefined);
    expect(loaded.engine).toBe('fast');
    const tok = loaded.tokenizer;
    const specials = [...tok.specialTokens.keys()].slice(0, 30);
    const rng = new Rng(fam.name.length * 1009);
    for (const cacheTokens of [1 << 24, 3000]) {
      const enc = new PromptEncoder({ tokenizer: tok, mode: 'fastokens', cacheTokens });
      expect(enc.mode).toBe('fastokens');
      const convs: TemplateMessage[][] = [0, 1, 2].map(() => [
        { role: 'system', content: content(rng, specials) },
      ]);
      let reused = 0;
      let checked = 0;
      for (let turn = 0; turn < 18; turn++) {
        const conv = convs[rng.int(0, convs.length - 1)]!;
        if (conv.length > 1) conv.push({ role: 'assistant', content: content(rng, specials) });
        conv.push({ role: 'user', content: content(rng, specials) });
        let text: string;
        try {
          text = loaded.template.render(conv, { addGenerationPrompt: true });
        } catch {
          continue; // a template that rejects this shape (e.g. role order) says so; not this test's subject
        }
        const stats: EncodeStats = { tokenizedChars: 0, offloaded: false };
        const got = await enc.encode(text, stats);
        expect(Array.from(got)).toEqual(Array.from(tok.encode(text)));
        reused += stats.cachedTokens ?? 0;
        checked++;
      }
      expect(checked).toBeGreaterThan(12);
      // The large cache reuses earlier turns' prefixes.
      if (cacheTokens > 3000) expect(reused).toBeGreaterThan(0);
    }
  });
});
