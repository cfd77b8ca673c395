/**
 * Incremental tokenization (`--tokenizer fastokens`) equals a cold tokenization, id for id, on
 * random multi-turn conversations rendered by each real model's own chat template (Qwen3, Llama
 * 3.1, DeepSeek V3, gpt-oss tokenizer.json + tokenizer_config.json) and tokenized by the exact fast
 * tokenizer: conversations interleave, grow by a few messages per turn (tool calls and their
 * results among them), carry tool-call markers, real special tokens and halves of them inside
 * message text, and a small id budget forces evictions in between. Each turn is encoded three
 * ways: the rendered string (`encode`), the chat path (`encodeChat`: the template's pieces, cut and
 * hashed without joining them; a message's text of 256+ characters by its memoized fingerprint),
 * and the same pieces cut again at random places (inside special tokens, between surrogate halves),
 * as the ids must not depend on where the pieces end.
 */
import { describe, expect, it } from 'vitest';
import { Rng } from '@kvrouter/testkit';
import { corpusFiles, cutAt, FAMILIES, familyDir, readCorpus } from '@kvrouter/tokenizer/testing';
import { PromptEncoder } from './encoder.js';
import type { EncodeStats } from './types.js';
import { loadTokenizer } from './load.js';
import type { ChatTemplate, RenderOptions, TemplateMessage } from './template.js';

const texts = corpusFiles().map(readCorpus);

function content(rng: Rng, specials: readonly string[]): string {
  const parts: string[] = [];
  for (let k = rng.int(1, 3); k > 0; k--) {
    const r = rng.next();
    if (r < 0.65) {
      const t = rng.pick(texts);
      const at = rng.int(0, t.length - 1);
      parts.push(t.slice(at, at + rng.int(0, 900)));
    } else if (r < 0.8) parts.push(rng.pick(specials));
    else if (r < 0.85) {
      // A special token's head or tail: next to the template's own tokens it may complete one.
      const sp = rng.pick(specials);
      const cut = rng.int(1, sp.length - 1);
      parts.push(rng.next() < 0.5 ? sp.slice(0, cut) : sp.slice(cut));
    } else
      parts.push(
        rng.pick([' ', '\n', '\n\n', '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>', '']),
      );
  }
  return parts.join('');
}

/** `pieces` cut again at 0-6 random places (empty pieces included). */
function recut(rng: Rng, pieces: string[]): string[] {
  return pieces.flatMap((p) =>
    cutAt(
      p,
      Array.from({ length: rng.int(0, 6) }, () => rng.int(0, p.length)),
    ),
  );
}

/** `t` with its pieces cut again at random places. */
function recutTemplate(t: ChatTemplate, rng: Rng): ChatTemplate {
  return {
    name: 'recut',
    render: (m, o) => t.render(m, o),
    renderPieces: (m: readonly TemplateMessage[], o: RenderOptions) => recut(rng, t.renderPieces!(m, o)),
  };
}

/** An assistant tool call and its result (Qwen3 / DeepSeek / gpt-oss render them; others may refuse). */
function toolTurn(rng: Rng, specials: readonly string[], k: number): TemplateMessage[] {
  const id = `call_${k}`;
  return [
    {
      role: 'assistant',
      content: '',
      tool_calls: [
        { id, type: 'function', function: { name: 'read_file', arguments: `{"path": "src/f${k}.ts"}` } },
      ],
    } as TemplateMessage,
    { role: 'tool', tool_call_id: id, content: content(rng, specials) } as TemplateMessage,
  ];
}

describe.each(FAMILIES)('incremental = cold: $name', (fam) => {
  it('random interleaved conversations, with and without evictions', { timeout: 240_000 }, async () => {
    const loaded = loadTokenizer({ kind: 'hf', dir: familyDir(fam) }, () => undefined);
    expect(loaded.engine).toBe('fast');
    const tok = loaded.tokenizer;
    const specials = [...tok.specialTokens.keys()].slice(0, 30);
    const rng = new Rng(fam.name.length * 1009);
    expect(typeof loaded.template.renderPieces).toBe('function');
    for (const cacheTokens of [1 << 24, 3000]) {
      const enc = new PromptEncoder({ tokenizer: tok, mode: 'fastokens', cacheTokens });
      const chat = new PromptEncoder({ tokenizer: tok, mode: 'fastokens', cacheTokens });
      const recutChat = new PromptEncoder({ tokenizer: tok, mode: 'fastokens', cacheTokens });
      const recutTpl = recutTemplate(loaded.template, rng);
      expect(enc.mode).toBe('fastokens');
      const convs: TemplateMessage[][] = [0, 1, 2].map(() => [
        { role: 'system', content: content(rng, specials) },
      ]);
      let reused = 0;
      let checked = 0;
      for (let turn = 0; turn < 18; turn++) {
        const conv = convs[rng.int(0, convs.length - 1)]!;
        if (conv.length > 1) {
          if (rng.next() < 0.3) conv.push(...toolTurn(rng, specials, turn));
          conv.push({ role: 'assistant', content: content(rng, specials) });
        }
        conv.push({ role: 'user', content: content(rng, specials) });
        const opts = { addGenerationPrompt: true };
        let text: string;
        try {
          text = loaded.template.render(conv, opts);
        } catch {
          continue; // a template that rejects this shape (e.g. role order) says so; not this test's subject
        }
        const cold = Array.from(tok.encode(text));
        const stats: EncodeStats = { tokenizedChars: 0, offloaded: false };
        const got = await enc.encode(text, stats);
        expect(Array.from(got)).toEqual(cold);
        const chatStats: EncodeStats = { tokenizedChars: 0, offloaded: false };
        expect(Array.from(await chat.encodeChat(loaded.template, conv, opts, 1 << 30, chatStats))).toEqual(
          cold,
        );
        // Same cut, same keys: the pieces reuse exactly what the string did.
        expect([chatStats.cachedTokens, chatStats.tokenizedChars]).toEqual([
          stats.cachedTokens,
          stats.tokenizedChars,
        ]);
        const recutStats: EncodeStats = { tokenizedChars: 0, offloaded: false };
        expect(Array.from(await recutChat.encodeChat(recutTpl, conv, opts, 1 << 30, recutStats))).toEqual(
          cold,
        );
        // A whole long string enters the keys as its fingerprint, a cut-up one character by
        // character: other keys, so a re-cut turn may find less of its prefix cached (never wrong ids).
        expect(recutStats.cachedTokens).toBeLessThanOrEqual(stats.cachedTokens ?? 0);
        reused += stats.cachedTokens ?? 0;
        checked++;
      }
      expect(checked).toBeGreaterThan(12);
      // The large cache reuses earlier turns' prefixes.
      if (cacheTokens > 3000) expect(reused).toBeGreaterThan(0);
    }
  });
});
