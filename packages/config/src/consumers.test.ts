/**
 * Every accepted flag does something, or is refused (issue 15): each row of the config table must
 * be read by product code outside this package — apps/** and packages/** source, tests and test
 * support excluded. A startup refusal that reads the value (`if (config.x) throw …`) counts as a read.
 *
 * A read is `.key` (member access on a resolved config), `['key']` / `"key"` (indexed access or a
 * `Pick<…>` of it), or `key` in a destructuring of a config object. Keys are matched as whole
 * words, so a generic key (`port`, `threads`) is satisfied by any member access of that name: the
 * check finds rows nobody wired, it does not prove the wiring right (the per-flag tests do that).
 *
 * Two documented kinds of consumer are not plain reads outside this package:
 * - `IN_RESOLVER`: rows the resolver itself consumes (presets and legacy mappings rewrite other
 *   rows, a refusal stops resolution, the CLI writes the dump); each must be read in this package's
 *   non-table source.
 * - `INDIRECT`: rows read through a computed name (`bucketOverridesFromConfig` builds
 *   `metrics{Histogram}{Min,Max,Count}`); the named file must declare the key and the stem.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { FLAGS, type FlagSpec } from './table.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const SKIP_DIRS = new Set(['node_modules', 'dist', 'test', 'fixtures', '.git', 'results']);

function sources(dir: string, out: string[] = []): string[] {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    if (e.isDirectory()) {
      if (!SKIP_DIRS.has(e.name)) sources(path.join(dir, e.name), out);
    } else if (
      /\.(ts|mts|cts|mjs|js)$/.test(e.name) &&
      !/\.d\.ts$/.test(e.name) &&
      !/\.(test|fuzz\.test)\.ts$/.test(e.name) &&
      !/^test-/.test(e.name)
    )
      out.push(path.join(dir, e.name));
  }
  return out;
}

/** Product source of apps/* and packages/* except packages/config (where every key is defined). */
function productSources(): Map<string, string> {
  const files = new Map<string, string>();
  for (const top of ['apps', 'packages'])
    for (const pkg of fs.readdirSync(path.join(REPO, top))) {
      if (top === 'packages' && pkg === 'config') continue;
      const src = path.join(REPO, top, pkg, 'src');
      if (fs.existsSync(src))
        for (const f of sources(src)) files.set(path.relative(REPO, f), fs.readFileSync(f, 'utf8'));
    }
  return files;
}

/** Rows consumed by the resolver in this package (not by the apps), with why. */
const IN_RESOLVER: Readonly<Record<string, string>> = {
  loadAware: 'preset: rewrites the routing rows (resolve.ts applyLoadAware)',
  ttftAware: 'preset: --router-mode kv --router-policy ttft (presets.ts)',
  agentic: "preset: Dynamo's agentic routing knobs (presets.ts)",
  routerKvOverlapScoreWeight:
    'legacy weight mapped onto prefill load scale and credit (resolve.ts applyLegacyWeight)',
  sharedCacheType: 'hicache refused at resolution (resolve.ts); none, the only other value, needs nothing',
  dumpConfigTo: 'parseAppConfig writes the dump (cli.ts)',
};

const HISTOGRAM_ROW = /^metrics(RequestDuration|InputSequence|OutputSequence|Ttft|Itl)(Min|Max|Count)$/;
/** Rows read through a computed key, and the file that reads them. */
const INDIRECT: ReadonlyArray<{ test: RegExp; file: string; stem: (key: string) => string }> = [
  {
    test: HISTOGRAM_ROW,
    file: 'packages/metrics/src/overrides.ts',
    stem: (k) => `'${HISTOGRAM_ROW.exec(k)![1]}'`,
  },
];

/** Where each app's own source lives. */
const APP_DIRS: Readonly<Record<string, string>> = {
  frontend: 'apps/frontend',
  router: 'apps/standalone-router',
  indexer: 'apps/standalone-router',
  mocker: 'apps/mocker',
  worker: 'apps/worker',
};

/**
 * (row, app) pairs an app accepts and nothing of it reads, with why; none today (the standalone
 * router's ignored --router-min-initial-workers / --enforce-disagg / --decode-fallback and the
 * mocker's ignored output parsers were found this way and fixed). Add a pair only with its reason.
 */
const KNOWN_APP_GAPS: readonly string[] = [];

/** This package's source except the table, tests and test support. */
function resolverSources(): string[] {
  const dir = path.join(REPO, 'packages', 'config', 'src');
  return sources(dir)
    .filter((f) => path.basename(f) !== 'table.ts')
    .map((f) => fs.readFileSync(f, 'utf8'));
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

function reads(key: string): RegExp {
  const k = escape(key);
  return new RegExp(
    [
      `\\.${k}\\b`, // config.key, c?.key
      `\\[\\s*['"\`]${k}['"\`]\\s*\\]`, // config['key']
      `['"\`]${k}['"\`]\\s*[|>,\\]]`, // Pick<Config, 'key' | ...>, ['key', ...] lists
      `\\{[^{}]*\\b${k}\\b[^{}]*\\}\\s*=\\s*[\\w.]*[cC]onfig`, // const { key } = config
    ].join('|'),
  );
}

describe('config table: every row has a consumer', () => {
  const files = productSources();
  const keys = [...new Set((FLAGS as readonly FlagSpec[]).map((f) => f.key))];
  const resolver = resolverSources();
  const how = new Map<string, string>();
  const unread = keys.filter((k) => {
    const re = reads(k);
    for (const [f, text] of files) if (re.test(text)) return (how.set(k, f), false);
    if (k in IN_RESOLVER && resolver.some((t) => re.test(t))) return (how.set(k, 'packages/config'), false);
    const ind = INDIRECT.find((i) => i.test.test(k));
    if (ind) {
      const text = files.get(ind.file) ?? '';
      if (new RegExp(`\\b${escape(k)}\\?:`).test(text) && text.includes(ind.stem(k)))
        return (how.set(k, ind.file), false);
    }
    return true;
  });

  it(`reads all ${FLAGS.length} rows (${keys.length} distinct keys) somewhere outside packages/config`, () => {
    // The figures of the issue's must-show: rows, distinct keys, keys without a consumer.
    console.log(
      `config table: ${FLAGS.length} rows, ${keys.length} distinct keys, ${unread.length} without a consumer${unread.length ? `: ${unread.join(', ')}` : ''}`,
    );
    expect(files.size).toBeGreaterThan(100);
    expect(unread).toEqual([]);
  });

  it('every app that accepts a row reads it (its own source or a package), or the row is a known gap', () => {
    const gaps: string[] = [];
    for (const spec of FLAGS as readonly FlagSpec[]) {
      if (spec.key in IN_RESOLVER || INDIRECT.some((i) => i.test.test(spec.key))) continue;
      const re = reads(spec.key);
      // An environment-only value the runtime reads from the environment itself counts for every app.
      const env = (spec.env ?? []).map(
        (e) =>
          new RegExp(`\\benv\\.${escape(e)}\\b|\\benv\\[['"]${escape(e)}['"]\\]|['"]${escape(e)}['"]\\s*\\)`),
      );
      for (const app of spec.apps) {
        const dir = `${APP_DIRS[app]}/`;
        let found = false;
        for (const [f, text] of files) {
          if (!f.startsWith('packages/') && !f.startsWith(dir)) continue;
          if (re.test(text) || (f.startsWith('packages/') && env.some((e) => e.test(text)))) {
            found = true;
            break;
          }
        }
        if (!found) gaps.push(`${spec.key}@${app}`);
      }
    }
    console.log(
      `config table: ${gaps.length} (row, app) pairs read by no code of that app: ${gaps.join(', ') || 'none'}`,
    );
    expect(gaps.sort()).toEqual([...KNOWN_APP_GAPS].sort());
  });

  it('lists only rows that need it as resolver-consumed', () => {
    // A row listed as consumed by the resolver that the apps read too does not belong in the list.
    for (const k of Object.keys(IN_RESOLVER)) {
      expect(keys, k).toContain(k);
      expect(how.get(k), k).toBe('packages/config');
    }
  });

  it('the read pattern tells a read from a mere mention', () => {
    const re = reads('dynDebugPerf');
    expect(re.test('if (config.dynDebugPerf) log()')).toBe(true);
    expect(re.test("type F = Pick<C, 'dynDebugPerf' | 'x'>")).toBe(true);
    expect(re.test('const { dynDebugPerf } = config;')).toBe(true);
    expect(re.test('// dynDebugPerf is not wired')).toBe(false);
    expect(re.test('const dynDebugPerfX = 1; o.dynDebugPerfX')).toBe(false);
  });
});
