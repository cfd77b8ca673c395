/**
 * `pnpm bench frontend-stages`: where the frontend's CPU goes per request of the issue-14 chat
 * workload (~8k-token multi-turn chats of the corpus text, Qwen3's tokenizer.json from the engines'
 * cards, 300 req/s open loop, engines in a mocker process; the same server and load as the Qwen3 run
 * of `pnpm bench frontend`). The server runs with `--cpu-prof`; over the load phase the process's CPU
 * is read per thread from /proc (main thread, ZMQ I/O, the rest: V8's GC/JIT helpers, the tokenizer
 * thread, libuv's pool), and the main thread's CPU is split by stage in proportion to its
 * profile samples in the same window (each sample goes to the innermost frame that names a stage).
 * Then the same kind of chats (new text) in a closed loop of 4 clients: CPU per request without
 * queueing, the figure that still means something when the machine cannot give the server what
 * 300 req/s needs. Both phases come after a 25 s warm-up (JIT settled) and each has prompts of its
 * own: steady-state CPU of new conversations, not of JIT compiling or of prompts seen before.
 *
 * Caveats: the profiler samples wall time, so a stage that blocks in a syscall while another process
 * runs (socket writes that wake the peer) is overstated against the others on a loaded machine; the
 * profiler's own thread is left out of the totals, its overhead on the main thread (~5 %) is not.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { tokenizerPackageDir } from '@kvrouter/testkit/parity';
import type { Row, Suite } from '../harness.js';
import { WARMUP_S, corpusLoadOptions, lines } from './frontend.js';

const bench = (f: string) => fileURLToPath(new URL(`../../../apps/frontend/src/bench/${f}`, import.meta.url));

/** Stages of a chat request, matched on a frame's script URL (and function name) from the leaf up. */
const STAGES: [stage: string, test: (url: string, fn: string) => boolean][] = [
  ['HTTP request parse', (u) => /node:_http_(server|common|incoming)/.test(u)],
  ['body read + UTF-8 decode', (u) => u.includes('/http/util.ts') || u.includes('/http/body-thread.ts')],
  ['JSON parse', (u) => u.includes('/protocols/src/events/json.ts') || u.includes('/http/json-bytes.ts')],
  ['validation', (u) => u.includes('/openai/validate.ts')],
  ['chat template render', (u) => u.includes('/tokenizer/template.ts') || u.includes('/tokenizer/jinja/')],
  ['tokenize', (u) => u.includes('/frontend/src/tokenizer/') || u.includes('/packages/tokenizer/')],
  [
    'routing (hashes, index lookup, cost, booking)',
    (u) =>
      /\/packages\/(router|radix-indexer|core-cost)\//.test(u) ||
      u.includes('/protocols/src/hash/') ||
      u.includes('/frontend/src/disagg.ts'),
  ],
  ['request plane (tcp frames to the engine)', (u) => u.includes('/runtime/src/rpc/')],
  ['KV-event ingest (zmq, decode, index apply)', (u) => u.includes('/packages/kv-events/')],
  ['metrics', (u) => u.includes('/packages/metrics/')],
  ['discovery (file backend polling)', (u) => u.includes('/runtime/src/discovery/')],
  [
    'response: SSE chunks, detokenize, socket write',
    (u) =>
      u.includes('/frontend/src/http/') ||
      u.includes('/frontend/src/openai/') ||
      u.includes('/frontend/src/service.ts') ||
      /node:_http_outgoing/.test(u),
  ],
];

interface ProfNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}
export interface Profile {
  nodes: ProfNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/**
 * Busy µs per stage of the main thread's profile between `fromUs` and `toUs`: profile timestamps
 * are CLOCK_MONOTONIC µs, the clock of `process.hrtime` in every process of the host.
 */
export function stagesOf(p: Profile, fromUs: number, toUs: number): Map<string, number> {
  const parent = new Map<number, number>();
  const byId = new Map<number, ProfNode>();
  for (const n of p.nodes) {
    byId.set(n.id, n);
    for (const c of n.children ?? []) parent.set(c, n.id);
  }
  const stageOf = new Map<number, string>();
  const classify = (id: number): string => {
    const hit = stageOf.get(id);
    if (hit !== undefined) return hit;
    const leaf = byId.get(id)!.callFrame.functionName;
    let s = leaf === '(idle)' ? 'idle' : leaf === '(garbage collector)' ? 'GC (main thread)' : '';
    for (let c: number | undefined = id; !s && c !== undefined; c = parent.get(c)) {
      const f = byId.get(c)!.callFrame;
      s = STAGES.find(([, t]) => t(f.url, f.functionName))?.[0] ?? '';
    }
    s ||= 'other (event loop, timers, promises, runtime)';
    stageOf.set(id, s);
    return s;
  };
  const out = new Map<string, number>();
  let t = p.startTime;
  for (let i = 0; i < p.samples.length; i++) {
    t += p.timeDeltas[i] ?? 0;
    if (t < fromUs || t > toUs) continue;
    const s = classify(p.samples[i]!);
    out.set(s, (out.get(s) ?? 0) + (p.timeDeltas[i + 1] ?? 0));
  }
  return out;
}

/** CPU ms of each thread of `pid` (utime + stime), keyed by tid, with its name. */
export function threadCpu(pid: number): Map<string, { name: string; ms: number }> {
  const out = new Map<string, { name: string; ms: number }>();
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      const f = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const v = f.slice(f.lastIndexOf(')') + 2).split(' ');
      const ticks = Number(v[11]) + Number(v[12]);
      out.set(tid, { name: f.slice(f.indexOf('(') + 1, f.lastIndexOf(')')), ms: ticks * 10 });
    } catch {
      // The thread ended.
    }
  }
  return out;
}

/** CPU ms between two readings: the main thread, ZMQ's I/O thread, the others (the profiler's left out). */
export function byThread(
  pid: number,
  before: Map<string, { name: string; ms: number }>,
  after: Map<string, { name: string; ms: number }>,
): { main: number; zmq: number; other: number } {
  const t = { main: 0, zmq: 0, other: 0 };
  for (const [tid, a] of after) {
    const d = a.ms - (before.get(tid)?.ms ?? 0);
    if (a.name.startsWith('v8:ProfEvnt')) continue;
    if (tid === String(pid)) t.main += d;
    else if (a.name.startsWith('ZMQ')) t.zmq += d;
    else t.other += d;
  }
  return t;
}

export const r3 = (x: number) => Math.round(x * 1000) / 1000;

/**
 * A load phase's "CPU per request, whole process" row: the threads' CPU ms (`byThread`) over
 * `requests`, with the load's throughput and errors, then `extra` (GC pauses, dispatch times...).
 */
export function processRow(
  name: string,
  t: { main: number; zmq: number; other: number },
  requests: number,
  r: LoadResult,
  extra: Record<string, unknown>,
): Row {
  return {
    name,
    value: r3((t.main + t.zmq + t.other) / requests),
    unit: 'ms',
    extra: {
      throughput_rps: Math.round(r.rps),
      errors: r.errors,
      requests,
      main_thread_ms: r3(t.main / requests),
      zmq_io_thread_ms: r3(t.zmq / requests),
      other_threads_ms: r3(t.other / requests),
      ...extra,
    },
  };
}
export const monoUs = (): number => Number(process.hrtime.bigint() / 1000n);

/** What a load client reports at its end (`apps/frontend/src/bench/load.ts`). */
export interface LoadResult {
  sent: number;
  rps: number;
  errors: number;
  dispatch?: { p50: number; p99: number };
}

/**
 * The bench server (frontend + mocker process, Qwen3 from the cards, fastokens) under `--cpu-prof`
 * into `profDir`; `load` runs one load client against it (`onOpened`: called when the client says
 * every session's opening turn is answered, `openedLine`), `stats` asks the server for its CPU and GC.
 */
export async function profiledServer(profDir: string): Promise<{
  server: ChildProcess;
  exited: Promise<void>;
  stats: () => Promise<{ cpuMs: number; gcMs: number }>;
  load: (o: Record<string, unknown>, onOpened?: () => void) => Promise<LoadResult>;
}> {
  const server = spawn(
    process.execPath,
    [
      ...['--cpu-prof', `--cpu-prof-dir=${profDir}`],
      ...['--conditions=source', '--import', 'tsx', bench('server.ts')],
      ...['--router-mode', 'kv', '--tokenizer', 'fastokens', '--router-event-threads', '1'],
    ],
    {
      stdio: ['pipe', 'pipe', 'inherit'],
      env: { ...process.env, BENCH_MODEL_PATH: tokenizerPackageDir('qwen3') },
    },
  );
  const exited = new Promise<void>((r) => server.once('exit', () => r()));
  const next = lines(server);
  const stats = async (): Promise<{ cpuMs: number; gcMs: number }> => {
    server.stdin!.write('eld\n');
    return JSON.parse(await next()) as { cpuMs: number; gcMs: number };
  };
  let ready: { frontend: string; model: string };
  try {
    ready = JSON.parse(await next()) as { frontend: string; model: string };
  } catch (e) {
    server.kill('SIGTERM');
    throw e;
  }
  const load = async (o: Record<string, unknown>, onOpened?: () => void): Promise<LoadResult> => {
    const c = spawn(
      process.execPath,
      [
        ...['--conditions=source', '--import', 'tsx', bench('load.ts')],
        ...[ready.frontend, ready.model, JSON.stringify({ ...o, openedLine: onOpened !== undefined })],
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const out = lines(c);
    if (onOpened) {
      await out();
      onOpened();
    }
    return JSON.parse(await out()) as LoadResult;
  };
  return { server, exited, stats, load };
}

/** The main thread's profile of process `pid` in `profDir` (`--cpu-prof` names it CPU.<date>.<time>.<pid>.0.…). */
export function mainProfile(profDir: string, pid: number, suite: string): { file: string; prof: Profile } {
  const file = fs.readdirSync(profDir).find((f) => new RegExp(`^CPU\\.\\d+\\.\\d+\\.${pid}\\.0\\.`).test(f));
  if (!file) throw new Error(`${suite}: no main-thread profile in ${profDir}`);
  return { file, prof: JSON.parse(fs.readFileSync(path.join(profDir, file), 'utf8')) as Profile };
}

/** One row per stage: the main thread's CPU per request (`mainPerReq`) split in proportion to the stages' samples. */
export function stageRows(busy: Map<string, number>, mainPerReq: number): Row[] {
  const busyUs = [...busy.values()].reduce((a, b) => a + b, 0);
  return [...busy]
    .sort((a, b) => b[1] - a[1])
    .map(([stage, us]) => ({
      name: `main thread: ${stage}`,
      value: r3((us / busyUs) * mainPerReq),
      unit: 'ms/req',
      extra: { share: `${((100 * us) / busyUs).toFixed(1)} %` },
    }));
}

export const suite: Suite = {
  name: 'frontend-stages',
  description:
    'CPU ms per request by stage and thread: ~8k-token chats, Qwen3 tokenizer from the cards, 300 req/s (server under --cpu-prof)',
  async run(ctx) {
    if (!fs.existsSync('/proc/self/task')) return [];
    const RATE = 300;
    const sessions = 64;
    const profDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvr-stages-'));
    let server: ChildProcess | undefined;
    try {
      const srv = await profiledServer(profDir);
      server = srv.server;
      const { exited, stats, load } = srv;
      const o = corpusLoadOptions(ctx.quick, 'chat', sessions);
      // Warm-up long enough for V8 to finish optimizing (TurboFan compiling on its helper threads was
      // 13-15 % of the process's CPU over the first ~20 s of this load and < 1 % after 30 s), with
      // prompts of its own seed: each phase below sends text no earlier phase sent (a repeated
      // prompt is a whole-prompt prefix-cache hit, which no real conversation is).
      ctx.progress('warm-up', 0, 1);
      await load({ ...o, seconds: ctx.quick ? 2 : WARMUP_S, warmupS: 0, seed: 1 });
      ctx.progress(`${RATE} req/s under --cpu-prof`, 0, 1);
      await stats();
      const before = threadCpu(server.pid!);
      const t0 = monoUs();
      const r = await load({ ...o, rate: RATE, seed: 2 });
      const t1 = monoUs();
      const after = threadCpu(server.pid!);
      const s = await stats();
      ctx.progress(`${RATE} req/s under --cpu-prof`, 1, 1);
      // The same requests without queueing (closed loop, 4 clients): the per-request cost where the
      // machine cannot give the server what 300 req/s needs (a backlog's requests cost more: their
      // data lives long enough to be promoted).
      ctx.progress('closed loop, 4 clients', 0, 1);
      const cBefore = threadCpu(server.pid!);
      const rc = await load({ ...o, concurrency: 4, seed: 3 });
      const cAfter = threadCpu(server.pid!);
      const sc = await stats();
      ctx.progress('closed loop, 4 clients', 1, 1);
      server.kill('SIGTERM');
      await exited;
      // Every request of the phase: the measured ones and each session's opening turn before them.
      const requests = r.sent + sessions;
      const threads = byThread(server.pid!, before, after);
      const closed = byThread(server.pid!, cBefore, cAfter);
      const cRequests = rc.sent + sessions;
      const { prof } = mainProfile(profDir, server.pid!, 'frontend-stages');
      const busy = stagesOf(prof, t0, t1);
      busy.delete('idle');
      const mainPerReq = threads.main / requests;
      const rows: Row[] = [
        processRow(
          `frontend @${RATE}/s, Qwen3 corpus chats: CPU per request, whole process`,
          threads,
          requests,
          r,
          {
            gc_pauses_ms_per_req: r3(s.gcMs / requests),
            load_avg: os.loadavg()[0]!.toFixed(2),
          },
        ),
        processRow(
          'closed loop, 4 clients, same chats: CPU per request, whole process',
          closed,
          cRequests,
          rc,
          {
            gc_pauses_ms_per_req: r3(sc.gcMs / cRequests),
          },
        ),
      ];
      rows.push(...stageRows(busy, mainPerReq));
      // Node names none of these threads, so they are one figure (their profiles count wall time).
      rows.push({
        name: 'other threads: tokenizer thread, V8 GC/JIT helpers, libuv pool',
        value: r3(threads.other / requests),
        unit: 'ms/req',
      });
      rows.push({ name: 'ZMQ I/O thread (KV events in)', value: r3(threads.zmq / requests), unit: 'ms/req' });
      return rows;
    } finally {
      server?.kill('SIGTERM');
      fs.rmSync(profDir, { recursive: true, force: true });
    }
  },
};
