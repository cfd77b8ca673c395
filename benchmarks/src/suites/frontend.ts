/**
 * `pnpm bench frontend`: the HTTP frontend (apps/frontend) under closed-loop load of ~8k-token
 * multi-turn chat completions against fast embedded simulated engines, next to a plain express
 * reverse proxy to the same engines, measured in the same run. Three processes: the server (the
 * frontend and the proxy over one set of embedded engines), the load client, and this one.
 * Figures: throughput, the frontend's added latency (request received → dispatched, from the
 * response's `nvext.timing`) and end-to-end minus engine time, and `promtool check metrics` on a
 * /metrics scrape taken under load.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Row, Suite } from '../harness.js';

const dir = (f: string) => fileURLToPath(new URL(`../../../apps/frontend/src/bench/${f}`, import.meta.url));
const tsNode = (script: string, args: string[]) =>
  spawn(process.execPath, ['--conditions=source', '--import', 'tsx', dir(script), ...args], { stdio: ['ignore', 'pipe', 'inherit'] });

async function firstLine(child: ReturnType<typeof spawn>): Promise<string> {
  const rl = createInterface({ input: child.stdout! });
  return new Promise<string>((resolve, reject) => {
    rl.once('line', resolve);
    child.once('exit', (code) => reject(new Error(`${child.spawnargs.join(' ')} exited with ${code}`)));
  });
}

interface Pct {
  p50: number;
  p90: number;
  p99: number;
  max: number;
}
interface LoadResult {
  rps: number;
  requests: number;
  errors: number;
  firstError: string;
  isl: Pct;
  dispatch: Pct;
  added: Pct;
  e2e: Pct;
  metrics: string | null;
}

function rows(name: string, r: LoadResult): Row[] {
  return [
    { name: `${name}: throughput`, value: r.rps, unit: 'req/s', extra: { requests: r.requests, errors: r.errors, isl_p50: r.isl.p50 } },
    { name: `${name}: received → dispatched`, value: r.dispatch.p50, unit: 'ms p50', extra: { p90: r.dispatch.p90, p99: r.dispatch.p99 } },
    { name: `${name}: end-to-end − engine`, value: r.added.p50, unit: 'ms p50', extra: { p90: r.added.p90, p99: r.added.p99 } },
    { name: `${name}: end-to-end`, value: r.e2e.p50, unit: 'ms p50', extra: { p90: r.e2e.p90, p99: r.e2e.p99 } },
  ];
}

function promtool(text: string | null): string {
  if (text === null) return 'no scrape';
  const r = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  if (r.error) return `promtool missing (${r.error.message})`;
  const findings = `${r.stdout}${r.stderr}`.split('\n').filter((l) => l.trim() !== '');
  // Lint findings for names PROTOCOL §16 fixes (`_ms` units, two counters without `_total`) are expected.
  const other = findings.filter(
    (f) => !/(_ms metric names should not contain abbreviated units|(events_applied|disconnected_clients) counter metrics should have "_total" suffix)$/.test(f),
  );
  return (r.status === 0 || r.status === 3) && other.length === 0 ? 'pass' : `FAIL (exit ${r.status}): ${other.join('; ')}`;
}

export const suite: Suite = {
  name: 'frontend',
  description: 'HTTP frontend vs a plain express proxy: ~8k-token multi-turn chat, fast simulated engines, closed loop',
  async run(ctx) {
    const o = { concurrency: 32, seconds: ctx.quick ? 4 : 15, warmupS: ctx.quick ? 1 : 3, maxTokens: 8, sessions: 64 };
    const RATE = 300;
    const server = tsNode('server.ts', ['--router-mode', 'kv', '--mocker-workers', '4', '--tokenizer', 'fastokens', '--router-event-threads', '1']);
    try {
      const { frontend, proxy, model } = JSON.parse(await firstLine(server)) as { frontend: string; proxy: string; model: string };
      const run = async (url: string, label: string, scrape: boolean, rate?: number, warm = false): Promise<LoadResult> => {
        ctx.progress(label, 0, 1);
        const opts = warm ? { ...o, seconds: 2, warmupS: 0 } : o;
        const c = tsNode('load.ts', [url, model, JSON.stringify({ ...opts, scrape, ...(rate ? { rate } : {}) })]);
        const r = JSON.parse(await firstLine(c)) as LoadResult;
        ctx.progress(label, 1, 1);
        return r;
      };
      // A short unmeasured pass over both first (JIT, lazily loaded modules, tokenizer thread).
      await run(frontend, 'warm-up frontend', false, undefined, true);
      await run(proxy, 'warm-up proxy', false, undefined, true);
      // Latency at a fixed offered rate (open loop), then the most each sustains (closed loop, 32 clients).
      const feRate = await run(frontend, `kvrouter frontend at ${RATE} req/s`, true, RATE);
      const pxRate = await run(proxy, `plain proxy at ${RATE} req/s`, false, RATE);
      const feMax = await run(frontend, 'kvrouter frontend, closed loop', false);
      const pxMax = await run(proxy, 'plain proxy, closed loop', false);
      const check = promtool(feRate.metrics);
      return [
        ...rows(`frontend @${RATE}/s`, feRate),
        ...rows(`plain proxy @${RATE}/s`, pxRate),
        ...rows('frontend, 32 clients', feMax).slice(0, 1),
        ...rows('plain proxy, 32 clients', pxMax).slice(0, 1),
        { name: 'promtool check metrics, scrape under load', value: check === 'pass' ? 1 : 0, unit: 'pass', extra: { result: check } },
      ];
    } finally {
      server.kill('SIGTERM');
    }
  },
};
