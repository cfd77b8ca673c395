/**
 * `pnpm --filter @kvrouter/benchmarks faults [--rate 8] [--window 40] [--seed 1]`: the must-show table
 * of issue 18 (self-healing deployments), one fault at a time on a fleet deployed as an operator
 * would: real nats-server and etcd, two mocker processes of 4 workers, the standalone router with
 * `--serve-indexer`, frontend A (its own index from KV events) and frontend B
 * (`--use-remote-indexer`), both with `--router-replica-sync`, under steady multi-turn chat traffic
 * spread over both frontends (the soak's clients and workload).
 *
 * For each fault: client-visible errors (by cause) from the fault to the end of its window; the
 * time until cache-aware routing is back (frontend B's remote-index query failures stop rising, and
 * the engine-reported prompt hit rate of 5 s windows is back to 90 % of its level before); and the
 * state left behind once traffic is paused and drained (booked load and in-flight gauges of both
 * frontends, `dynamo_frontend_worker_*` series of workers that no longer exist, the standalone
 * router's lease and the frontends' `router-discovery` keys). Results: a table on stdout and
 * benchmarks/results/faults.json.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Fleet, Traffic, now, numberArg, sleep } from './fleet.js';

const RATE = numberArg('faults', 'rate', 8);
const WINDOW_S = numberArg('faults', 'window', 40);
const SEED = numberArg('faults', 'seed', 1);
const HIT_WINDOW_S = 5;

const resultsDir = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'results');
const log = (m: string) => process.stdout.write(`${m}\n`);

const fleet = new Fleet('faults');
const traffic = new Traffic(fleet, { rate: RATE, seed: SEED, sessions: 32, deadlineMs: 120_000 });
const records = traffic.sent;
let t0 = now();

// ---------------------------------------------------------------- probes
const metric = (text: string, re: RegExp): number => {
  let sum = 0;
  for (const line of text.split('\n'))
    if (re.test(line)) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  return sum;
};
const REMOTE_FAILURES = /^dynamo_component_router_remote_indexer_query_failures_total\{/;

/** Frontend B's remote-index query failures over time (t, total). */
const remoteFailures: [number, number][] = [];
async function sampleRemote(): Promise<void> {
  try {
    const text = await (
      await fetch(`${fleet.frontends[1]!.url}/metrics`, { signal: AbortSignal.timeout(2000) })
    ).text();
    remoteFailures.push([now() - t0, metric(text, REMOTE_FAILURES)]);
  } catch {
    // Sampled again in 500 ms.
  }
}

// ---------------------------------------------------------------- faults
interface Fault {
  name: string;
  run: () => Promise<void>;
}
/** Facts a fault's run records (e.g. when a replacement process was ready), seconds after the fault. */
let notes: Record<string, number> = {};
const note = (what: string, since: number) => {
  notes[what] = +(now() - t0 - since).toFixed(1);
};
const faults: Fault[] = [
  {
    name: 'kill -9 mocker (4 of 8 workers), restarted after 5 s',
    run: async () => {
      await fleet.killMocker(1, 5000);
    },
  },
  {
    name: 'nats-server restart (down 2 s)',
    run: async () => {
      await fleet.restartNats(2000);
    },
  },
  {
    name: 'SIGSTOP standalone router 15 s (past its 10 s lease)',
    run: async () => {
      await fleet.pause(fleet.router, 15_000);
    },
  },
  {
    name: 'kill -9 standalone router, new one after 1 s',
    run: async () => {
      const s = now() - t0;
      await fleet.restartRouter(1000);
      note('new_router_ready_after_s', s);
    },
  },
  {
    name: 'etcd restart (kill -9, down 2 s)',
    run: async () => {
      await fleet.restartEtcd(2000);
    },
  },
];

interface Row {
  fault: string;
  at_s: number;
  requests: number;
  client_errors: Record<string, number>;
  hit_rate_before: number | null;
  hit_rate_back_after_s: number | null;
  remote_index_failures: number;
  remote_index_back_after_s: number | null;
  notes: Record<string, number>;
  left: Record<string, unknown>;
}

// ---------------------------------------------------------------- run
log(`faults: ${RATE} req/s, ${WINDOW_S} s per fault, seed ${SEED}; starting the fleet…`);
await fleet.start();
log(
  `faults: fleet up (frontends ${fleet.frontends.map((f) => f.url).join(', ')}, 8 workers, standalone router)`,
);
t0 = traffic.t0 = now();
const sampler = setInterval(() => void sampleRemote(), 500);
const rows: Row[] = [];
const resume = () => traffic.start();
const pause = () => traffic.drain();
try {
  resume();
  await sleep(30_000); // warm-up: sessions build their prefixes
  for (const f of faults) {
    const s = now() - t0;
    const before = traffic.hitRate(Math.max(0, s - 20), s);
    log(`  fault at ${Math.round(s)} s: ${f.name}`);
    notes = {};
    await f.run();
    const rest = WINDOW_S - (now() - t0 - s);
    if (rest > 0) await sleep(rest * 1000);
    await pause();
    const e = now() - t0;
    await sleep(3000);
    const left = await fleet.leftovers();
    // Hit rate back: the first 5 s window after the fault at >= 90 % of the level before.
    let back: number | null = null;
    if (before !== null)
      for (let t = s; t + HIT_WINDOW_S <= e; t += 1) {
        const h = traffic.hitRate(t, t + HIT_WINDOW_S);
        if (h !== null && h >= 0.9 * before) {
          back = Math.max(0, t + HIT_WINDOW_S - s);
          break;
        }
      }
    const errors: Record<string, number> = {};
    let n = 0;
    for (const r of records)
      if (r.t >= s && r.t < e) {
        n++;
        const o = r.answer?.outcome ?? 'lost';
        if (o !== 'ok') errors[o] = (errors[o] ?? 0) + 1;
      }
    const inWindow = remoteFailures.filter(([t]) => t >= s - 0.5 && t <= e);
    const base = inWindow[0]?.[1] ?? 0;
    const last = inWindow.at(-1)?.[1] ?? base;
    let lastRise: number | null = null;
    for (let i = 1; i < inWindow.length; i++)
      if (inWindow[i]![1] > inWindow[i - 1]![1]) lastRise = inWindow[i]![0];
    rows.push({
      fault: f.name,
      at_s: Math.round(s),
      requests: n,
      client_errors: errors,
      hit_rate_before: before === null ? null : +before.toFixed(3),
      hit_rate_back_after_s: back,
      remote_index_failures: last - base,
      remote_index_back_after_s: lastRise === null ? 0 : +(lastRise - s).toFixed(1),
      notes,
      left,
    });
    log(`    ${JSON.stringify(rows.at(-1))}`);
    resume();
    await sleep(10_000); // settle before the next fault
  }
  await pause();
} finally {
  clearInterval(sampler);
  await fleet.stop();
}

const loadavg = readFileSync('/proc/loadavg', 'utf8').trim();
mkdirSync(resultsDir, { recursive: true });
writeFileSync(
  join(resultsDir, 'faults.json'),
  JSON.stringify(
    { rate: RATE, window_s: WINDOW_S, seed: SEED, loadavg, date: new Date().toISOString(), rows },
    null,
    2,
  ),
);
const fmt = (o: Record<string, number>) =>
  Object.keys(o).length === 0
    ? '0'
    : Object.entries(o)
        .map(([k2, v]) => `${v} ${k2}`)
        .join(', ');
log(
  '\n| fault | requests | client-visible errors | remote index back after | hit rate back after | left behind |',
);
log('|---|---|---|---|---|---|');
for (const r of rows)
  log(
    `| ${r.fault} | ${r.requests} | ${fmt(r.client_errors)} | ${r.remote_index_failures} failed queries, ${r.remote_index_back_after_s} s${Object.keys(r.notes).length ? ` (${fmt(r.notes)})` : ''} | ${r.hit_rate_back_after_s ?? 'not within the window'} s (before ${r.hit_rate_before}) | ${JSON.stringify(r.left)} |`,
  );
log(`\nload average at the end: ${loadavg}; results in benchmarks/results/faults.json`);
