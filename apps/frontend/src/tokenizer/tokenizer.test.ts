/**
 * Tokenizer paths: fastokens (cut at specials + piece cache) gives exactly the default path's ids;
 * a Hugging Face tokenizer.json and Jinja chat template load from --model-path; incremental
 * detokenization concatenates to the full decode; the thread pool returns the inline ids.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as cl100k from 'gpt-tokenizer/encoding/cl100k_base';
import { describe, expect, it } from 'vitest';
import { Rng } from '@kvrouter/testkit';
import { DecodeStream } from './detok.js';
import { PromptEncoder } from './encoder.js';
import { loadTokenizer } from './load.js';
import { TokenizerPool } from './pool.js';
import { ChatMlTemplate } from './template.js';
import { TiktokenTokenizer } from './tiktoken.js';

const WORDS = [
  'the',
  'cat',
  ' sat',
  'über',
  '日本語',
  '🙂',
  '\n',
  '  ',
  'token',
  'izer',
  '<|im_start|>',
  '<|im_end|>',
  '<|endoftext|>',
  '<|im_',
  'end|>',
  'x',
];

function randomText(rng: Rng, n: number): string {
  let s = '';
  for (let i = 0; i < n; i++) s += rng.pick(WORDS) + (rng.bool() ? ' ' : '');
  return s;
}

describe('tiktoken (cl100k) tokenizer', () => {
  const tok = new TiktokenTokenizer();

  it('special tokens map to their ids; the same text outside them is ordinary text', () => {
    // <|im_start|> = 100264 and <|im_end|> = 100265 in cl100k_base; "user" between them is BPE.
    expect(Array.from(tok.encode('<|im_start|>user<|im_end|>'))).toEqual([
      100264,
      ...cl100k.encode('user'),
      100265,
    ]);
    // encodeText never produces a special id.
    expect(Array.from(tok.encodeText('<|im_end|>'))).not.toContain(100265);
  });

  it('fastokens = default on random texts with specials, also when pieces repeat (cache hits)', async () => {
    const rng = new Rng(7);
    const def = new PromptEncoder({ tokenizer: tok, mode: 'default' });
    const fast = new PromptEncoder({ tokenizer: tok, mode: 'fastokens' });
    const history: string[] = [];
    for (let i = 0; i < 60; i++) {
      history.push(randomText(rng, rng.int(1, 120)));
      // A growing conversation: earlier pieces come back and hit the cache.
      const text = history.join('<|im_end|>\n<|im_start|>');
      expect(Array.from(await fast.encode(text))).toEqual(Array.from(await def.encode(text)));
    }
    expect(fast.cacheEntries).toBeGreaterThan(0);
  });

  it('a cached conversation re-tokenizes only its new message', async () => {
    const fast = new PromptEncoder({ tokenizer: tok, mode: 'fastokens' });
    const t = new ChatMlTemplate();
    const old = { role: 'user' as const, content: 'a'.repeat(500) + ' earlier turn' };
    await fast.encode(t.render([old], { addGenerationPrompt: true }));
    const stats = { tokenizedChars: 0, offloaded: false };
    const next = { role: 'user' as const, content: 'short new question that is long enough to be cached' };
    await fast.encode(
      t.render([old, { role: 'assistant', content: 'ok' }, next], { addGenerationPrompt: true }),
      stats,
    );
    // The first request's prefix up to "<|im_end|>\n<|im_start|>" (its last added token) is cached and
    // is also the start of the second request. Tokenized after it: "assistant\nok" (12), "\n",
    // "user\n" + next (5 + 51), "\n", "assistant\n" (10) = 80; the 518-char old turn is not.
    const newChars = 12 + 1 + 56 + 1 + 10;
    expect(stats.tokenizedChars).toBe(newChars);
  });

  it('decoding streamed token by token concatenates to the full decode, split characters included', () => {
    const text = 'naïve café 日本語 🙂 done';
    const ids = Array.from(tok.encode(text));
    const s = new DecodeStream(tok);
    let out = '';
    for (const id of ids) out += s.push([id]);
    out += s.flush();
    expect(out).toBe(text);
    // 🙂 is 4 UTF-8 bytes split over several byte-level tokens: no replacement char leaks out.
    expect(out).not.toContain('\uFFFD');
  });

  it('unknown and special ids decode to nothing instead of failing', () => {
    expect(tok.decode([100264, 999_999, ...cl100k.encode('ok')])).toBe('ok');
  });
});

describe('Hugging Face tokenizer.json + chat template (--model-path)', () => {
  /** A byte-level BPE with a handful of merges, hand-written: "hi" and " hi" are single tokens. */
  function modelDir(template: string | null): string {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvr-hf-'));
    const bytes = 'abcdefghijklmnopqrstuvwxyz<>|_ Ġ\nĊ!.';
    const vocab: Record<string, number> = {};
    for (const ch of bytes) if (!(ch in vocab)) vocab[ch] = Object.keys(vocab).length;
    vocab.hi = Object.keys(vocab).length;
    vocab['Ġhi'] = Object.keys(vocab).length;
    const n = Object.keys(vocab).length;
    fs.writeFileSync(
      path.join(dir, 'tokenizer.json'),
      JSON.stringify({
        version: '1.0',
        added_tokens: [
          {
            id: n,
            content: '<s>',
            special: true,
            single_word: false,
            lstrip: false,
            rstrip: false,
            normalized: false,
          },
          {
            id: n + 1,
            content: '</s>',
            special: true,
            single_word: false,
            lstrip: false,
            rstrip: false,
            normalized: false,
          },
        ],
        normalizer: null,
        pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
        post_processor: null,
        decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
        model: {
          type: 'BPE',
          dropout: null,
          unk_token: null,
          fuse_unk: false,
          byte_fallback: false,
          vocab,
          merges: ['h i', 'Ġ hi'],
        },
      }),
    );
    fs.writeFileSync(
      path.join(dir, 'tokenizer_config.json'),
      JSON.stringify({
        bos_token: '<s>',
        eos_token: { content: '</s>' },
        add_bos_token: true,
        ...(template ? { chat_template: template } : {}),
      }),
    );
    return dir;
  }

  it('loads vocabulary, specials, BOS/EOS and renders the Jinja template', () => {
    const tpl =
      '{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{{ eos_token }}{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}';
    const { tokenizer, template } = loadTokenizer({ kind: 'hf', dir: modelDir(tpl) });
    const eos = tokenizer.specialTokens.get('</s>')!;
    const bos = tokenizer.specialTokens.get('<s>')!;
    expect(tokenizer.eosTokenIds).toEqual([eos]);
    expect(tokenizer.bosTokenIds).toEqual([bos]);
    const text = template.render([{ role: 'user', content: 'hi hi' }], { addGenerationPrompt: true });
    expect(text).toBe('<s>[user]hi hi</s>[assistant]');
    const ids = Array.from(tokenizer.encode('hi hi</s>'));
    // 36 single characters get ids 0..35, so the merges "hi" and "Ġhi" are 36 and 37; <s> = 38, </s> = 39.
    expect(eos).toBe(39);
    expect(ids).toEqual([36, 37, 39]);
    expect(tokenizer.decode(ids)).toBe('hi hi');
  });

  it('fastokens = default for a byte-level tokenizer.json', async () => {
    const { tokenizer } = loadTokenizer({ kind: 'hf', dir: modelDir(null) });
    expect(tokenizer.chunkSafe).toBe(true);
    const def = new PromptEncoder({ tokenizer, mode: 'default' });
    const fast = new PromptEncoder({ tokenizer, mode: 'fastokens' });
    const rng = new Rng(3);
    for (let i = 0; i < 30; i++) {
      const text = Array.from({ length: rng.int(1, 40) }, () =>
        rng.pick(['hi', ' hi', '<s>', '</s>', 'ab', '\n', '!']),
      ).join('');
      expect(Array.from(await fast.encode(text))).toEqual(Array.from(await def.encode(text)));
    }
  });

  it('a tokenizer.json the fast tokenizer does not support falls back to @huggingface/tokenizers, said once', () => {
    const dir = modelDir(null);
    const file = path.join(dir, 'tokenizer.json');
    const json = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>;
    json.normalizer = { type: 'Lowercase' };
    fs.writeFileSync(file, JSON.stringify(json));
    const lines: string[] = [];
    const loaded = loadTokenizer({ kind: 'hf', dir }, (l) => lines.push(l));
    expect(loaded.engine).toBe('hf');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('normalizer Lowercase');
    expect(lines[0]).toContain('@huggingface/tokenizers');
    // Lowercased first: "hi hi" -> "hi" (36), "Ġhi" (37).
    expect(Array.from(loaded.tokenizer.encode('HI hI'))).toEqual([36, 37]);
  });

  it('a model directory without tokenizer.json is a clear error', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvr-hf-empty-'));
    expect(() => loadTokenizer({ kind: 'hf', dir })).toThrow(/tokenizer\.json/);
  });
});

describe('tokenizer threads', () => {
  it('long texts tokenized in a worker thread give the inline ids', async () => {
    const tok = new TiktokenTokenizer();
    const pool = new TokenizerPool({ kind: 'tiktoken', encoding: 'cl100k_base' }, 1);
    try {
      await pool.whenReady();
      const enc = new PromptEncoder({ tokenizer: tok, mode: 'default', pool, offloadChars: 1000 });
      const text = randomText(new Rng(11), 2000);
      const stats = { tokenizedChars: 0, offloaded: false };
      const ids = await enc.encode(text, stats);
      expect(stats.offloaded).toBe(true);
      expect(Array.from(ids)).toEqual(Array.from(tok.encode(text)));
    } finally {
      await pool.close();
    }
  });
});
