/**
 * `pnpm soak [--minutes 20] [--rate 12] [--seed 1]`: a fleet deployed as an operator would run it —
 * real nats-server (JetStream) and etcd, two mocker processes of 4 workers each, the standalone
 * router with `--serve-indexer`, and two frontends with `--router-replica-sync` (one keeps its own
 * index from KV events, one queries the standalone router's with `--use-remote-indexer`) — under
 * mixed traffic for the whole duration, with faults injected on a schedule:
 * kill -9 of a mocker process (then restarted), a nats-server restart, an etcd restart, a 15 s
 * SIGSTOP of the standalone router and of a frontend, a slow client, 30 s without KV events from one
 * mocker's workers (SIGUSR2 toggles them in the mocker), and a burst at 3x the rate.
 *
 * Traffic: multi-turn chat sessions (~1.5k-token prompts), 70 % streaming, 5 % of streams dropped by
 * their client after the first chunk, 2 % of requests cancelled at a random moment, spread over
 * both frontends. After the run, traffic stops and the fleet drains.
 *
 * Reports (progress line every 10 s, then a summary; benchmarks/results/soak.json + soak.svg):
 * requests sent / answered / failed by cause, lost requests (sent, never answered: must be 0),
 * in-flight, queued and booked load left on each frontend after the drain (must be 0) with dead
 * workers' series and the standalone router's lease, per fault the client-visible failures in the
 * 60 s after it, the engines' prompt hit rate (usage.prompt_tokens_details.cached_tokens /
 * prompt_tokens) 60 s before and after it and the first 10 s window back at 90 % of the level
 * before (the sessions' own cycle — 48 sessions of 8 turns restart their contexts every ~40 s at
 * 10 req/s — makes that an upper bound), when a frontend's routing-truth mode
 * (`dynamo_frontend_router_truth_mode`: engine-reported vs predicted overlap) left EXACT and when
 * every frontend was EXACT again, and RSS of every process over time (slope after warm-up, MB/min).
 */
import { readFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { timeSeriesSvg, type Marker } from './chart.js';
import { Fleet, Traffic, now, numberArg, sleep } from './fleet.js';

const MINUTES = numberArg('soak', 'minutes', 20);
const RATE = numberArg('soak', 'rate', 12);
const SEED = numberArg('soak', 'seed', 1);
const DURATION = MINUTES * 60;
const WARMUP = Math.min(120, DURATION * 0.1);
const WINDOW = 10;

const resultsDir = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'results');
const log = (m: string) => process.stdout.write(`${m}\n`);

const fleet = new Fleet('soak');
const traffic = new Traffic(fleet, {
  rate: RATE,
  seed: SEED,
  sessions: 48,
  disconnectShare: 0.05,
  cancelShare: 0.02,
});

/** Resident set size of a process in MB (null once it is gone). */
function rssMb(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : null;
  } catch {
    return null;
  }
}

// ---------------------------------------------------------------- faults
interface Fault {
  at: number;
  name: string;
  run: () => Promise<void>;
  /** Filled in when it ran. */
  startedAt?: number;
  endedAt?: number;
  error?: string;
}

const faults: Fault[] = [
  {
    at: 0.14,
    name: 'kill -9 mocker (4 workers), restart after 5 s',
    run: async () => {
      await fleet.killMocker(1, 5000);
    },
  },
  {
    at: 0.24,
    name: 'nats-server restart (down 2 s)',
    run: async () => {
      await fleet.restartNats(2000);
    },
  },
  {
    at: 0.34,
    name: 'etcd restart (kill -9, down 2 s)',
    run: async () => {
      await fleet.restartEtcd(2000);
    },
  },
  {
    at: 0.44,
    name: 'SIGSTOP standalone router 15 s',
    run: async () => {
      await fleet.pause(fleet.router, 15_000);
    },
  },
  {
    at: 0.54,
    name: 'SIGSTOP frontend B 15 s',
    run: async () => {
      await fleet.pause(fleet.frontends[1]!, 15_000);
    },
  },
  {
    at: 0.64,
    name: 'slow client (4 streams read at 400 B/s)',
    run: async () => {
      for (let i = 0; i < 4; i++) traffic.sendOne({ slowBytesPerSec: 400, maxTokens: 120 });
      await sleep(30_000);
    },
  },
  {
    at: 0.7,
    name: "KV events of mocker 1's 4 workers stop for 30 s (SIGUSR2)",
    run: async () => {
      fleet.mockers[0]!.child.kill('SIGUSR2');
      await sleep(30_000);
      fleet.mockers[0]!.child.kill('SIGUSR2');
    },
  },
  {
    at: 0.78,
    name: 'burst at 3x the rate for 20 s',
    run: async () => {
      traffic.factor = 3;
      await sleep(20_000);
      traffic.factor = 1;
    },
  },
];

// ---------------------------------------------------------------- samples
interface Sample {
  t: number;
  rss: Record<string, number | null>;
}
const samples: Sample[] = [];

/** Each frontend's routing-truth mode of the model over time (2 exact, 1 degraded, 0 fallback, null unknown). */
const MODE_LEVEL: Record<string, number> = { exact: 2, degraded: 1, fallback: 0 };
const truth: { t: number; modes: (number | null)[] }[] = [];
async function truthModes(): Promise<void> {
  const t = now() - traffic.t0;
  const modes = await Promise.all(
    fleet.frontends.map(async (fe) => {
      try {
        const text = await (await fetch(`${fe.url}/metrics`, { signal: AbortSignal.timeout(3000) })).text();
        const m = /^dynamo_frontend_router_truth_mode\{[^}]*mode="(\w+)"[^}]*\} 1$/m.exec(text);
        return m ? (MODE_LEVEL[m[1]!] ?? null) : null;
      } catch {
        return null;
      }
    }),
  );
  truth.push({ t, modes });
}
function sample(): void {
  samples.push({
    t: now() - traffic.t0,
    rss: {
      'frontend A': rssMb(fleet.frontends[0]?.child.pid),
      'frontend B': rssMb(fleet.frontends[1]?.child.pid),
      'standalone router': rssMb(fleet.router?.child.pid),
      'mocker 1': rssMb(fleet.mockers[0]?.child.pid),
    },
  });
}

/** Least-squares slope of (t, y) in units per minute. */
function slopePerMin(pts: [number, number][]): number | null {
  if (pts.length < 3) return null;
  const n = pts.length;
  const mx = pts.reduce((a, p) => a + p[0], 0) / n;
  const my = pts.reduce((a, p) => a + p[1], 0) / n;
  let num = 0;
  let den = 0;
  for (const [x, y] of pts) {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  }
  return den > 0 ? (num / den) * 60 : null;
}

// ---------------------------------------------------------------- run
log(`soak: ${MINUTES} min at ${RATE} req/s, seed ${SEED}; starting the fleet…`);
await fleet.start();
log(
  `soak: fleet up (2 frontends ${fleet.frontends.map((f) => f.url).join(', ')}, 8 workers, standalone router)`,
);
traffic.t0 = now();
const t0 = traffic.t0;
const records = traffic.sent;
traffic.start();
const sampler = setInterval(sample, 2000);
const truthSampler = setInterval(() => void truthModes(), 5000);
const progress = setInterval(() => {
  const t = now() - t0;
  const done = records.filter((r) => r.answer).length;
  const failed = records.filter((r) => r.answer?.outcome.startsWith('failed')).length;
  const width = 30;
  const bar = '#'.repeat(Math.round((width * Math.min(t, DURATION)) / DURATION)).padEnd(width, '.');
  log(
    `  [${bar}] ${Math.round(t)}/${DURATION} s  sent ${records.length}  ended ${done}  failed ${failed}  in flight ${traffic.pending.size}`,
  );
}, 10_000);
try {
  for (const f of faults) {
    const wait = f.at * DURATION - (now() - t0);
    if (wait > 0) await sleep(wait * 1000);
    f.startedAt = now() - t0;
    log(`  fault at ${Math.round(f.startedAt)} s: ${f.name}`);
    try {
      await f.run();
    } catch (e) {
      f.error = e instanceof Error ? e.message : String(e);
      log(`  fault failed: ${f.error}`);
    }
    f.endedAt = now() - t0;
  }
  const rest = DURATION - (now() - t0);
  if (rest > 0) await sleep(rest * 1000);
  log(`soak: traffic stops at ${Math.round(now() - t0)} s; draining ${traffic.pending.size} in flight…`);
  await traffic.drain();
  await sleep(5000);
} finally {
  clearInterval(progress);
  clearInterval(sampler);
  clearInterval(truthSampler);
}

// ---------------------------------------------------------------- summary
const outcomes: Record<string, number> = {};
for (const r of records) {
  const o = r.answer?.outcome ?? 'lost';
  outcomes[o] = (outcomes[o] ?? 0) + 1;
}
const left = await fleet.leftovers().catch((e: Error) => ({ error: e.message }));
const tEnd = now() - t0;
const hitRate = (a: number, b: number) => traffic.hitRate(a, b);
const windows: [number, number | null, number, number][] = [];
for (let t = 0; t < tEnd; t += WINDOW) {
  const rs = records.filter((r) => r.t >= t && r.t < t + WINDOW);
  windows.push([
    t,
    hitRate(t, t + WINDOW),
    rs.filter((r) => r.answer?.outcome === 'ok').length / WINDOW,
    rs.filter((r) => !r.answer || r.answer.outcome.startsWith('failed') || r.answer.outcome === 'lost')
      .length / WINDOW,
  ]);
}
const perFault = faults.map((f, i) => {
  const s = f.startedAt ?? 0;
  const before = hitRate(Math.max(WARMUP, s - 60), s);
  let recoveredAfter: number | null = null;
  if (before !== null)
    for (const [t, h] of windows)
      if (t >= s && h !== null && h >= 0.9 * before) {
        recoveredAfter = Math.max(0, t + WINDOW - s);
        break;
      }
  const failures: Record<string, number> = {};
  for (const r of records)
    if (r.t >= s && r.t < s + 60 && (r.answer === null || r.answer.outcome.startsWith('failed'))) {
      const o = r.answer?.outcome ?? 'lost';
      failures[o] = (failures[o] ?? 0) + 1;
    }
  // Routing truth between this fault and the next: when a frontend first left EXACT, and the
  // first reading after that at which every frontend is EXACT again.
  const next = faults[i + 1]?.startedAt ?? tEnd;
  const span = truth.filter((x) => x.t >= s && x.t < next);
  const leftAt = span.find((x) => x.modes.some((m) => m !== 2)) ?? null;
  const back = leftAt ? (span.find((x) => x.t > leftAt.t && x.modes.every((m) => m === 2)) ?? null) : null;
  const after = hitRate(s, s + 60);
  return {
    fault: f.name,
    at_s: Math.round(s),
    truth_left_exact_after_s: leftAt ? Math.round(leftAt.t - s) : null,
    truth_exact_again_after_s: leftAt ? (back ? Math.round(back.t - s) : null) : 0,
    lasted_s: Math.round((f.endedAt ?? s) - s),
    ...(f.error ? { injection_error: f.error } : {}),
    client_failures_within_60s: failures,
    hit_rate_before: before === null ? null : +before.toFixed(3),
    hit_rate_60s_after: after === null ? null : +after.toFixed(3),
    hit_rate_recovered_after_s: recoveredAfter,
  };
});
const rss: Record<
  string,
  { start_mb: number | null; end_mb: number | null; slope_mb_per_min: number | null }
> = {};
for (const name of Object.keys(samples[0]?.rss ?? {})) {
  const pts = samples
    .filter((s) => s.t >= WARMUP && s.rss[name] !== null)
    .map((s) => [s.t, s.rss[name]!] as [number, number]);
  const slope = slopePerMin(pts);
  rss[name] = {
    start_mb: pts[0] ? +pts[0][1].toFixed(1) : null,
    end_mb: pts.length ? +pts[pts.length - 1]![1].toFixed(1) : null,
    slope_mb_per_min: slope === null ? null : +slope.toFixed(2),
  };
}
const summary = {
  minutes: MINUTES,
  rate: RATE,
  seed: SEED,
  sent: records.length,
  answered: outcomes.ok ?? 0,
  disconnected_on_purpose: outcomes.disconnected ?? 0,
  cancelled_on_purpose: outcomes.cancelled ?? 0,
  lost: outcomes.lost ?? 0,
  failed_by_cause: Object.fromEntries(Object.entries(outcomes).filter(([k]) => k.startsWith('failed'))),
  left_after_drain: left,
  faults: perFault,
  rss_after_warmup: rss,
  windows: windows.map(([t, h, ok, bad]) => ({ t, hit_rate: h, ok_per_s: ok, failed_per_s: bad })),
  truth_modes: truth,
};
mkdirSync(resultsDir, { recursive: true });
writeFileSync(join(resultsDir, 'soak.json'), `${JSON.stringify(summary, null, 2)}\n`);
const markers: Marker[] = faults
  .filter((f) => f.startedAt !== undefined)
  .map((f, i) => ({ t: f.startedAt!, label: `F${i + 1}` }));
writeFileSync(
  join(resultsDir, 'soak.svg'),
  timeSeriesSvg(
    `kvrouter soak: ${MINUTES} min, ${RATE} req/s, 2 frontends, 8 workers, standalone router (F1..F${markers.length}: faults)`,
    [
      {
        title: 'answers and failures per second',
        unit: 'req/s',
        series: [
          { label: 'answered', points: windows.map(([t, , ok]) => [t, ok]) },
          { label: 'failed or lost', points: windows.map(([t, , , bad]) => [t, bad]) },
        ],
      },
      {
        title: 'engine prompt hit rate',
        unit: 'cached / prompt tokens',
        series: [{ label: 'hit rate', points: windows.map(([t, h]) => [t, h]) }],
      },
      {
        title: 'routing truth mode per frontend',
        unit: '2 exact, 1 degraded, 0 fallback',
        series: fleet.frontends.map((_, i) => ({
          label: `frontend ${'AB'[i]}`,
          points: truth.map((x) => [x.t, x.modes[i] ?? null] as [number, number | null]),
        })),
      },
      {
        title: 'resident memory',
        unit: 'MB',
        series: Object.keys(samples[0]?.rss ?? {}).map((name) => ({
          label: name,
          points: samples.map((s) => [s.t, s.rss[name] ?? null] as [number, number | null]),
        })),
      },
    ],
    markers,
    tEnd,
  ),
);
log('\nsoak summary');
log(`  sent ${summary.sent}, answered ${summary.answered}, lost ${summary.lost}`);
log(
  `  disconnected on purpose ${summary.disconnected_on_purpose}, cancelled on purpose ${summary.cancelled_on_purpose}`,
);
log(`  failed by cause: ${JSON.stringify(summary.failed_by_cause)}`);
log(`  left after drain: ${JSON.stringify(summary.left_after_drain)}`);
for (const [i, f] of perFault.entries())
  log(
    `  F${i + 1} ${f.fault} @${f.at_s}s: failures ${JSON.stringify(f.client_failures_within_60s)}, hit rate ${f.hit_rate_before} (60 s before) / ${f.hit_rate_60s_after} (60 s after), back to 90 % after ${f.hit_rate_recovered_after_s ?? '-'} s; truth ${f.truth_left_exact_after_s === null ? 'stayed EXACT' : `left EXACT at +${f.truth_left_exact_after_s} s, EXACT again at +${f.truth_exact_again_after_s ?? 'never'} s`}`,
  );
for (const [name, r] of Object.entries(rss))
  log(`  RSS ${name}: ${r.start_mb} → ${r.end_mb} MB, slope ${r.slope_mb_per_min} MB/min`);
log(`  results/soak.json, results/soak.svg`);
await fleet.stop();
process.exit(summary.lost === 0 ? 0 : 1);
