/**
 * `pnpm bench disagg` child process (benchmarks/src/suites/disagg.ts spawns it): the must-show
 * figures of topology-aware disaggregated serving on `DisaggScenario` fleets. Progress goes to
 * stderr as JSON lines `{"progress": label, "done", "total"}`; the result is one JSON line on stdout.
 *
 * Usage: node --conditions=source --import tsx apps/frontend/src/disagg-bench.ts [--quick]
 */
import { DisaggScenario, type RunStats, type ZoneSpec } from './disagg-scenario.js';

const quick = process.argv.includes('--quick');
const N = quick ? 200 : 1000;
const progress = (label: string, done: number, total: number): void =>
  void process.stderr.write(`${JSON.stringify({ progress: label, done, total })}\n`);

async function scenario<T>(
  o: Parameters<typeof DisaggScenario.start>[0],
  f: (s: DisaggScenario) => Promise<T>,
): Promise<T> {
  const s = await DisaggScenario.start(o);
  try {
    return await f(s);
  } finally {
    await s.close();
  }
}

const run = (
  s: DisaggScenario,
  label: string,
  requests: number,
  concurrency: number,
  maxTokens = 4,
  prefillPin?: bigint,
): Promise<RunStats> =>
  s.run({
    requests,
    concurrency,
    promptLen: 128,
    maxTokens,
    prefillPin,
    onProgress: (d) => progress(label, d, requests),
  });

const balanced: ZoneSpec[] = [
  { name: 'z1', prefill: 1, decode: 2 },
  { name: 'z2', prefill: 1, decode: 2 },
];

const out: Record<string, unknown> = { quick, requests: N };

out.required = await scenario({ enforcement: 'required', zones: balanced }, (s) => run(s, 'required', N, 8));

// Same fleet with bootstrap ports: decode dispatched at once, waiting for its room (§14 bootstrap variant).
out.requiredBootstrap = await scenario({ enforcement: 'required', zones: balanced, bootstrap: true }, (s) =>
  run(s, 'required, bootstrap variant', N, 8),
);

out.requiredNoDecode = await scenario(
  {
    enforcement: 'required',
    zones: [
      { name: 'z1', prefill: 1, decode: 1 },
      { name: 'z3', prefill: 1, decode: 0 },
    ],
  },
  async (s) => {
    const pin = s.prefillFleets.get('z3')!.workers[0]!.instanceId;
    const st = await run(s, 'required, no z3 decode', quick ? 50 : 100, 4, 2, pin);
    return { ...st, prefillSubmittedZ3: s.prefillSubmitted('z3') };
  },
);

out.preferredEqual = await scenario(
  { enforcement: 'preferred', preferredWeight: 0.85, zones: balanced },
  (s) => run(s, 'preferred 0.85, balanced', N, 8),
);

out.noTopology = await scenario({ enforcement: null, zones: balanced }, (s) =>
  run(s, 'no topology, balanced', N, 8),
);

const sweep: Record<string, RunStats> = {};
await scenario(
  {
    enforcement: 'preferred',
    preferredWeight: 0.85,
    zones: [
      { name: 'z1', prefill: 1, decode: 1 },
      { name: 'z2', prefill: 0, decode: 3 },
    ],
  },
  async (s) => {
    for (const c of quick ? [1, 16, 64] : [1, 4, 16, 64])
      sweep[`c${c}`] = await run(
        s,
        `preferred 0.85, z1 saturating, ${c} at a time`,
        quick ? 150 : 300,
        c,
        24,
      );
  },
);
out.preferredSaturation = sweep;

process.stdout.write(`${JSON.stringify(out)}\n`);
process.exit(0);
