/**
 * The error-code table, docs/errors.md and the code agree: every code a call site constructs is a row
 * of the table, a literal status at a call site is the row's status, every row is used somewhere, and
 * the committed doc is what `renderErrorsDoc()` generates.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, isErrorCode } from './error-codes.js';
import { renderErrorsDoc } from './error-doc.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

function sources(): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      if (name === 'node_modules' || name === 'dist' || name.startsWith('.')) continue;
      const p = join(dir, name);
      if (statSync(p).isDirectory()) walk(p);
      else if (/\.(ts|mts|mjs)$/.test(name) && !/\.test\.ts$/.test(name) && !name.endsWith('.d.ts'))
        out.push(p);
    }
  };
  for (const top of ['packages', 'apps', 'tools', 'benchmarks']) walk(join(ROOT, top));
  return out;
}

/** The top-level arguments of the call whose `(` is at `open`, as source text (strings, templates, nesting skipped). */
function callArgs(src: string, open: number): string[] {
  const args: string[] = [];
  let depth = 0;
  let start = open + 1;
  for (let i = open; i < src.length; i++) {
    const c = src[i]!;
    if (c === "'" || c === '"' || c === '`') {
      i = skipString(src, i);
      continue;
    }
    if (c === '/' && src[i + 1] === '/') {
      i = src.indexOf('\n', i);
      continue;
    }
    if (c === '(' || c === '[' || c === '{') depth++;
    else if (c === ')' || c === ']' || c === '}') {
      depth--;
      if (depth === 0) {
        const last = src.slice(start, i).trim();
        if (last) args.push(last);
        return args;
      }
    } else if (c === ',' && depth === 1) {
      args.push(src.slice(start, i).trim());
      start = i + 1;
    }
  }
  return args;
}

/** Index of the closing quote of the string or template literal opening at `i`. */
function skipString(src: string, i: number): number {
  const q = src[i];
  for (let j = i + 1; j < src.length; j++) {
    const c = src[j];
    if (c === '\\') j++;
    else if (c === q) return j;
    else if (q === '`' && c === '$' && src[j + 1] === '{') {
      let depth = 0;
      for (j = j + 1; j < src.length; j++) {
        if (src[j] === '{') depth++;
        else if (src[j] === '}' && --depth === 0) break;
        else if (src[j] === "'" || src[j] === '"' || src[j] === '`') j = skipString(src, j);
      }
    }
  }
  return src.length;
}

interface Site {
  where: string;
  code: string;
  status: string | undefined;
}

/** `new KvrError('code', msg, status?)`, `super('code', msg, status?)` in KvrError subclasses, `rpcError('code', …)`. */
function constructionSites(): Site[] {
  const sites: Site[] = [];
  for (const file of sources()) {
    const src = readFileSync(file, 'utf8');
    const patterns = [/\bnew KvrError\s*\(/g, /\brpcError\s*\(/g];
    if (/extends KvrError\b/.test(src)) patterns.push(/\bsuper\s*\(/g);
    for (const re of patterns) {
      for (const m of src.matchAll(re)) {
        const args = callArgs(src, m.index + m[0].length - 1);
        const lineStart = src.lastIndexOf('\n', m.index) + 1;
        if (/^\s*(\*|\/\/|\/\*)/.test(src.slice(lineStart, m.index))) continue; // in a comment
        const lit = /^'([^']*)'$/.exec(args[0] ?? '');
        if (!lit) continue; // a variable code: typed `ErrorCode | RelayedCode` by the compiler
        const line = src.slice(0, m.index).split('\n').length;
        const status = re.source.includes('rpcError') ? undefined : args[2];
        sites.push({ where: `${relative(ROOT, file)}:${line}`, code: lit[1]!, status });
      }
    }
  }
  return sites;
}

describe('error-code table', () => {
  const sites = constructionSites();

  it('finds the construction sites (sanity: the scanner reads the tree)', () => {
    expect(sites.length).toBeGreaterThan(100);
    expect(sites.some((s) => s.code === 'invalid_argument')).toBe(true);
  });

  it('every code constructed in the tree is a row of the table', () => {
    const unknown = sites.filter((s) => !isErrorCode(s.code)).map((s) => `${s.where} '${s.code}'`);
    expect(unknown).toEqual([]);
  });

  it("a literal status at a call site is the row's status", () => {
    const wrong = sites
      .filter((s) => isErrorCode(s.code) && s.status !== undefined && /^\d+$/.test(s.status))
      .filter((s) => Number(s.status) !== ERROR_CODES[s.code as keyof typeof ERROR_CODES].status)
      .map(
        (s) =>
          `${s.where} '${s.code}' ${s.status} (table: ${ERROR_CODES[s.code as keyof typeof ERROR_CODES].status})`,
      );
    expect(wrong).toEqual([]);
  });

  it('every row is used by product code (no dead rows)', () => {
    const text = sources()
      .map((f) => readFileSync(f, 'utf8'))
      .join('\n');
    // The table holds each code as a key, not as a quoted string, so a quoted hit is a real use.
    const unused = Object.keys(ERROR_CODES).filter((c) => !text.includes(`'${c}'`));
    expect(unused).toEqual([]);
  });

  it('every row has an HTTP status and a one-line meaning', () => {
    for (const [code, s] of Object.entries(ERROR_CODES)) {
      expect(code).toMatch(/^[a-z][a-z0-9_]*$/);
      expect(s.status >= 400 && s.status <= 599, code).toBe(true);
      expect(s.meaning.length > 10 && !s.meaning.includes('\n'), code).toBe(true);
    }
  });

  it('docs/errors.md is generated from the table and current', () => {
    const doc = readFileSync(join(ROOT, 'docs/errors.md'), 'utf8');
    expect(doc).toBe(renderErrorsDoc());
    for (const code of Object.keys(ERROR_CODES)) expect(doc).toContain(`| \`${code}\` |`);
  });
});
