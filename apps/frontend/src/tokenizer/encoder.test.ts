/**
 * The fastokens prefix cache and the special-token cut: the indexOf fast path cuts where the
 * alternation regex does; a turn tokenizes only what follows the longest cached prefix; eviction is
 * second-chance (CLOCK) within the id budget; entries do not keep prompts alive.
 */
import v8 from 'node:v8';
import vm from 'node:vm';
import { describe, expect, it } from 'vitest';
import { Rng } from '@kvrouter/testkit';
import { PromptEncoder } from './encoder.js';
import type { EncodeStats } from './types.js';
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

describe('fastokens prefix cache', () => {
  const specials = new Map([['<|s|>', 7]]);
  const run = async (enc: PromptEncoder, text: string) => {
    const s: EncodeStats = { tokenizedChars: 0, offloaded: false };
    const ids = Array.from(await enc.encode(text, s));
    return { ids, tokenized: s.tokenizedChars, cached: s.cachedTokens };
  };
  const A = (c: string, n: number) => Array<number>(n).fill(c.charCodeAt(0));

  it('a turn tokenizes only the text after the longest cached prefix; ids equal a cold tokenization', async () => {
    const tok = charTokenizer(specials);
    const enc = new PromptEncoder({ tokenizer: tok, mode: 'fastokens' });
    const t1 = `${'a'.repeat(100)}<|s|>${'b'.repeat(50)}`;
    // Cut: a*100 | 7 | b*50; one boundary (after 7) -> an entry of 101 ids.
    expect(await run(enc, t1)).toEqual({
      ids: [...A('a', 100), 7, ...A('b', 50)],
      tokenized: 150,
      cached: 0,
    });
    expect([enc.cacheEntries, enc.cacheTokensHeld]).toEqual([1, 101]);
    const t2 = `${t1}<|s|>${'c'.repeat(20)}`;
    // The prefix up to the first 7 hits (101 ids); b*50 and c*20 are tokenized; new entry [b*50, 7].
    expect(await run(enc, t2)).toEqual({
      ids: [...A('a', 100), 7, ...A('b', 50), 7, ...A('c', 20)],
      tokenized: 70,
      cached: 101,
    });
    expect([enc.cacheEntries, enc.cacheTokensHeld]).toEqual([2, 152]);
    const t3 = `${t2}<|s|>${'d'.repeat(10)}`;
    const r3 = await run(enc, t3);
    expect([r3.tokenized, r3.cached]).toEqual([30, 152]);
    expect(r3.ids).toEqual(Array.from(tok.encode(t3)));
  });

  it('no hit when a longer special matches across the old boundary', async () => {
    const sp = new Map([
      ['<|a|>', 1],
      ['<|a|>x', 3],
    ]);
    const enc = new PromptEncoder({ tokenizer: charTokenizer(sp), mode: 'fastokens' });
    await run(enc, `${'q'.repeat(10)}<|a|>`);
    // "<|a|>x" is one token (3) in the new text: its cut differs at the boundary, so no reuse.
    expect(await run(enc, `${'q'.repeat(10)}<|a|>xr`)).toEqual({
      ids: [...A('q', 10), 3, 114],
      tokenized: 11,
      cached: 0,
    });
  });

  it('eviction is second-chance (CLOCK) within the id budget', async () => {
    const tok = charTokenizer(specials);
    const enc = new PromptEncoder({ tokenizer: tok, mode: 'fastokens', cacheTokens: 250 });
    const p = (c: string) => `${c.repeat(100)}<|s|>`; // one entry of 101 ids
    await run(enc, p('a'));
    await run(enc, p('b'));
    expect((await run(enc, p('a'))).tokenized).toBe(0); // hit: a marked
    // c makes 303 > 250: the walk re-queues a (mark cleared) and evicts b -> c, a.
    await run(enc, p('c'));
    expect([enc.cacheEntries, enc.cacheTokensHeld]).toEqual([2, 202]);
    expect((await run(enc, p('b'))).tokenized).toBe(100);
    // b back in: c, a, b = 303 > 250: c (unmarked, oldest) goes -> a, b.
    expect((await run(enc, p('a'))).tokenized).toBe(0);
    expect((await run(enc, p('c'))).tokenized).toBe(100);
  });

  it('a prompt given as pieces: a special split over pieces is one token, and the cache keys are those of the whole text', async () => {
    const sp = new Map([
      ['<|s|>', 7],
      ['<|s|>x', 8],
    ]);
    const tok = charTokenizer(sp);
    const enc = new PromptEncoder({ tokenizer: tok, mode: 'fastokens' });
    const runPieces = async (pieces: string[]) => {
      const s: EncodeStats = { tokenizedChars: 0, offloaded: false };
      const ids = Array.from(await enc.encodeRendered(pieces, s));
      return { ids, tokenized: s.tokenizedChars, cached: s.cachedTokens };
    };
    // "<|s|>" over three pieces is 7; the text runs "aa" and "b" + "b" are one piece each.
    expect(await runPieces(['aa<', '|s', '|>b', 'b'])).toEqual({
      ids: [97, 97, 7, 98, 98],
      tokenized: 4,
      cached: 0,
    });
    // The same text as one string hits the entry the pieces made (aa, 7: 3 ids), and the reverse.
    expect(await run(enc, 'aa<|s|>bb<|s|>c')).toEqual({
      ids: [97, 97, 7, 98, 98, 7, 99],
      tokenized: 3,
      cached: 3,
    });
    expect(await runPieces(['a', '', 'a<|s|>b', 'b<|s', '|>', 'cd'])).toEqual({
      ids: [97, 97, 7, 98, 98, 7, 99, 100],
      tokenized: 2,
      cached: 6,
    });
    // The longer special wins across pieces too ("<|s|>" + "x" is 8), so the cut differs at the
    // boundary and only the prefix before it is reused.
    expect(await runPieces(['aa<|s|>bb<|s|>', 'x'])).toEqual({
      ids: [97, 97, 7, 98, 98, 8],
      tokenized: 2,
      cached: 3,
    });
  });

  it('any split of a text into pieces gives the ids of the whole text (random texts and cuts)', async () => {
    const sp = new Map([
      ['<|s|>', 7],
      ['<|s|>x', 8],
      ['<|t|>', 9],
      ['é', 10],
    ]);
    const tok = charTokenizer(sp);
    const rng = new Rng(1414);
    const atoms = ['<|s|>', '<|s|>x', '<|t|>', '<|', '|>', 's', 'x', 'é', 'e\u0301', '😀', 'ab', ' ', '\n'];
    const enc = new PromptEncoder({ tokenizer: tok, mode: 'fastokens', cacheTokens: 400 });
    let reused = 0;
    for (let i = 0; i < 400; i++) {
      // A shared stem (so prefixes hit) and a random tail.
      let text = i % 3 === 0 ? '' : 'stem<|s|>stem<|t|>';
      for (let k = rng.int(0, 30); k > 0; k--) text += rng.pick(atoms);
      const pieces: string[] = [];
      let last = 0;
      for (const c of Array.from({ length: rng.int(0, 8) }, () => rng.int(0, text.length)).sort(
        (a, b) => a - b,
      )) {
        pieces.push(text.slice(last, c));
        last = c;
      }
      pieces.push(text.slice(last));
      const s: EncodeStats = { tokenizedChars: 0, offloaded: false };
      const got = Array.from(await enc.encodeRendered(pieces, s));
      expect(got).toEqual(Array.from(tok.encode(text)));
      reused += s.cachedTokens ?? 0;
    }
    expect(reused).toBeGreaterThan(0);
  });

  it('entries do not keep the prompts they came from alive', async () => {
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    const enc = new PromptEncoder({ tokenizer: charTokenizer(specials), mode: 'fastokens' });
    // A 400 kB context shared by 100 prompts, each with its own question: the context prefix hits,
    // each question adds one entry of ~101 ids.
    const context = 'c'.repeat(400_000);
    gc();
    const before = process.memoryUsage().heapUsed;
    for (let i = 0; i < 100; i++) {
      // A fresh flat string per prompt, as JSON.parse + rendering make one per request.
      const prompt = JSON.parse(
        JSON.stringify(`${context}<|s|>${String(i).padStart(100, 'q')}<|s|>`),
      ) as string;
      await enc.encode(prompt);
    }
    gc();
    const grown = process.memoryUsage().heapUsed - before;
    expect(enc.cacheEntries).toBe(101);
    // Entries hold ids only: the context's 400k ids (1.6 MB) + 100 x 101 ids. Entries keeping
    // their prompts would hold 100 x 400 kB = 40 MB.
    expect(grown).toBeLessThan(10_000_000);
  });
});
