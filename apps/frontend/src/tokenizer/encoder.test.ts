/**
 * The fastokens piece cache and the special-token cut: the indexOf fast path cuts where the
 * alternation regex does; hits skip tokenization; eviction is second-chance (CLOCK); cached pieces
 * do not keep the prompt they were cut from alive.
 */
import v8 from 'node:v8';
import vm from 'node:vm';
import { describe, expect, it } from 'vitest';
import { Rng } from '@kvrouter/testkit';
import { PromptEncoder, type EncodeStats } from './encoder.js';
import { splitSpecials } from './split.js';
import type { TextTokenizer } from './types.js';

/** One id per character (its code unit): cheap, and every count below is a character count. */
function charTokenizer(specials: ReadonlyMap<string, number>): TextTokenizer & { calls: number } {
  return {
    name: 'chars',
    vocabSize: 1 << 16,
    specialTokens: specials,
    eosTokenIds: [],
    bosTokenIds: [],
    chunkSafe: true,
    calls: 0,
    encodeText(text: string): number[] {
      this.calls++;
      const out = new Array<number>(text.length);
      for (let i = 0; i < text.length; i++) out[i] = text.charCodeAt(i);
      return out;
    },
    encode(text: string): number[] {
      return splitSpecials(text, specials).flatMap((p) =>
        typeof p === 'number' ? [p] : Array.from(this.encodeText(p)),
      );
    },
    decode: () => '',
  };
}

/** The pre-fast-path cut, kept as the reference: one regex, longest alternative first. */
function regexSplit(text: string, specials: ReadonlyMap<string, number>): (string | number)[] {
  const keys = [...specials.keys()].sort((a, b) => b.length - a.length);
  const re = new RegExp(keys.map((k) => k.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|'), 'g');
  const out: (string | number)[] = [];
  let last = 0;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    if (m.index > last) out.push(text.slice(last, m.index));
    out.push(specials.get(m[0])!);
    last = m.index + m[0].length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

describe('splitSpecials', () => {
  // Shared prefix "<|" (indexOf path); "<|a|>x" is longer than "<|a|>" and wins where both match.
  const shared = new Map([
    ['<|a|>', 1],
    ['<|ab|>', 2],
    ['<|a|>x', 3],
  ]);

  it('cuts at the leftmost special, the longest one where several match', () => {
    // "q" | "<|a|>x" (3, not "<|a|>" then "x") | "<|ab|>" (2) | "<|b" (a lead without a special: text)
    expect(splitSpecials('q<|a|>x<|ab|><|b', shared)).toEqual(['q', 3, 2, '<|b']);
    expect(splitSpecials('<|<|a|>', shared)).toEqual(['<|', 1]);
    expect(splitSpecials('', shared)).toEqual([]);
    // No common prefix: the regex path.
    expect(
      splitSpecials(
        'x[A]y<B>',
        new Map([
          ['[A]', 1],
          ['<B>', 2],
        ]),
      ),
    ).toEqual(['x', 1, 'y', 2]);
  });

  it('equals the regex cut on random texts made of special fragments', () => {
    const rng = new Rng(3);
    const bits = ['<|', '|>', 'a', 'ab', 'x', '<|a|>', '<|ab|>', '<|a|>x', ' ', '<'];
    for (let i = 0; i < 500; i++) {
      let t = '';
      for (let k = rng.int(0, 30); k > 0; k--) t += rng.pick(bits);
      expect(splitSpecials(t, shared)).toEqual(regexSplit(t, shared));
    }
  });
});

describe('fastokens piece cache', () => {
  const specials = new Map([['<|s|>', 7]]);
  const piece = (c: string) => c.repeat(100); // above the 64-character caching threshold

  it('a hit is not tokenized again; eviction gives recently hit pieces a second chance', async () => {
    const tok = charTokenizer(specials);
    // Room for 4 pieces of 100 characters (a piece may take at most a quarter of the budget).
    const enc = new PromptEncoder({ tokenizer: tok, mode: 'fastokens', cacheChars: 400 });
    const stats = (): EncodeStats => ({ tokenizedChars: 0, offloaded: false });
    const run = async (text: string) => {
      const s = stats();
      const ids = await enc.encode(text, s);
      return { ids: Array.from(ids), tokenized: s.tokenizedChars };
    };
    // 100 'a' + special + 100 'b': ids are the char codes (97, 98) around id 7; 200 chars tokenized.
    const first = await run(`${piece('a')}<|s|>${piece('b')}`);
    expect(first.tokenized).toBe(200);
    expect(first.ids).toEqual([...Array<number>(100).fill(97), 7, ...Array<number>(100).fill(98)]);
    // Same text again: both pieces hit, nothing tokenized, same ids.
    const again = await run(`${piece('a')}<|s|>${piece('b')}`);
    expect(again).toEqual({ ids: first.ids, tokenized: 0 });
    // a*, b* (hit, marked), c, d: 400 characters, full.
    await run(piece('c'));
    await run(`${piece('a')}<|s|>${piece('d')}`);
    expect(enc.cacheEntries).toBe(4);
    // e makes 500 > 400: the walk from the oldest re-queues a and b with their marks cleared and
    // evicts c, the first one never hit -> d, e, a, b. (Plain LRU would have evicted b.)
    await run(piece('e'));
    expect(enc.cacheEntries).toBe(4);
    expect((await run(piece('c'))).tokenized).toBe(100);
    // c back in: d, e, a, b, c = 500 > 400: d (unmarked) goes -> e, a, b, c.
    expect((await run(piece('a'))).tokenized).toBe(0);
    expect((await run(piece('b'))).tokenized).toBe(0);
    expect((await run(piece('d'))).tokenized).toBe(100);
    expect(tok.calls).toBe(7); // a, b, c, d, e, c, d
  });

  it('cached pieces do not keep the prompt they were cut from alive', async () => {
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    const enc = new PromptEncoder({ tokenizer: charTokenizer(specials), mode: 'fastokens' });
    // A 400 kB context shared by 100 prompts, each with its own 100-character question: the
    // context piece hits, each question is a new cache entry (a slice of that prompt's text).
    const context = 'c'.repeat(400_000);
    gc();
    const before = process.memoryUsage().heapUsed;
    for (let i = 0; i < 100; i++) {
      // A fresh flat string per prompt, as JSON.parse + rendering make one per request.
      const prompt = JSON.parse(JSON.stringify(`${context}<|s|>${String(i).padStart(100, 'q')}`)) as string;
      await enc.encode(prompt);
    }
    gc();
    const grown = process.memoryUsage().heapUsed - before;
    expect(enc.cacheEntries).toBe(101);
    // Entries own their characters: ~101 keys + ids (the context's 400k ids: 1.6 MB) ≈ 2 MB. Keys
    // that were slices would pin every prompt: 100 x 400 kB = 40 MB.
    expect(grown).toBeLessThan(10_000_000);
  });
});
