/**
 * `pnpm bench [suite-name ...] [--quick]`: runs every suite in ./suites (or the named ones),
 * prints a table per suite and writes benchmarks/results/<suite>.json.
 */
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { fmt, machineInfo, type Row, type Suite } from './harness.js';

const here = dirname(fileURLToPath(import.meta.url));
// `pnpm bench` builds first; measure the index writer threads as production runs them (compiled).
process.env.KVR_POOL_WORKER ??= 'dist';
const resultsDir = join(here, '..', 'results');
const args = process.argv.slice(2);
const quick = args.includes('--quick');
const wanted = args.filter((a) => !a.startsWith('--'));

const files = readdirSync(join(here, 'suites'))
  .filter((f) => /\.(ts|js)$/.test(f) && !f.endsWith('.d.ts') && !f.includes('.test.'))
  .sort();
const suites: Suite[] = [];
for (const f of files) {
  const mod = (await import(pathToFileURL(join(here, 'suites', f)).href)) as { suite?: Suite };
  if (mod.suite && (wanted.length === 0 || wanted.includes(mod.suite.name))) suites.push(mod.suite);
}
if (suites.length === 0) {
  console.error(`bench: no suite matches ${wanted.join(', ')}; known: ${files.join(', ')}`);
  process.exit(2);
}

mkdirSync(resultsDir, { recursive: true });
const machine = machineInfo();
console.log(
  `kvrouter benchmarks on ${machine.cpu} x${machine.cores}, node ${machine.node}${quick ? ' (quick)' : ''}`,
);
const t0 = performance.now();
let lastProgress = 0;
for (const [i, suite] of suites.entries()) {
  console.log(`\n[${i + 1}/${suites.length}] ${suite.name}: ${suite.description}`);
  const started = performance.now();
  const rows: Row[] = await suite.run({
    quick,
    progress(label, done, total) {
      const now = performance.now();
      if (done < total && now - lastProgress < 250) return;
      lastProgress = now;
      const width = 24;
      const filled = total > 0 ? Math.round((done / total) * width) : width;
      process.stdout.write(
        `  [${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${label} ${done}/${total}\n`,
      );
    },
  });
  const seconds = (performance.now() - started) / 1000;
  printTable(rows);
  writeFileSync(
    join(resultsDir, `${suite.name}.json`),
    JSON.stringify({ suite: suite.name, description: suite.description, machine, seconds, rows }, null, 2) +
      '\n',
  );
  console.log(`  (${seconds.toFixed(1)} s; results/${suite.name}.json)`);
}
console.log(`\nall suites done in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

function printTable(rows: Row[]): void {
  const extraKeys = [...new Set(rows.flatMap((r) => Object.keys(r.extra ?? {})))];
  const header = ['measure', 'value', 'unit', ...extraKeys];
  const body = rows.map((r) => [
    r.name,
    fmt(r.value),
    r.unit,
    ...extraKeys.map((k) => {
      const v = r.extra?.[k];
      return v === undefined ? '' : typeof v === 'number' ? fmt(v) : v;
    }),
  ]);
  const widths = header.map((h, c) => Math.max(h.length, ...body.map((b) => b[c].length)));
  const line = (cells: string[]) =>
    '  ' + cells.map((s, c) => (c === 0 ? s.padEnd(widths[c]) : s.padStart(widths[c]))).join('  ');
  console.log(line(header));
  console.log('  ' + widths.map((w) => '-'.repeat(w)).join('  '));
  for (const b of body) console.log(line(b));
}
