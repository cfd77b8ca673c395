// Import cycles (`pnpm lint:cycles`): module-level cycles inside a package and package-level cycles across
// packages, type-only imports included (a type cycle is a misplaced type). Workspace packages resolve to
// their TypeScript sources through the `source` export condition, as in vitest.
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'import cycle: move the shared piece down (types into the lower module or package)',
      from: {},
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)(dist|node_modules|results)/|\\.d\\.ts$' },
    tsPreCompilationDeps: true,
    enhancedResolveOptions: {
      conditionNames: ['source', 'import', 'node', 'default'],
      exportsFields: ['exports'],
      extensions: ['.ts', '.js', '.json'],
      mainFields: ['main', 'types'],
    },
    skipAnalysisNotInRules: true,
  },
};
