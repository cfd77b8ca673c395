/**
 * `pnpm bench disagg`: topology-aware disaggregated serving (docs/protocol.md §13, §14) end to end —
 * a real frontend (`--router-mode kv`) over simulated prefill and decode workers in two topology
 * zones (engines 100x faster than §17), requests over HTTP, each placement read from the
 * response's `nvext.worker_id`. The scenarios live in apps/frontend/src/disagg-bench.ts (run as a
 * child process from TypeScript sources); figures:
 * - required: cross-domain decode placements over 1000 requests (must be 0);
 * - required with no decode worker in the prefill worker's zone: 503s, and requests the prefill
 *   worker received (must be 0: the request fails before prefill is dispatched);
 * - preferred 0.85 with balanced zones (equal loads): in-domain share (vs the same fleet without topology);
 * - preferred 0.85 with all traffic from a zone holding 1 of 4 decode workers: in-domain share as
 *   concurrency grows (spill-over when that worker saturates).
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Row, Suite } from '../harness.js';

const script = fileURLToPath(new URL('../../../apps/frontend/src/disagg-bench.ts', import.meta.url));

interface RunStats {
  requests: number;
  ok: number;
  errors: number;
  inDomain: number;
  crossDomain: number;
  byDecodeZone: Record<string, number>;
  seconds: number;
  latencyP50Ms: number;
  latencyP90Ms: number;
  firstError: string | null;
}

const share = (r: RunStats): number => (r.ok > 0 ? Math.round((1000 * r.inDomain) / r.ok) / 10 : NaN);
const ms = (x: number): number => Math.round(x * 10) / 10;
const rps = (r: RunStats): number => Math.round((10 * r.requests) / r.seconds) / 10;

export const suite: Suite = {
  name: 'disagg',
  description:
    'disaggregated prefill/decode across topology zones: required / preferred placements over HTTP',
  async run(ctx) {
    const child = spawn(
      process.execPath,
      ['--conditions=source', '--import', 'tsx', script, ...(ctx.quick ? ['--quick'] : [])],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    createInterface({ input: child.stderr }).on('line', (l) => {
      try {
        const p = JSON.parse(l) as { progress?: string; done: number; total: number };
        if (p.progress) ctx.progress(p.progress, p.done, p.total);
      } catch {
        process.stderr.write(`${l}\n`);
      }
    });
    let last = '';
    createInterface({ input: child.stdout }).on('line', (l) => (last = l));
    const code = await new Promise<number | null>((r) => child.on('exit', r));
    if (code !== 0 || last === '') throw new Error(`disagg bench child exited with ${code}`);
    const o = JSON.parse(last) as {
      required: RunStats;
      requiredBootstrap: RunStats;
      requiredNoDecode: RunStats & { prefillSubmittedZ3: number };
      preferredEqual: RunStats;
      noTopology: RunStats;
      preferredSaturation: Record<string, RunStats>;
    };
    const rows: Row[] = [
      {
        name: `required: cross-domain decode placements / ${o.required.requests}`,
        value: o.required.crossDomain,
        unit: 'requests',
        extra: {
          ok: o.required.ok,
          errors: o.required.errors,
          in_domain: o.required.inDomain,
          req_per_s: rps(o.required),
          latency_p50_ms: ms(o.required.latencyP50Ms),
          latency_p90_ms: ms(o.required.latencyP90Ms),
          ...o.required.byDecodeZone,
        },
      },
      {
        name: `required, bootstrap variant: cross-domain decode placements / ${o.requiredBootstrap.requests}`,
        value: o.requiredBootstrap.crossDomain,
        unit: 'requests',
        extra: {
          ok: o.requiredBootstrap.ok,
          errors: o.requiredBootstrap.errors,
          in_domain: o.requiredBootstrap.inDomain,
          req_per_s: rps(o.requiredBootstrap),
          latency_p50_ms: ms(o.requiredBootstrap.latencyP50Ms),
          latency_p90_ms: ms(o.requiredBootstrap.latencyP90Ms),
          ...o.requiredBootstrap.byDecodeZone,
        },
      },
      {
        name: 'required, no compatible decode: requests the prefill worker received',
        value: o.requiredNoDecode.prefillSubmittedZ3,
        unit: 'requests',
        extra: {
          sent: o.requiredNoDecode.requests,
          failed_503: o.requiredNoDecode.errors,
          first_error: (o.requiredNoDecode.firstError ?? '').slice(0, 120),
        },
      },
      {
        name: 'preferred 0.85, balanced zones: in-domain share',
        value: share(o.preferredEqual),
        unit: '%',
        extra: {
          ok: o.preferredEqual.ok,
          cross: o.preferredEqual.crossDomain,
          req_per_s: rps(o.preferredEqual),
          no_topology_share_pct: share(o.noTopology),
        },
      },
    ];
    for (const [k, r] of Object.entries(o.preferredSaturation))
      rows.push({
        name: `preferred 0.85, z1 (1 of 4 decode) saturating, ${k.slice(1)} at a time: in-domain share`,
        value: share(r),
        unit: '%',
        extra: { ok: r.ok, errors: r.errors, spilled: r.crossDomain, req_per_s: rps(r) },
      });
    return rows;
  },
};
