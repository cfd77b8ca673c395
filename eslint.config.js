import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['**/dist/**', '**/node_modules/**', '**/*.mjs', '**/*.js', 'benchmarks/results/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: { allowDefaultProject: ['vitest.config.ts'] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
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
    // Pure packages: no I/O, no wall clock, no global randomness (ARCHITECTURE.md dependency rule 2).
    files: ['packages/{protocols,config,core-cost,radix-indexer,topology,aic-model,engine-sim}/src/**/*.ts'],
    ignores: ['**/*.test.ts', '**/testing/**', 'packages/radix-indexer/src/pool/**'],
    rules: {
      'no-restricted-properties': [
        'error',
        { object: 'Date', property: 'now', message: 'pure package: inject the clock' },
        { object: 'Math', property: 'random', message: 'pure package: inject randomness' },
      ],
      'no-restricted-globals': [
        'error',
        { name: 'setTimeout', message: 'pure package: no timers' },
        { name: 'setInterval', message: 'pure package: no timers' },
      ],
      'no-restricted-imports': [
        'error',
        { patterns: ['node:fs*', 'node:net', 'node:http*', 'node:child_process'] },
      ],
    },
  },
);
