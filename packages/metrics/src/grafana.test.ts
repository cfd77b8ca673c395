/**
 * deploy/grafana/kvrouter.json names only metrics kvrouter exports: every PromQL expression of
 * every panel and template variable is read, each `dynamo_*` name in it is checked against the
 * families the apps register (the frontend's set in kv mode with the topology counters, the
 * standalone router's families, and the workers' publisher counter). Histogram series are named by
 * their family plus `_bucket` / `_sum` / `_count`; a histogram's bare name or a counter/gauge with
 * such a suffix is wrong.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FrontendMetricSet } from './app.js';
import { KvIndexMetrics, PublisherMetrics } from './kv.js';
import { createRegistry } from './registry.js';
import { RouterRequestMetrics } from './router.js';
import { topologyMetrics } from './topology.js';

const DASHBOARD = path.resolve(import.meta.dirname, '../../../deploy/grafana/kvrouter.json');

/** Family name → type, over the registries the apps build. */
function exported(): Map<string, string> {
  const out = new Map<string, string>();
  const add = (r: ReturnType<typeof createRegistry>) => {
    for (const m of r.getMetricsAsArray()) out.set(m.name, (m as unknown as { type: string }).type);
  };
  const fe = new FrontendMetricSet({ routerMode: 'kv', routerId: 1n });
  topologyMetrics(fe.registry);
  add(fe.registry);
  const router = createRegistry(); // the standalone router's
  new RouterRequestMetrics(router);
  new KvIndexMetrics(router);
  add(router);
  const worker = createRegistry(); // mocker / worker adapter
  new PublisherMetrics(worker);
  add(worker);
  return out;
}

interface Query {
  where: string;
  expr: string;
}

function queries(dash: Record<string, unknown>): Query[] {
  const out: Query[] = [];
  const walk = (panels: unknown[] | undefined) => {
    for (const p of (panels ?? []) as Record<string, unknown>[]) {
      for (const t of (p.targets ?? []) as Record<string, unknown>[])
        out.push({ where: `panel "${String(p.title)}" ${String(t.refId)}`, expr: String(t.expr) });
      walk(p.panels as unknown[] | undefined);
    }
  };
  walk(dash.panels as unknown[]);
  for (const v of (dash.templating as { list: Record<string, unknown>[] }).list) {
    const q = v.query as { query?: string } | string;
    if (v.type === 'query')
      out.push({ where: `variable ${String(v.name)}`, expr: typeof q === 'string' ? q : q.query! });
  }
  return out;
}

const NOT_METRICS = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'bool',
  'and',
  'or',
  'unless',
  'offset',
  'inf',
  'nan',
]);

/**
 * Metric names in a PromQL expression: what is left after removing strings, label matchers,
 * range selectors, Grafana variables and label lists, that is an identifier not called as a
 * function and not a keyword.
 */
export function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, ' ')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ')
    .replace(/\$\w+/g, ' ');
  const out: string[] = [];
  for (const m of bare.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*(?=\s*(\(?))/g)) {
    if (m[1] === '(' || NOT_METRICS.has(m[0].toLowerCase())) continue;
    out.push(m[0]);
  }
  return out;
}

describe('deploy/grafana/kvrouter.json', () => {
  const dash = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as Record<string, unknown>;
  const qs = queries(dash);
  const families = exported();

  it('extracts names from PromQL as written by hand', () => {
    expect(
      metricNames(
        'histogram_quantile(0.9, sum by (le, dynamo_component) (rate(dynamo_router_overhead_total_ms_bucket{router_id=~"$r", x="a{b}"}[$__rate_interval]))) / on() group_left() max(dynamo_frontend_model_total_kv_blocks) > bool 0',
      ),
    ).toEqual(['dynamo_router_overhead_total_ms_bucket', 'dynamo_frontend_model_total_kv_blocks']);
    expect(metricNames('label_values(dynamo_frontend_inflight_requests, model)')).toEqual([
      'dynamo_frontend_inflight_requests',
      'model',
    ]);
  });

  it('has a query for every group of families the issue names', () => {
    const all = qs.map((q) => q.expr).join('\n');
    for (const name of [
      'dynamo_frontend_requests_total', // frontend
      'dynamo_component_router_kv_hit_rate_count', // router
      'dynamo_router_overhead_total_ms_bucket', // overhead breakdown
      'dynamo_component_kv_cache_events_applied', // KV events
      'dynamo_frontend_worker_active_prefill_tokens', // workers
    ])
      expect(all).toContain(name);
    expect(qs.length).toBeGreaterThan(40);
  });

  it('names only exported metrics, with the right histogram suffixes', () => {
    const bad: string[] = [];
    for (const q of qs) {
      // label_values(metric, label): only the metric is one.
      const names = q.expr.startsWith('label_values(')
        ? metricNames(q.expr).slice(0, 1)
        : metricNames(q.expr);
      if (names.length === 0) bad.push(`${q.where}: no metric in ${q.expr}`);
      for (const n of names) {
        const type = families.get(n);
        if (type !== undefined) {
          if (type === 'histogram') bad.push(`${q.where}: histogram ${n} needs _bucket, _sum or _count`);
          continue;
        }
        const m = /^(.*)_(bucket|sum|count)$/.exec(n);
        if (m && families.get(m[1]) === 'histogram') continue;
        bad.push(`${q.where}: ${n} is not exported`);
      }
    }
    expect(bad).toEqual([]);
  });

  it('uses every family the frontend and router export at least once', () => {
    const used = new Set(
      qs
        .flatMap((q) => metricNames(q.expr).filter((n) => n.startsWith('dynamo_')))
        .map((n) => (families.has(n) ? n : n.replace(/_(bucket|sum|count)$/, ''))),
    );
    expect([...families.keys()].filter((n) => !used.has(n)).sort()).toEqual([]);
  });

  it('every expression parses as PromQL (promtool check rules, Grafana variables filled in)', () => {
    const promtool = ['/usr/bin/promtool', '/usr/local/bin/promtool'].find((p) => existsSync(p));
    if (!promtool) throw new Error("promtool not found: run 'node tools/services.mjs install'");
    const exprs = qs
      .filter((q) => !q.expr.startsWith('label_values('))
      .map((q) => q.expr.replaceAll('$__rate_interval', '5m').replace(/\$\w+/g, '.*'));
    const rules = ['groups:', '  - name: grafana', '    rules:'];
    exprs.forEach((e, i) =>
      rules.push(`      - record: grafana_query_${i}`, `        expr: ${JSON.stringify(e)}`),
    );
    const dir = mkdtempSync(path.join(os.tmpdir(), 'kvr-grafana-'));
    try {
      writeFileSync(path.join(dir, 'rules.yml'), `${rules.join('\n')}\n`);
      const r = spawnSync(promtool, ['check', 'rules', path.join(dir, 'rules.yml')], { timeout: 30_000 });
      const out = `${r.stdout?.toString() ?? ''}${r.stderr?.toString() ?? ''}`;
      expect(out).toContain(`SUCCESS: ${exprs.length} rules found`);
      expect(r.status).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
