#!/usr/bin/env node
// One entry point for the README commands: installs what is missing (pnpm, dependencies, services),
// then runs the job. Kept dependency-free because it runs before `pnpm install`.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const PNPM_VERSION = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).packageManager.split(
  '@',
)[1];

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { stdio: 'inherit', cwd: root, ...opts });
  if (r.error) throw r.error;
  return r.status ?? 1;
}
function must(cmd, args, opts) {
  const code = run(cmd, args, opts);
  if (code !== 0) {
    console.error(`bootstrap: '${cmd} ${args.join(' ')}' failed with exit code ${code}`);
    process.exit(code);
  }
}
function ensurePnpm() {
  const v = spawnSync('pnpm', ['--version'], { encoding: 'utf8' });
  if (v.status === 0 && v.stdout.trim() === PNPM_VERSION) return;
  console.log(`bootstrap: installing pnpm@${PNPM_VERSION} with npm`);
  must('npm', ['i', '-g', '-E', `pnpm@${PNPM_VERSION}`]);
}
function ensureDeps() {
  const env = { ...process.env, CI: 'true' };
  const hasLock = existsSync(join(root, 'pnpm-lock.yaml'));
  if (hasLock && run('pnpm', ['install', '--reporter=append-only', '--frozen-lockfile'], { env }) === 0)
    return;
  if (hasLock)
    console.warn('bootstrap: pnpm-lock.yaml does not match the package.json files; resolving again');
  must('pnpm', ['install', '--reporter=append-only', '--no-frozen-lockfile'], { env });
}

/**
 * The build and the static checks CI runs before the tests (root package.json scripts). Each one's output is
 * shown when it fails; a passing check prints one line with its duration.
 */
const CHECKS = [
  ['build: tsc -b (project references, tests included)', 'build'],
  ['lint: ESLint (typed rules, import boundaries per package kind, no console in packages)', 'lint:eslint'],
  ['lint: import cycles (dependency-cruiser)', 'lint:cycles'],
  ['format: prettier --check', 'format:check'],
  ['unused code: knip', 'knip'],
];
function runChecks() {
  let passed = 0;
  const failedNames = [];
  for (const [name, script] of CHECKS) {
    const t0 = process.hrtime.bigint();
    const r = spawnSync('pnpm', ['run', '--silent', script], {
      cwd: root,
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
      env: { ...process.env, FORCE_COLOR: '0' },
    });
    const secs = (Number(process.hrtime.bigint() - t0) / 1e9).toFixed(1);
    if (r.status === 0) {
      passed++;
      console.log(`check passed: ${name} (${secs} s)`);
    } else {
      failedNames.push(script);
      const out = `${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? String(r.error) : ''}`.trimEnd();
      console.log(`check FAILED: ${name} (${secs} s, \`pnpm ${script}\`)\n${out}\n`);
    }
  }
  return { passed, failed: failedNames.length, failedNames };
}

const job = process.argv[2] ?? 'test';
const rest = process.argv.slice(3);
ensurePnpm();
ensureDeps();

if (job === 'start') {
  // Runs from TypeScript sources (tsx + the `source` export condition): no build step needed.
  process.exit(run('pnpm', ['demo', ...rest]));
} else if (job === 'bench') {
  must('pnpm', ['build']);
  process.exit(run('pnpm', ['--filter', '@kvrouter/benchmarks', 'bench', ...rest]));
} else if (job === 'check') {
  const r = runChecks();
  console.log(`${r.passed} passed, ${r.failed} failed`);
  process.exit(r.failed > 0 ? 1 : 0);
} else if (job === 'test') {
  must('node', ['tools/services.mjs', 'install']);
  // The build is a check like the others: vitest runs from sources, so a type error does not hide test results.
  const checks = runChecks();
  const out = join(root, '.test-results');
  mkdirSync(out, { recursive: true });
  const jsonFile = join(out, 'vitest.json');
  const code = run('pnpm', [
    'exec',
    'vitest',
    'run',
    '--reporter=default',
    '--reporter=json',
    `--outputFile.json=${jsonFile}`,
    ...rest,
  ]);
  let passed = 0;
  let failed = 0;
  let skipped = 0;
  try {
    const r = JSON.parse(readFileSync(jsonFile, 'utf8'));
    passed = r.numPassedTests ?? 0;
    // Failed tests, plus every test file that failed without a failing test (an import or collection
    // error, a hook). numFailedTestSuites would also count each describe block around a failing test.
    const brokenFiles = (r.testResults ?? []).filter(
      (f) => f.status === 'failed' && !(f.assertionResults ?? []).some((a) => a.status === 'failed'),
    ).length;
    failed = (r.numFailedTests ?? 0) + brokenFiles;
    skipped = (r.numPendingTests ?? 0) + (r.numTodoTests ?? 0);
  } catch (e) {
    console.error(`bootstrap: could not read the vitest JSON report (${e.message})`);
    failed = Math.max(failed, 1);
  }
  if (code !== 0 && failed === 0) failed = 1;
  // Each static check counts as one entry of the summary.
  passed += checks.passed;
  failed += checks.failed;
  if (checks.failed > 0) console.log(`bootstrap: failed checks: ${checks.failedNames.join(', ')}`);
  console.log(`${passed} passed, ${failed} failed` + (skipped ? `, ${skipped} skipped` : ''));
  process.exit(failed > 0 || code !== 0 ? 1 : 0);
} else {
  console.error(`bootstrap: unknown job '${job}' (use start, test, check or bench)`);
  process.exit(2);
}
