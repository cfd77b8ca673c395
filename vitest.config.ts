import { defineConfig } from 'vitest/config';

// Packages are resolved to their TypeScript sources through the `source` export condition,
// so tests never need a build of their dependencies.
const conditions = ['source', 'import', 'module', 'node', 'default'];

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions, externalConditions: ['source'] } },
  test: {
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    projects: [
      {
        extends: true,
        test: { name: 'packages', include: ['packages/*/src/**/*.test.ts', 'packages/*/test/**/*.test.ts'] },
      },
      {
        extends: true,
        test: { name: 'apps', include: ['apps/*/src/**/*.test.ts', 'apps/*/test/**/*.test.ts'] },
      },
      {
        extends: true,
        test: {
          name: 'tools',
          include: ['tools/*.test.ts', 'tools/*/src/**/*.test.ts', 'benchmarks/src/**/*.test.ts'],
        },
      },
    ],
  },
});
