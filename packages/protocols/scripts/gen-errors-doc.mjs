// Writes docs/errors.md from the error-code table; `--check` exits 1 when the committed file is stale.
// Run: pnpm --filter @kvrouter/protocols gen:errors [-- --check]
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { renderErrorsDoc } from '../src/error-doc.ts';

const target = fileURLToPath(new URL('../../../docs/errors.md', import.meta.url));
const text = renderErrorsDoc();
if (process.argv.includes('--check')) {
  let current = '';
  try {
    current = readFileSync(target, 'utf8');
  } catch {
    /* missing = stale */
  }
  if (current !== text) {
    console.error(`${target} is stale: run pnpm --filter @kvrouter/protocols gen:errors`);
    process.exit(1);
  }
  console.log(`${target} is current`);
} else {
  writeFileSync(target, text);
  console.log(`wrote ${target}`);
}
