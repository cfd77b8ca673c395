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
