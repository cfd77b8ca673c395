/**
 * Property test: random texts (pre-tokenizer edge classes, the family's added tokens and near
 * misses, random code points) give exactly the reference ids of the `tokenizers` npm package.
 */
import fc from 'fast-check';
import { Tokenizer } from 'tokenizers';
import { describe, expect, it } from 'vitest';
import { compileTokenizer } from './index.js';
import { FAMILIES, readTokenizerJson, textArb, tokenizerJsonPath } from './testing/index.js';

describe.each(FAMILIES)('random texts vs tokenizers 0.23.2: $name', (fam) => {
  it(
    'same ids (scanner and regex paths) and decode gives back the normalized text',
    { timeout: 240_000 },
    async () => {
      const json = readTokenizerJson(fam);
      const fast = compileTokenizer(json);
      const generic = fast.withOptions({ noScanner: true });
      const ref = Tokenizer.fromFile(tokenizerJsonPath(fam));
      const specials = fast.addedTokens.map((t) => t.content);
      await fc.assert(
        fc.asyncProperty(textArb(specials), async (text) => {
          const want = (await ref.encode(text, null, { addSpecialTokens: false })).getIds();
          expect(Array.from(fast.encode(text))).toEqual(want);
          expect(Array.from(generic.encode(text))).toEqual(want);
          expect(fast.decode(want, false)).toBe(await ref.decode(want, false));
        }),
        { numRuns: 150, seed: 14 },
      );
    },
  );
});

describe('added-token rules (lstrip, rstrip, single_word) vs tokenizers 0.23.2', () => {
  it('same ids on random texts around tokens carrying each rule', { timeout: 240_000 }, async () => {
    const fam = FAMILIES.find((f) => f.name === 'qwen3')!;
    const json = readTokenizerJson(fam);
    const rules: Record<string, { lstrip?: boolean; rstrip?: boolean; single_word?: boolean }> = {
      '<|im_start|>': { lstrip: true },
      '<|im_end|>': { rstrip: true },
      '<tool_call>': { single_word: true },
      '<think>': { lstrip: true, rstrip: true },
      '</think>': { single_word: true, rstrip: true },
    };
    for (const t of json.added_tokens as Record<string, unknown>[])
      Object.assign(t, rules[t.content as string] ?? {});
    const fast = compileTokenizer(json);
    const ref = Tokenizer.fromString(JSON.stringify(json));
    // Worked by hand from the rules: lstrip takes the space before, rstrip the blanks after; a
    // single_word token next to a word character is text.
    const id = (t: string) => fast.tokenToId(t)!;
    expect(Array.from(fast.encode(' <|im_start|>'))).toEqual([id('<|im_start|>')]);
    expect(Array.from(fast.encode('<|im_end|> \n '))).toEqual([id('<|im_end|>')]);
    expect(Array.from(fast.encode('a<tool_call>'))).not.toContain(id('<tool_call>'));
    expect(Array.from(fast.encode('a <tool_call> b'))).toContain(id('<tool_call>'));
    const bits = [
      ...Object.keys(rules),
      ' ',
      '  ',
      '\n',
      '\t',
      'a',
      'word',
      'x_y',
      '9',
      '.',
      'é',
      '中',
      '\u00a0',
      '\u3000',
    ];
    await fc.assert(
      fc.asyncProperty(fc.array(fc.constantFrom(...bits), { maxLength: 30 }), async (parts) => {
        const text = parts.join('');
        const want = (await ref.encode(text, null, { addSpecialTokens: false })).getIds();
        expect(Array.from(fast.encode(text))).toEqual(want);
      }),
      { numRuns: 400, seed: 14 },
    );
  });
});
