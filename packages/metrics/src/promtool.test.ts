/**
 * The exposition of a fully populated registry passes `promtool check metrics` (Debian's
 * `prometheus` package; `pnpm services` / tools/services.mjs installs it). promtool parses the text
 * format and then lints names; the lint findings it may report are exactly the ones §16's fixed
 * names cause, listed below with the reason each name cannot change.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { populated } from './test-helpers.js';

function promtool(): string {
  for (const p of ['/usr/bin/promtool', '/usr/local/bin/promtool']) if (existsSync(p)) return p;
  const r = spawnSync('sh', ['-c', 'command -v promtool']);
  const found = r.stdout?.toString().trim();
  if (r.status === 0 && found) return found;
  throw new Error(
    "promtool not found: run 'pnpm services' (tools/services.mjs installs Debian's prometheus package)",
  );
}

function check(text: string): { status: number | null; out: string } {
  const r = spawnSync(promtool(), ['check', 'metrics'], { input: text, timeout: 30_000 });
  return { status: r.status, out: `${r.stdout?.toString() ?? ''}${r.stderr?.toString() ?? ''}` };
}

const NO_TOTAL = 'counter metrics should have "_total" suffix';
const ABBREV = 'metric names should not contain abbreviated units';

/** Lint findings caused by names fixed by §16 (Dynamo compatibility), and only those. */
const ALLOWED = new Set([
  // §16 names the index counter without `_total`.
  `dynamo_component_kv_cache_events_applied ${NO_TOTAL}`,
  // §16 names it `disconnected_clients`; upstream made it a gauge, kvrouter a counter (§16 `*`).
  `dynamo_frontend_disconnected_clients ${NO_TOTAL}`,
  // §16 fixes milliseconds in these names.
  `dynamo_frontend_tokenizer_latency_ms ${ABBREV}`,
  `dynamo_router_overhead_block_hashing_ms ${ABBREV}`,
  `dynamo_router_overhead_seq_hashing_ms ${ABBREV}`,
  `dynamo_router_overhead_indexer_find_matches_ms ${ABBREV}`,
  `dynamo_router_overhead_scheduling_ms ${ABBREV}`,
  `dynamo_router_overhead_total_ms ${ABBREV}`,
]);

describe('promtool check metrics', () => {
  it('accepts the exposition of every family; lint findings are only the §16-mandated names', async () => {
    const text = await populated().registry.metrics();
    const { status, out } = check(text);
    const findings = out
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '');
    // 0 = clean, 3 = lint findings only; anything else is a parse error.
    expect([0, 3], out).toContain(status);
    expect(new Set(findings)).toEqual(ALLOWED);
  });

  it('rejects a malformed exposition (the check can fail)', () => {
    const { status, out } = check('# TYPE x_total counter\nx_total{a="1" 1\n');
    expect(status, out).not.toBe(0);
    expect(status, out).not.toBe(3);
    expect(out).toMatch(/pars/i);
  });

  it('reports a lint finding outside the allowed list', () => {
    const { status, out } = check(
      '# HELP foo_seconds_total x\n# TYPE foo_seconds_total gauge\nfoo_seconds_total 1\n',
    );
    expect(status).toBe(3);
    expect(out).toContain('non-counter metrics should not have "_total" suffix');
  });
});
