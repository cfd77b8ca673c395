/** The word cache is bounded (issue 17): driven past `cacheEntries` it is cleared, never larger. */
import { describe, expect, it } from 'vitest';
import { compileTokenizer } from './index.js';
import { FAMILIES, readTokenizerJson } from './testing/index.js';

/** `i` in base 26 as lowercase letters: distinct words without digits (digits split per character). */
const letters = (i: number): string => {
  let s = '';
  do {
    s += String.fromCharCode(97 + (i % 26));
    i = Math.floor(i / 26);
  } while (i > 0);
  return `xk${s}`;
};

describe('word cache bound', () => {
  it('holds at most cacheEntries words (default 65,536) and encodes the same either way', () => {
    const json = readTokenizerJson(FAMILIES[0]!);
    const big = compileTokenizer(json);
    expect(big.wordCacheLimit).toBe(65_536);
    const small = compileTokenizer(json, { cacheEntries: 100 });
    expect(small.wordCacheLimit).toBe(100);
    let most = 0;
    for (let i = 0; i < 1000; i++) {
      const text = ` ${letters(i)}qu ${letters(i * 7 + 3)}zy`;
      expect(Array.from(small.encode(text))).toEqual(Array.from(big.encode(text)));
      most = Math.max(most, small.wordCacheEntries);
    }
    expect(most).toBeLessThanOrEqual(100);
    expect(most).toBeGreaterThan(50);
    expect(big.wordCacheEntries).toBeGreaterThan(100);
  });
});
