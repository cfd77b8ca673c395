/** The human-readable run summary printed after every run. */
import type { Percentiles, Report } from '@kvrouter/sim';

const f = (x: number | null | undefined, d = 1): string =>
  x === null || x === undefined || !Number.isFinite(x) ? '-' : x.toFixed(d);
const pct = (x: number | null | undefined): string =>
  x === null || x === undefined ? '-' : `${(x * 100).toFixed(1)}%`;
const dist = (p: Percentiles): string =>
  p.n === 0 ? '-' : `mean ${f(p.mean)}  p50 ${f(p.p50)}  p90 ${f(p.p90)}  p99 ${f(p.p99)}  max ${f(p.max)}`;

export function formatSummary(r: Report, label: string, wallMs: number | null): string {
  const q = r.requests;
  const lines = [
    `== ${label}: policy ${r.policy} · ${q.total} requests (${q.finished} finished, ${q.rejected} rejected, ${q.unfinished} unfinished)` +
      (wallMs !== null ? ` · ${f(r.throughput.duration_s)} s of trace in ${f(wallMs / 1000)} s wall` : ''),
    `TTFT ms      ${dist(r.ttft_ms)}`,
    `ITL ms       ${dist(r.itl_ms)}`,
    `E2E ms       ${dist(r.e2e_ms)}`,
    `queue ms     ${dist(r.queue_wait_ms)}`,
    `throughput   ${f(r.throughput.requests_per_s, 3)} req/s · ${f(r.throughput.input_tokens_per_s, 0)} input tok/s · ${f(r.throughput.output_tokens_per_s, 0)} output tok/s`,
    `cache hit    ${pct(r.cache.hit_rate)} of ${r.cache.prompt_tokens} prompt tokens (router expected ${pct(r.cache.router_expected_hit_rate)})`,
  ];
  if (r.oracle) {
    lines.push(
      `oracle       pooled LRU ${pct(r.oracle.pooled_lru_hit_rate)} · infinite cache ${pct(r.oracle.infinite_hit_rate)} · this run reached ${pct(r.oracle.fraction_of_pooled)} of pooled`,
    );
  }
  if (r.load_balance) {
    lines.push(
      `balance      busy-time CV ${f(r.load_balance.busy_cv, 3)} · mean utilization ${pct(r.load_balance.mean_utilization)} · preemptions ${r.preemptions ?? '-'}`,
    );
  }
  const g = r.oracle_gap;
  if (g) {
    const tok = r.cache.prompt_tokens;
    const share = (x: number): string => (tok > 0 ? `${((100 * x) / tok).toFixed(2)}%` : '-');
    const causes = Object.entries(g.routed_away_by_cause)
      .filter(([, v]) => v > 0)
      .sort((a, b) => b[1] - a[1])
      .map(([c, v]) => `${c} ${share(v)}`)
      .join(', ');
    lines.push(
      `oracle gap   ${g.gap_tokens === null ? '-' : share(g.gap_tokens)} of prompt tokens · routed away ${share(g.routed_away_tokens)} (${g.routed_away_requests} requests${causes ? `: ${causes}` : ''}) · evicted before reuse ${share(g.evicted_tokens)} · duplicated blocks ${pct(g.duplicate_share)}`,
    );
  }
  for (const [code, x] of Object.entries(q.rejections))
    lines.push(`rejected     ${x.count} × ${code}: ${x.example}`);
  return lines.join('\n') + '\n';
}
