import { readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { GENERATED_MARKER, renderConfigurationDoc } from './docs.js';

/** The repository's docs/ directory (tests read only files inside the repository). */
const DOCS = new URL('../../../docs/', import.meta.url);
const doc = (name: string) => readFileSync(new URL(name, DOCS), 'utf8');

describe('docs/configuration.md', () => {
  it('holds the reference generated from the current table (`pnpm docs:gen` regenerates it)', () => {
    const current = doc('configuration.md');
    const want = renderConfigurationDoc(current);
    // `pnpm docs:gen` runs this test with KVR_WRITE_DOCS=1: rewrite instead of failing.
    if (process.env.KVR_WRITE_DOCS === '1' && want !== current)
      writeFileSync(new URL('configuration.md', DOCS), want);
    else expect(current, 'docs/configuration.md is stale: run `pnpm docs:gen`').toBe(want);
  });

  it('keeps the hand-written part above the marker and one table per group below it', () => {
    const current = doc('configuration.md');
    const [head, tail] = current.split(GENERATED_MARKER);
    expect(head).toContain('## Validation');
    expect(tail).toContain('\n## Routing\n');
    expect(tail).toContain(
      '| `--router-temperature` | `DYN_ROUTER_TEMPERATURE` | `0.0` | float ≥ 0.0 | frontend, router | ',
    );
  });
});
