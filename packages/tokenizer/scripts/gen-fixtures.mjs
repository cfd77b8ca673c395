#!/usr/bin/env node
/**
 * Writes the reference ids of every corpus file (fixtures/corpus/*.txt) for every tokenizer family
 * (fixtures/families.json) with the `tokenizers` npm package (Hugging Face's Rust tokenizers,
 * `encode(text, add_special_tokens=False)`), into fixtures/expected/<family>.json.gz.
 * Each entry also records the SHA-256 of the corpus file, so a test notices a stale fixture.
 *
 *   pnpm --filter @kvrouter/tokenizer fixtures            # all families
 *   node packages/tokenizer/scripts/gen-fixtures.mjs qwen3
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { fileURLToPath } from 'node:url';
import { Tokenizer } from 'tokenizers';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const families = JSON.parse(fs.readFileSync(path.join(root, 'fixtures/families.json'), 'utf8'));
const only = process.argv.slice(2);
const corpusDir = path.join(root, 'fixtures/corpus');
const files = fs
  .readdirSync(corpusDir)
  .filter((f) => f.endsWith('.txt'))
  .sort();
const pkgJson = (dir) => JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
const refVersion = pkgJson(path.join(root, 'node_modules/tokenizers')).version;

for (const fam of families) {
  if (only.length > 0 && !only.includes(fam.name)) continue;
  const pkgDir = path.join(root, 'node_modules', fam.package);
  const version = pkgJson(pkgDir).version;
  const tok = Tokenizer.fromFile(path.join(pkgDir, fam.dir, 'tokenizer.json'));
  const out = {
    family: fam.name,
    tokenizer: `${fam.package}@${version}`,
    reference: `tokenizers@${refVersion}`,
    files: {},
  };
  let tokens = 0;
  for (const f of files) {
    const text = fs.readFileSync(path.join(corpusDir, f), 'utf8');
    const enc = await tok.encode(text, null, { addSpecialTokens: false });
    const ids = enc.getIds();
    tokens += ids.length;
    out.files[f] = { sha256: crypto.createHash('sha256').update(text).digest('hex'), ids };
  }
  const target = path.join(root, 'fixtures/expected', `${fam.name}.json.gz`);
  fs.writeFileSync(target, zlib.gzipSync(JSON.stringify(out), { level: 9 }));
  console.log(
    `${fam.name}: ${files.length} files, ${tokens} tokens -> ${path.relative(process.cwd(), target)}`,
  );
}
