import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ESLint } from 'eslint';
import tseslint from 'typescript-eslint';
import { describe, expect, it } from 'vitest';
// @ts-expect-error -- eslint.config.js is plain JavaScript without type declarations.
import { KINDS, kvrouterPlugin } from '../eslint.config.js';

const ROOT = join(import.meta.dirname, '..');

/** Lints `code` as if it were the file `path` (repository-relative) with only the boundaries rule. */
async function boundaryErrors(path: string, code: string): Promise<string[]> {
  const eslint = new ESLint({
    cwd: ROOT,
    overrideConfigFile: true,
    overrideConfig: [
      {
        files: ['**/*.ts'],
        languageOptions: { parser: tseslint.parser },
        plugins: { kvrouter: kvrouterPlugin as never },
        rules: { 'kvrouter/boundaries': 'error' },
      },
    ],
  });
  const [result] = await eslint.lintText(code, { filePath: join(ROOT, path) });
  return result.messages.map((m) => m.message);
}

describe('kvrouter/boundaries (eslint.config.js)', () => {
  it('lets each kind import what the kinds table allows', async () => {
    const ok = [
      ['packages/config/src/x.ts', "import { KvrError } from '@kvrouter/protocols';"],
      ['packages/router/src/x.ts', "import { pickWorker } from '@kvrouter/core-cost';"],
      ['packages/kv-events/src/x.ts', "import { KvRouter } from '@kvrouter/router';"],
      ['apps/frontend/src/x.ts', "import { createDiscovery } from '@kvrouter/runtime';"],
      ['packages/radix-indexer/src/pool/x.ts', "import { RadixIndexer } from '../indexer.js';"],
      ['packages/core-cost/src/x.test.ts', "import { seededRng } from '@kvrouter/testkit';"],
      ['benchmarks/src/suites/x.ts', "import { seededRng } from '@kvrouter/testkit';"],
      ['packages/router/src/test-fixtures.ts', "import { seededRng } from '@kvrouter/testkit';"],
    ];
    for (const [path, code] of ok) expect(await boundaryErrors(path, code), path).toEqual([]);
  });

  it('refuses imports against the kinds, across package files, of apps and of testkit outside tests', async () => {
    const cases: [string, string, string][] = [
      [
        'packages/protocols/src/x.ts',
        "import { createDiscovery } from '@kvrouter/runtime';",
        '@kvrouter/runtime is io: a pure module may import pure only',
      ],
      [
        'packages/router/src/x.ts',
        "export * from '@kvrouter/kv-events';",
        '@kvrouter/kv-events is io: a core module may import pure, core only',
      ],
      [
        'packages/radix-indexer/src/x.ts',
        "import { IndexerPool } from './pool/index.js';",
        '@kvrouter/radix-indexer/pool is io: a pure module may import pure only',
      ],
      [
        'packages/runtime/src/x.ts',
        "const m = await import('@kvrouter/mocker');",
        '@kvrouter/runtime imports the app @kvrouter/mocker: packages never import apps',
      ],
      [
        'apps/mocker/src/x.ts',
        "import type { X } from '@kvrouter/frontend';",
        '@kvrouter/mocker imports the app @kvrouter/frontend: apps never import each other',
      ],
      [
        'packages/metrics/src/x.ts',
        "import { seededRng } from '@kvrouter/testkit';",
        '@kvrouter/testkit is test: testkit and test helpers are for tests (*.test.ts, test/) and benchmarks only',
      ],
      [
        'packages/config/src/x.ts',
        "import { KvrError } from '../../protocols/src/errors.js';",
        "'../../protocols/src/errors.js' leaves packages/config: import other packages by name (@kvrouter/...)",
      ],
      [
        'apps/worker/src/x.ts',
        "import { RadixIndexer } from '@kvrouter/radix-indexer/src/indexer.js';",
        "'@kvrouter/radix-indexer/src/indexer.js' reaches into a package's files: use its exports",
      ],
      [
        'packages/router/src/x.ts',
        "import { Registry } from 'prom-client';",
        "'prom-client' is used only by packages/metrics/ (one owner per external system)",
      ],
    ];
    for (const [path, code, message] of cases)
      expect(await boundaryErrors(path, code), path).toEqual([message]);
  });
});

describe('the kinds table', () => {
  it('classifies every workspace directory the way the README package table does', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const rows = [...readme.matchAll(/^\| `((?:packages|apps|tools)\/[a-z-]+|benchmarks)` \| ([a-z]+) \|/gm)];
    expect(rows.length).toBeGreaterThan(20);
    const kinds = KINDS as Record<string, string | { kind: string }>;
    const mismatches = rows
      .map(([, dir, kind]) => [dir, kind, kinds[dir]] as const)
      .filter(([, kind, k]) => (typeof k === 'string' ? k : k?.kind) !== kind)
      .map(([dir, kind, k]) => `${dir}: README ${kind}, KINDS ${JSON.stringify(k)}`);
    expect(mismatches).toEqual([]);
  });
});
