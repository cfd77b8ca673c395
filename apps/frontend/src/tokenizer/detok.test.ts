/**
 * Incremental detokenization, per tokenizer kind (tiktoken cl100k; Hugging Face tokenizer.json
 * through tokenizers.js with Qwen3's and Llama 3.1's byte-level BPE): streamed one id at a time or
 * in random chunks, no delta ever contains a broken character (U+FFFD) when the text has none,
 * the deltas concatenate to the full decode, and the tokenizer is never asked to decode an empty
 * list (tokenizers.js throws on it: every request returned 500 with --model-path).
 */
import { describe, expect, it } from 'vitest';
import { Rng } from '@kvrouter/testkit';
import { parityModelDir } from '@kvrouter/testkit/parity';
import { DecodeStream } from './detok.js';
import { loadTokenizer } from './load.js';
import { TiktokenTokenizer } from './tiktoken.js';
import type { TextTokenizer } from './types.js';

const TEXTS = [
  'Hello, world! Plain ASCII first.',
  '日本語のテキストと中文文本，还有한국어 문장도 있습니다。',
  'Emoji: 👨‍👩‍👧‍👦 🏳️‍🌈 🇯🇵🇫🇷 🧑🏿‍💻 🫠 ❤️‍🔥 and 𝕳𝖊𝖑𝖑𝖔 𓀀 (astral planes).',
  'RTL: مرحبا بالعالم — שלום עולם; Devanagari: क्षत्रज्ञ; Thai: สวัสดีครับ',
  'Mixed: café naïve façade Ångström e\u0301 ½ ① 一二三 — “quotes” and ‘single’ …',
  '荒唐言一把辛酸泪都云作者痴谁解其中味🀄️🎴🃏',
];

/** Records every decode call and refuses an empty list, as tokenizers.js does. */
function strict(tok: TextTokenizer): { tok: TextTokenizer; emptyCalls: () => number } {
  let empty = 0;
  const wrapped: TextTokenizer = {
    name: tok.name,
    vocabSize: tok.vocabSize,
    specialTokens: tok.specialTokens,
    eosTokenIds: tok.eosTokenIds,
    bosTokenIds: tok.bosTokenIds,
    chunkSafe: tok.chunkSafe,
    encodeText: (t) => tok.encodeText(t),
    encode: (t) => tok.encode(t),
    decode: (ids) => {
      if (ids.length === 0) {
        empty++;
        throw new Error('decode([]) called');
      }
      return tok.decode(ids);
    },
  };
  return { tok: wrapped, emptyCalls: () => empty };
}

/** No U+FFFD, no lone surrogate (a broken character shows up as one or the other, or as nothing). */
function wellFormed(s: string): boolean {
  return (
    !s.includes('\uFFFD') && !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s)
  );
}

function stream(tok: TextTokenizer, ids: number[], chunks: number[]): string[] {
  const s = new DecodeStream(tok);
  const deltas: string[] = [];
  let i = 0;
  for (const n of chunks) {
    deltas.push(s.push(ids.slice(i, i + n)));
    i += n;
  }
  deltas.push(s.flush());
  return deltas;
}

const kinds: [string, () => TextTokenizer][] = [
  ['tiktoken (cl100k_base)', () => new TiktokenTokenizer()],
  ['hf tokenizer.json (Qwen3)', () => loadTokenizer({ kind: 'hf', dir: parityModelDir('qwen3') }).tokenizer],
  [
    'hf tokenizer.json (Llama 3.1)',
    () => loadTokenizer({ kind: 'hf', dir: parityModelDir('llama3_1') }).tokenizer,
  ],
];

describe.each(kinds)('DecodeStream with %s', (_name, make) => {
  const base = make();

  it('one id at a time: no split character, deltas concatenate to the full decode, no decode([])', () => {
    const { tok, emptyCalls } = strict(base);
    let splitIds = 0;
    for (const text of TEXTS) {
      const ids = Array.from(base.encode(text));
      const deltas = stream(
        tok,
        ids,
        ids.map(() => 1),
      );
      for (const d of deltas) expect(wellFormed(d), JSON.stringify(d)).toBe(true);
      expect(deltas.join('')).toBe(base.decode(ids));
      for (let k = 0; k < ids.length; k++) if (!wellFormed(base.decode([ids[k]!]))) splitIds++;
    }
    // The texts do cut characters across ids (emoji and CJK take several byte-level tokens).
    expect(splitIds).toBeGreaterThan(0);
    expect(emptyCalls()).toBe(0);
  });

  it('random chunk sizes, empty pushes included', () => {
    const { tok, emptyCalls } = strict(base);
    const rng = new Rng(16);
    for (let round = 0; round < 30; round++) {
      const text = TEXTS[round % TEXTS.length]! + TEXTS[(round * 7 + 3) % TEXTS.length]!;
      const ids = Array.from(base.encode(text));
      const chunks: number[] = [];
      for (let left = ids.length; left > 0;) {
        const n = Math.min(left, rng.int(0, 4));
        chunks.push(n);
        left -= n;
      }
      const deltas = stream(tok, ids, chunks);
      for (const d of deltas) expect(wellFormed(d), JSON.stringify(d)).toBe(true);
      expect(deltas.join('')).toBe(base.decode(ids));
    }
    expect(emptyCalls()).toBe(0);
  });

  it('a stream of nothing but special tokens (EOS) and empty items decodes to "" without decode([])', () => {
    const { tok, emptyCalls } = strict(base);
    const s = new DecodeStream(tok);
    expect(s.push([])).toBe('');
    const eos = base.eosTokenIds[0]!;
    expect(s.push([eos])).toBe('');
    expect(s.push([])).toBe('');
    expect(s.flush()).toBe('');
    expect(emptyCalls()).toBe(0);
  });
});

describe('DecodeStream with a character split over ids', () => {
  it('holds the incomplete tail and releases the text before it', () => {
    // A toy byte tokenizer: id = one UTF-8 byte; "a😀b" is a, F0 9F 98 80, b.
    const dec = new TextDecoder();
    const tok: TextTokenizer = {
      name: 'bytes',
      vocabSize: 256,
      specialTokens: new Map(),
      eosTokenIds: [],
      bosTokenIds: [],
      chunkSafe: true,
      encodeText: (t) => Array.from(new TextEncoder().encode(t)),
      encode: (t) => Array.from(new TextEncoder().encode(t)),
      decode: (ids) => {
        if (ids.length === 0) throw new Error('decode([])');
        return dec.decode(Uint8Array.from(Array.from({ length: ids.length }, (_, i) => ids[i]!)));
      },
    };
    const s = new DecodeStream(tok);
    expect(s.push([0x61, 0xf0])).toBe('a');
    expect(s.push([0x9f])).toBe('');
    expect(s.push([0x98])).toBe('');
    expect(s.push([0x80, 0x62])).toBe('😀b');
    expect(s.flush()).toBe('');
    expect(s.text).toBe('a😀b');
  });
});
