/**
 * `splitAddedPieces`: the added-token cut of a text given as many strings equals the cut of their
 * concatenation (`splitAdded`), for every way of cutting the text into strings: inside a token,
 * between the halves of a surrogate pair, with empty strings, and with lstrip / rstrip /
 * single_word tokens (which join the strings first).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compileTokenizer, type FastTokenizer } from './index.js';
import { FAMILIES, cutAt, readTokenizerJson, textArb } from './testing/index.js';

/** Text pieces (strings) and token ids of the cut of the whole text. */
function cutWhole(fast: FastTokenizer, text: string): (string | number)[] {
  const out: (string | number)[] = [];
  fast.splitAdded(text, { text: (a, b) => out.push(text.slice(a, b)), token: (id) => out.push(id) });
  return out;
}

/** The same from the pieces: consecutive text runs make one text piece. */
function cutPieces(fast: FastTokenizer, pieces: string[]): (string | number)[] {
  const out: (string | number)[] = [];
  let cur: string | null = null;
  fast.splitAddedPieces(pieces, {
    text: (s, a, b) => {
      expect(b).toBeGreaterThan(a);
      cur = (cur ?? '') + s.slice(a, b);
    },
    token: (id) => {
      if (cur !== null) out.push(cur);
      cur = null;
      out.push(id);
    },
  });
  if (cur !== null) out.push(cur);
  return out;
}

const qwen = FAMILIES.find((f) => f.name === 'qwen3')!;

describe('splitAddedPieces', () => {
  it('a token split over two or three strings is one token (worked by hand, Qwen3)', () => {
    const fast = compileTokenizer(readTokenizerJson(qwen));
    const id = (t: string) => fast.tokenToId(t)!;
    expect(cutPieces(fast, ['ab<|im_', 'end|>c'])).toEqual(['ab', id('<|im_end|>'), 'c']);
    expect(cutPieces(fast, ['<', '|im_start', '', '|>', 'user\n'])).toEqual([id('<|im_start|>'), 'user\n']);
    // The longest token wins across strings too: "<|im_end|>" is not "<|im" + text.
    expect(cutPieces(fast, ['x<|im', '_end|', '><|im_'])).toEqual(['x', id('<|im_end|>'), '<|im_']);
    // Text pieces run over strings until the next token.
    expect(cutPieces(fast, ['a', 'b', '<think>', 'c', '', 'd'])).toEqual(['ab', id('<think>'), 'cd']);
    expect(cutPieces(fast, ['', ''])).toEqual([]);
  });

  describe.each(FAMILIES)('= splitAdded of the joined text: $name', (fam) => {
    it('random texts cut at random places', { timeout: 120_000 }, () => {
      const fast = compileTokenizer(readTokenizerJson(fam));
      const specials = fast.addedTokens.map((t) => t.content);
      fc.assert(
        fc.property(textArb(specials), fc.array(fc.nat(), { maxLength: 12 }), (text, cuts) => {
          expect(cutPieces(fast, cutAt(text, cuts))).toEqual(cutWhole(fast, text));
        }),
        { numRuns: 400, seed: 1414 },
      );
    });
  });

  it('tokens with lstrip / rstrip / single_word rules: same cut (the strings are joined)', () => {
    const json = readTokenizerJson(qwen);
    const rules: Record<string, Record<string, boolean>> = {
      '<|im_start|>': { lstrip: true },
      '<|im_end|>': { rstrip: true },
      '<tool_call>': { single_word: true },
    };
    for (const t of json.added_tokens as Record<string, unknown>[])
      Object.assign(t, rules[t.content as string] ?? {});
    const fast = compileTokenizer(json);
    const id = (t: string) => fast.tokenToId(t)!;
    // lstrip takes the blanks before from the previous string, rstrip the ones after from the next.
    expect(cutPieces(fast, ['a ', ' <|im_', 'start|>b<|im_end|> ', ' c'])).toEqual([
      'a',
      id('<|im_start|>'),
      'b',
      id('<|im_end|>'),
      'c',
    ]);
    fc.assert(
      fc.property(textArb(Object.keys(rules)), fc.array(fc.nat(), { maxLength: 8 }), (text, cuts) => {
        expect(cutPieces(fast, cutAt(text, cuts))).toEqual(cutWhole(fast, text));
      }),
      { numRuns: 200, seed: 1415 },
    );
  });
});
