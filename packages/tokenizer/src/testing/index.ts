/**
 * Test support: the real tokenizer.json files of fixtures/families.json (devDependencies of this
 * package), the committed corpus, and a random-text arbitrary shared by the property tests.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';

export const PKG_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), '../..');

export interface Family {
  name: string;
  package: string;
  dir: string;
}

export const FAMILIES = JSON.parse(
  fs.readFileSync(path.join(PKG_DIR, 'fixtures/families.json'), 'utf8'),
) as Family[];

export function familyDir(f: Family): string {
  return path.join(PKG_DIR, 'node_modules', f.package, f.dir);
}

export function tokenizerJsonPath(f: Family): string {
  return path.join(familyDir(f), 'tokenizer.json');
}

export function readTokenizerJson(f: Family): Record<string, unknown> {
  return JSON.parse(fs.readFileSync(tokenizerJsonPath(f), 'utf8')) as Record<string, unknown>;
}

export const CORPUS_DIR = path.join(PKG_DIR, 'fixtures/corpus');

export function corpusFiles(): string[] {
  return fs
    .readdirSync(CORPUS_DIR)
    .filter((f) => f.endsWith('.txt'))
    .sort();
}

export function readCorpus(file: string): string {
  return fs.readFileSync(path.join(CORPUS_DIR, file), 'utf8');
}

/** Pieces that exercise the pre-tokenizer classes and the added-token split. */
const ATOMS = [
  ' ',
  '  ',
  '\t',
  '\n',
  '\r\n',
  '\r',
  '\n\n',
  ' \n',
  '\u00a0',
  '\u0085',
  '\u2028',
  '\u3000',
  '\ufeff',
  '\u200b',
  '\u000b',
  "'s",
  "'S",
  "'t",
  "'re",
  "'VE",
  "'m",
  "'ll",
  "'D",
  "'ſ",
  'ſ',
  '\u212a',
  "'",
  '"',
  '`',
  'a',
  'Z',
  'the',
  'The',
  'THE',
  'hello',
  'World',
  'camelCase',
  'HTTPServer',
  'x_y',
  'naïve',
  'Straße',
  'İı',
  '0',
  '7',
  '12',
  '123',
  '1234',
  '٣',
  '४',
  '½',
  '²',
  'Ⅻ',
  '.',
  ',',
  '!',
  '?',
  '...',
  '-',
  '--',
  '==',
  '/',
  '//',
  '\\',
  '(',
  ')',
  '{',
  '}',
  '[',
  ']',
  '<',
  '>',
  '<|',
  '|>',
  '#',
  '@',
  '$',
  '中',
  '文字',
  '日本語',
  'ひらがな',
  'カタカナ',
  '한국어',
  'ไทย',
  'مرحبا',
  'שלום',
  'Ελληνικά',
  'Русский',
  'e\u0301',
  'A\u030a',
  '\u1100\u1161',
  'ﬁ',
  '①',
  'Ω',
  '\u0300',
  '\u200d',
  '👍',
  '👍🏽',
  '👩‍👩‍👧',
  '🇯🇵',
  '❤️',
  '😀',
];

/**
 * Random text: concatenations of ATOMS, of the family's added tokens (and near misses of them), and
 * of random code points (no lone surrogates: a JavaScript string with one has no UTF-8 form).
 */
export function textArb(specials: readonly string[]): fc.Arbitrary<string> {
  const near = specials.slice(0, 40).flatMap((s) => [s, s.slice(0, -1), s.slice(1), ` ${s}`]);
  const codePoint = fc
    .integer({ min: 0, max: 0x10ffff })
    .filter((c) => c < 0xd800 || c > 0xdfff)
    .map((c) => String.fromCodePoint(c));
  const small = fc.integer({ min: 0x20, max: 0x2fff }).map((c) => String.fromCodePoint(c));
  const atom = fc.oneof(
    { weight: 8, arbitrary: fc.constantFrom(...ATOMS) },
    {
      weight: near.length > 0 ? 2 : 0,
      arbitrary: near.length > 0 ? fc.constantFrom(...near) : fc.constant(''),
    },
    { weight: 2, arbitrary: small },
    { weight: 1, arbitrary: codePoint },
    { weight: 1, arbitrary: fc.string({ maxLength: 8 }) },
  );
  return fc.array(atom, { maxLength: 40 }).map((a) => a.join(''));
}

/**
 * `text` cut at `cuts` (positions taken modulo `text.length + 1`, any order; a repeated position
 * gives an empty piece): the pieces a renderer may hand over for one text.
 */
export function cutAt(text: string, cuts: readonly number[]): string[] {
  const at = cuts.map((c) => c % (text.length + 1)).sort((a, b) => a - b);
  const out: string[] = [];
  let last = 0;
  for (const c of at) {
    out.push(text.slice(last, c));
    last = c;
  }
  out.push(text.slice(last));
  return out;
}
