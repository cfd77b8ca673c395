import js from '@eslint/js';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import tseslint from 'typescript-eslint';

const ROOT = import.meta.dirname;

/**
 * THE table of package kinds (docs/CONVENTIONS.md "Package kinds"): one entry per workspace directory.
 * A kind is a string, or `{ kind, parts }` where each part is a subpath export with its own kind and its
 * source directory (radix-indexer's `./pool` is io inside a pure package). A workspace directory
 * missing here fails lint on each of its files.
 *
 *   pure  — no I/O, no wall clock, no global randomness; imports pure packages only
 *   core  — composition without I/O (clock, timers, randomness, transports injected); imports pure and core
 *   io    — talks to the outside world; imports pure, core and io
 *   test  — @kvrouter/testkit: imported by tests (and benchmarks) only
 *   app   — a process (apps/*, tools/*): imports packages, never another app
 *   bench — benchmarks: imports packages and testkit, never an app
 */
export const KINDS = {
  'packages/protocols': 'pure',
  'packages/config': 'pure',
  'packages/core-cost': 'pure',
  'packages/radix-indexer': {
    kind: 'pure',
    parts: { './pool': { kind: 'io', dir: 'src/pool' }, './testing': { kind: 'test', dir: 'src/testing' } },
  },
  'packages/topology': 'pure',
  'packages/aic-model': 'pure',
  'packages/engine-sim': 'pure',
  'packages/tokenizer': { kind: 'pure', parts: { './testing': { kind: 'test', dir: 'src/testing' } } },
  'packages/router': 'core',
  'packages/sim': 'core',
  'packages/runtime': 'io',
  'packages/kv-events': 'io',
  'packages/metrics': 'io',
  'packages/sim-worker': 'io',
  'packages/dashboard': 'io',
  // ./assembly composes a router without I/O (the simulator imports it): core.
  'packages/router-host': { kind: 'io', parts: { './assembly': { kind: 'core', dir: 'src/assembly' } } },
  'packages/worker-host': 'io',
  'packages/testkit': 'test',
  'apps/frontend': 'app',
  'apps/mocker': 'app',
  'apps/standalone-router': 'app',
  'apps/worker': 'app',
  'tools/replay': 'app',
  'tools/demo': 'app',
  benchmarks: 'bench',
};

/** What each kind may import (test files and `test` parts may also import `test`). */
const MAY_IMPORT = {
  pure: ['pure'],
  core: ['pure', 'core'],
  io: ['pure', 'core', 'io'],
  test: ['pure', 'core', 'io', 'test'],
  app: ['pure', 'core', 'io'],
  bench: ['pure', 'core', 'io', 'test'],
};

/** Kinds without I/O, wall clock, global randomness or timers (pure, and core, whose clock is injected). */
const NO_IO = new Set(['pure', 'core']);
const kindOf = (k) => (typeof k === 'string' ? k : k.kind);
const NO_IO_DIRS = Object.entries(KINDS)
  .filter(([, k]) => NO_IO.has(kindOf(k)))
  .map(([d]) => `${d}/src/**/*.ts`);
const partDirs = (keep) =>
  Object.entries(KINDS).flatMap(([d, k]) =>
    typeof k === 'string'
      ? []
      : Object.values(k.parts)
          .filter((p) => keep(NO_IO.has(p.kind)))
          .map((p) => `${d}/${p.dir}/**`),
  );
const NO_IO_PARTS = partDirs((noIo) => noIo).map((g) => `${g}/*.ts`);
const IO_PARTS = partDirs((noIo) => !noIo);

/**
 * One owner per external system (docs/CONVENTIONS.md): outside tests, these modules are imported only under the
 * listed directories. A key ending in `/` matches a scope.
 */
const OWNERS = {
  'prom-client': ['packages/metrics/'],
  etcd3: ['packages/runtime/'],
  piscina: ['packages/radix-indexer/src/pool/'],
  zeromq: ['packages/kv-events/'],
  '@nats-io/': ['packages/runtime/', 'packages/kv-events/'],
  express: ['apps/'],
  commander: ['apps/', 'tools/', 'packages/config/'],
};

/** Workspace directories (pnpm-workspace.yaml: packages/*, apps/*, tools/*, benchmarks) and their names. */
function workspace() {
  const dirs = ['benchmarks'];
  for (const parent of ['packages', 'apps', 'tools'])
    for (const d of readdirSync(join(ROOT, parent), { withFileTypes: true }))
      if (d.isDirectory()) dirs.push(`${parent}/${d.name}`);
  const byName = new Map();
  const byDir = new Map();
  for (const dir of dirs) {
    const pj = join(ROOT, dir, 'package.json');
    if (!existsSync(pj)) continue;
    const name = JSON.parse(readFileSync(pj, 'utf8')).name;
    byName.set(name, dir);
    byDir.set(dir, name);
  }
  return { byName, byDir };
}
const WS = workspace();

const posix = (p) => p.split(sep).join('/');
function ownerOf(relFile) {
  for (const dir of WS.byDir.keys()) if (relFile.startsWith(`${dir}/`)) return dir;
  return undefined;
}
function partOf(dir, relFile) {
  const k = KINDS[dir];
  if (k === undefined) return undefined;
  if (typeof k === 'string') return { kind: k, part: '.' };
  for (const [sub, p] of Object.entries(k.parts))
    if (relFile.startsWith(`${dir}/${p.dir}/`)) return { kind: p.kind, part: sub };
  return { kind: k.kind, part: '.' };
}
function kindOfExport(dir, subpath) {
  const k = KINDS[dir];
  if (k === undefined) return undefined;
  if (typeof k === 'string') return k;
  return k.parts[subpath]?.kind ?? k.kind;
}
/** Tests and test support: `*.test.ts`, anything under `test/`, `test-*.ts` fixtures. */
const isTestFile = (rel) => /\.test\.ts$|\/test\/|\/test-[\w-]+\.ts$/.test(rel);
/** An app's benchmark processes (`apps/<app>/src/bench/`, run by benchmarks/): they may use testkit's workloads. */
const isBenchFile = (rel) => /^apps\/[^/]+\/src\/bench\//.test(rel);

/** Import boundaries per package kind, package names only across packages, testkit only from tests. */
const boundaries = {
  meta: { type: 'problem', schema: [] },
  create(context) {
    const relFile = posix(relative(ROOT, context.filename));
    const dir = ownerOf(relFile);
    if (!dir) return {};
    const self = partOf(dir, relFile);
    const name = WS.byDir.get(dir);
    const test = isTestFile(relFile) || isBenchFile(relFile);
    function check(node, spec) {
      if (typeof spec !== 'string') return;
      if (!self) {
        context.report({ node, message: `${dir} has no kind: add it to KINDS in eslint.config.js` });
        return;
      }
      const allowed = new Set(MAY_IMPORT[self.kind]);
      if (test || self.kind === 'test') allowed.add('test');
      let target;
      let targetDir;
      if (spec.startsWith('.')) {
        const abs = posix(relative(ROOT, resolve(dirname(context.filename), spec)));
        if (!abs.startsWith(`${dir}/`)) {
          context.report({
            node,
            message: `'${spec}' leaves ${dir}: import other packages by name (@kvrouter/...)`,
          });
          return;
        }
        const t = partOf(dir, abs);
        if (t.part === self.part) return;
        target = { kind: t.kind, label: `${name}${t.part === '.' ? '' : t.part.slice(1)}` };
        targetDir = dir;
      } else if (spec.startsWith('@kvrouter/')) {
        const [, pkg, ...rest] = spec.split('/');
        const pkgName = `@kvrouter/${pkg}`;
        targetDir = WS.byName.get(pkgName);
        if (rest.includes('src') || rest.includes('dist')) {
          context.report({ node, message: `'${spec}' reaches into a package's files: use its exports` });
          return;
        }
        if (!targetDir) {
          context.report({ node, message: `'${pkgName}' is not a workspace package` });
          return;
        }
        if (targetDir === dir && rest.length === 0) return;
        const kind = kindOfExport(targetDir, rest.length ? `./${rest.join('/')}` : '.');
        if (!kind) {
          context.report({ node, message: `${targetDir} has no kind: add it to KINDS in eslint.config.js` });
          return;
        }
        target = { kind, label: spec };
      } else {
        const owner = Object.keys(OWNERS).find((m) => (m.endsWith('/') ? spec.startsWith(m) : spec === m));
        if (owner && !test && !OWNERS[owner].some((d) => relFile.startsWith(d)))
          context.report({
            node,
            message: `'${spec}' is used only by ${OWNERS[owner].join(', ')} (one owner per external system)`,
          });
        return;
      }
      if (target.kind === 'app' && targetDir !== dir) {
        context.report({
          node,
          message: `${name} imports the app ${target.label}: ${self.kind === 'app' ? 'apps never import each other' : 'packages never import apps'}`,
        });
      } else if (!allowed.has(target.kind)) {
        const why =
          target.kind === 'test'
            ? 'testkit and test helpers are for tests (*.test.ts, test/) and benchmarks only'
            : `a ${self.kind} module may import ${MAY_IMPORT[self.kind].join(', ')} only`;
        context.report({ node, message: `${target.label} is ${target.kind}: ${why}` });
      }
    }
    return {
      ImportDeclaration: (n) => check(n.source, n.source.value),
      ExportNamedDeclaration: (n) => n.source && check(n.source, n.source.value),
      ExportAllDeclaration: (n) => check(n.source, n.source.value),
      ImportExpression: (n) => n.source.type === 'Literal' && check(n.source, n.source.value),
      TSImportType: (n) => {
        const lit = n.argument?.literal ?? n.argument;
        if (lit?.type === 'Literal') check(lit, lit.value);
      },
    };
  },
};

/** The local plugin (`tools/lint.test.ts` exercises its rule). */
export const kvrouterPlugin = { rules: { boundaries } };

/** No I/O, no wall clock, no global randomness, no timers: pure and core code. */
const pureRules = {
  'no-restricted-properties': [
    'error',
    { object: 'Date', property: 'now', message: 'pure/core code: inject the clock' },
    { object: 'Math', property: 'random', message: 'pure/core code: inject randomness' },
  ],
  'no-restricted-globals': [
    'error',
    { name: 'setTimeout', message: 'pure/core code: no timers (use the injected clock)' },
    { name: 'setInterval', message: 'pure/core code: no timers (use the injected clock)' },
    { name: 'setImmediate', message: 'pure/core code: no timers (use the injected clock)' },
  ],
  'no-restricted-imports': [
    'error',
    {
      patterns: [
        {
          group: [
            'node:fs*',
            'node:net',
            'node:http*',
            'node:child_process',
            'node:worker_threads',
            'node:dgram',
          ],
          message: 'pure/core code: no I/O (pass the data or an injected reader in)',
        },
      ],
    },
  ],
};

export default tseslint.config(
  {
    ignores: [
      '**/dist/**',
      '**/node_modules/**',
      '**/*.mjs',
      '**/*.js',
      '**/*.cjs',
      'benchmarks/results/**',
      '.test-results/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: { allowDefaultProject: ['vitest.config.ts'] },
        tsconfigRootDir: ROOT,
      },
    },
    plugins: { kvrouter: kvrouterPlugin },
    rules: {
      'kvrouter/boundaries': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-non-null-assertion': 'off',
      // `x[i]!` documents "in bounds" on typed-array hot paths even without noUncheckedIndexedAccess.
      '@typescript-eslint/no-unnecessary-type-assertion': 'off',
      // Interface methods are async for implementations that need it; others resolve at once.
      '@typescript-eslint/require-await': 'off',
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true }],
    },
  },
  {
    // Packages log through an injected Logger; apps, tools and benchmarks are CLIs and may print.
    files: ['packages/*/src/**/*.ts'],
    ignores: ['**/*.test.ts', '**/test/**'],
    rules: { 'no-console': 'error' },
  },
  {
    // Pure and core code (docs/CONVENTIONS.md, "Pure and core code"; core gets clock, timers and randomness injected as well).
    files: [...NO_IO_DIRS, ...NO_IO_PARTS],
    ignores: ['**/*.test.ts', '**/test/**', '**/test-*.ts', ...IO_PARTS],
    rules: pureRules,
  },
);
