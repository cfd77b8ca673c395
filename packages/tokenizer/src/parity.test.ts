/**
 * Parity with the reference: the committed corpus (fixtures/corpus) tokenized by the `tokenizers`
 * npm package (Hugging Face's Rust core) into fixtures/expected/<family>.json.gz by
 * scripts/gen-fixtures.mjs. Every id of every file must match, for every family.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { compileTokenizer, type FastTokenizer } from './index.js';
import { corpusFiles, FAMILIES, PKG_DIR, readCorpus, readTokenizerJson } from './testing/index.js';

interface Expected {
  family: string;
  tokenizer: string;
  reference: string;
  files: Record<string, { sha256: string; ids: number[] }>;
}

function expected(name: string): Expected {
  const file = path.join(PKG_DIR, 'fixtures/expected', `${name}.json.gz`);
  return JSON.parse(zlib.gunzipSync(fs.readFileSync(file)).toString('utf8')) as Expected;
}

function firstDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
}

/** Heavy on a loaded machine: compiling a 200k-token vocabulary and encoding ~130k tokens twice. */
const SLOW = { timeout: 240_000 };

describe.each(FAMILIES)('corpus parity: $name', (fam) => {
  const exp = expected(fam.name);
  const files = corpusFiles();
  let compiled: FastTokenizer | null = null;
  const tokenizer = (): FastTokenizer => (compiled ??= compileTokenizer(readTokenizerJson(fam)));

  it('the expected ids were generated from the committed corpus (rerun scripts/gen-fixtures.mjs if not)', () => {
    expect(Object.keys(exp.files).sort()).toEqual(files);
    for (const f of files) {
      const sha = crypto.createHash('sha256').update(readCorpus(f)).digest('hex');
      expect(sha, f).toBe(exp.files[f]!.sha256);
    }
  });

  it('0 mismatching files and ids on both the scanner and the generic regex path', () => {
    const json = readTokenizerJson(fam);
    for (const tok of [
      compileTokenizer(json),
      compileTokenizer(json, { noScanner: true, cacheMaxChars: 0 }),
    ]) {
      const mismatches: string[] = [];
      let tokens = 0;
      for (const f of files) {
        const want = exp.files[f]!.ids;
        const got = tok.encode(readCorpus(f));
        tokens += want.length;
        const at = firstDiff(got, want);
        if (at >= 0) mismatches.push(`${f} (${tok.preTokenizerKind}) first differs at token ${at}`);
      }
      expect(mismatches).toEqual([]);
      expect(tokens).toBeGreaterThan(100_000);
    }
  });

  it('decode gives back the (normalized) text', SLOW, () => {
    const tok = tokenizer();
    for (const f of files) {
      const text = readCorpus(f);
      expect(tok.decode(exp.files[f]!.ids, false) === tok.normalize(text), f).toBe(true);
    }
  });
});
