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
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  SessionWorkload,
  Rng,
  eventually,
  startEtcd,
  startFrontendProcess,
  startMocker,
  startNats,
  startRouterProcess,
  type FrontendProc,
  type Proc,
  type RouterProc,
  type ServiceHandle,
} from '@kvrouter/testkit';
import { send, type Answer } from './traffic.js';

const arg = (name: string, dflt: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return dflt;
  const v = Number(process.argv[i + 1]);
  if (!Number.isFinite(v) || v <= 0) {
    console.error(`faults: --${name} must be a positive number, got ${process.argv[i + 1]}`);
    process.exit(2);
  }
  return v;
};
const RATE = arg('rate', 8);
const WINDOW_S = arg('window', 40);
const SEED = arg('seed', 1);
const NS = 'faults';
const MODEL = 'mock-model';
const HIT_WINDOW_S = 5;

const resultsDir = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'results');
const log = (m: string) => process.stdout.write(`${m}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const now = () => performance.now() / 1000;

// ---------------------------------------------------------------- fleet
let nats: ServiceHandle;
let etcd: ServiceHandle;
const mockers: Proc[] = [];
let router: RouterProc;
const frontends: FrontendProc[] = [];
const infra = () => ({ etcd: etcd.url, nats: nats.url });
const MOCKER_ARGS = ['--speedup-ratio', '5', '--num-gpu-blocks-override', '2048'];
const ROUTER_ARGS = ['--serve-indexer', '--router-replica-sync'];

async function workersOf(url: string): Promise<number> {
  const h = (await (await fetch(`${url}/health`, { signal: AbortSignal.timeout(3000) })).json()) as {
    instances?: unknown[];
  };
  return h.instances?.length ?? 0;
}

async function startFleet(): Promise<void> {
  [nats, etcd] = await Promise.all([startNats({ jetstream: true }), startEtcd()]);
  for (let i = 0; i < 2; i++) mockers.push(startMocker(infra(), NS, 4, MOCKER_ARGS));
  router = await startRouterProcess(infra(), NS, ROUTER_ARGS);
  const common = ['--router-mode', 'kv', '--router-replica-sync'];
  frontends.push(await startFrontendProcess(infra(), NS, common));
  frontends.push(await startFrontendProcess(infra(), NS, [...common, '--use-remote-indexer']));
  for (const fe of frontends)
    await eventually(async () => (await workersOf(fe.url)) >= 8, 90_000, `8 workers on ${fe.url}`);
}

async function stopFleet(): Promise<void> {
  for (const p of [...frontends, router, ...mockers]) await p?.kill('SIGKILL');
  await Promise.all([nats?.stop(), etcd?.stop()]);
}

// ---------------------------------------------------------------- traffic
interface Rec {
  t: number;
  answer: Answer | null;
}
const records: Rec[] = [];
const pending = new Set<Promise<void>>();
const rng = new Rng(SEED);
const workload = new SessionWorkload({ sessions: 32, promptTokens: 1500, turns: 8, seed: SEED });
let sending = false;
let t0 = now();

function sendOne(k: number): void {
  const rec: Rec = { t: now() - t0, answer: null };
  records.push(rec);
  const p = send({
    url: frontends[k % frontends.length]!.url,
    model: MODEL,
    messages: workload.take().messages,
    stream: rng.bool(0.7),
    maxTokens: 16 + rng.int(0, 32),
    disconnect: false,
    cancelAfterMs: null,
    deadlineMs: 120_000,
  }).then((a) => {
    rec.answer = a;
  });
  pending.add(p);
  void p.finally(() => pending.delete(p));
}

let k = 0;
async function trafficLoop(): Promise<void> {
  let next = now();
  while (sending) {
    next += 1 / RATE;
    const wait = next - now();
    if (wait > 0.002) await sleep(wait * 1000);
    if (!sending) break;
    sendOne(k++);
  }
}

/** Engine hit rate (cached / prompt tokens) of the ok answers sent in [a, b). */
function hitRate(a: number, b: number): number | null {
  let p = 0;
  let c = 0;
  for (const r of records)
    if (r.answer?.outcome === 'ok' && r.t >= a && r.t < b) {
      p += r.answer.promptTokens;
      c += r.answer.cachedTokens;
    }
  return p > 0 ? c / p : null;
}

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
      await fetch(`${frontends[1]!.url}/metrics`, { signal: AbortSignal.timeout(2000) })
    ).text();
    remoteFailures.push([now() - t0, metric(text, REMOTE_FAILURES)]);
  } catch {
    // Sampled again in 500 ms.
  }
}

const IDLE_GAUGES =
  /^(dynamo_frontend_(inflight_requests|queued_requests|worker_active_decode_blocks|worker_active_prefill_tokens|router_queue_pending_requests))(\{|\s)/;

/** What is left once the fleet is idle: non-zero load gauges, series of workers no longer in discovery. */
async function leftovers(): Promise<Record<string, unknown>> {
  const live = new Set<string>();
  for (const fe of frontends) {
    const h = (await (await fetch(`${fe.url}/health`)).json()) as { instances?: { instance_id: unknown }[] };
    for (const i of h.instances ?? []) live.add(String(i.instance_id));
  }
  const out: Record<string, unknown> = {};
  for (const [i, fe] of frontends.entries()) {
    const text = await (await fetch(`${fe.url}/metrics`)).text();
    const load: Record<string, number> = {};
    const stale = new Set<string>();
    for (const line of text.split('\n')) {
      const m = IDLE_GAUGES.exec(line);
      if (m) load[m[1]!] = (load[m[1]!] ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1));
      const w = /^dynamo_frontend_worker_[a-z_]+\{.*worker_id="(\d+)"/.exec(line);
      if (w && !live.has(w[1]!)) stale.add(w[1]!);
    }
    out[i === 0 ? 'A' : 'B'] = {
      load_left: Object.fromEntries(Object.entries(load).filter(([, v]) => v !== 0)),
      dead_worker_series: stale.size,
      workers: await workersOf(fe.url),
    };
  }
  try {
    const h = (await (
      await fetch(`${router.systemUrl}/health`, { signal: AbortSignal.timeout(3000) })
    ).json()) as {
      status: string;
      lease?: { state: string; reacquired: number; lastGap: { lostAt: number; restoredAt: number } | null };
    };
    out.router = {
      status: h.status,
      lease: h.lease?.state ?? null,
      reacquired: h.lease?.reacquired ?? 0,
      last_gap_ms: h.lease?.lastGap ? h.lease.lastGap.restoredAt - h.lease.lastGap.lostAt : null,
    };
  } catch (e) {
    out.router = { error: (e as Error).message };
  }
  return out;
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
      await mockers[1]!.kill('SIGKILL');
      await sleep(5000);
      mockers[1] = startMocker(infra(), NS, 4, MOCKER_ARGS);
    },
  },
  {
    name: 'nats-server restart (down 2 s)',
    run: async () => {
      const port = nats.port;
      await nats.stop();
      await sleep(2000);
      nats = await startNats({ jetstream: true, port });
    },
  },
  {
    name: 'SIGSTOP standalone router 15 s (past its 10 s lease)',
    run: async () => {
      router.child.kill('SIGSTOP');
      await sleep(15_000);
      router.child.kill('SIGCONT');
    },
  },
  {
    name: 'kill -9 standalone router, new one after 1 s',
    run: async () => {
      const s = now() - t0;
      await router.kill('SIGKILL');
      await sleep(1000);
      router = await startRouterProcess(infra(), NS, ROUTER_ARGS);
      note('new_router_ready_after_s', s);
    },
  },
  {
    name: 'etcd restart (kill -9, down 2 s)',
    run: async () => {
      const old = etcd;
      const exited = new Promise<void>((r) => old.proc.once('exit', () => r()));
      old.proc.kill('SIGKILL');
      await exited;
      await sleep(2000);
      etcd = await startEtcd({ restartOf: old });
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
await startFleet();
log(`faults: fleet up (frontends ${frontends.map((f) => f.url).join(', ')}, 8 workers, standalone router)`);
t0 = now();
const sampler = setInterval(() => void sampleRemote(), 500);
const rows: Row[] = [];
let traffic: Promise<void> = Promise.resolve();
const resume = () => {
  sending = true;
  traffic = trafficLoop();
};
const pause = async () => {
  sending = false;
  await traffic;
  await Promise.all([...pending]);
};
try {
  resume();
  await sleep(30_000); // warm-up: sessions build their prefixes
  for (const f of faults) {
    const s = now() - t0;
    const before = hitRate(Math.max(0, s - 20), s);
    log(`  fault at ${Math.round(s)} s: ${f.name}`);
    notes = {};
    await f.run();
    const rest = WINDOW_S - (now() - t0 - s);
    if (rest > 0) await sleep(rest * 1000);
    await pause();
    const e = now() - t0;
    await sleep(3000);
    const left = await leftovers();
    // Hit rate back: the first 5 s window after the fault at >= 90 % of the level before.
    let back: number | null = null;
    if (before !== null)
      for (let t = s; t + HIT_WINDOW_S <= e; t += 1) {
        const h = hitRate(t, t + HIT_WINDOW_S);
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
  await stopFleet();
}

const loadavg = (await import('node:fs')).readFileSync('/proc/loadavg', 'utf8').trim();
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
