/**
 * `pnpm bench frontend-agent-stages`: where the frontend's CPU goes per request of the issue-14
 * agent load (the load of `pnpm bench frontend-agent` with the defaults: Qwen3's tokenizer from the
 * engines' cards, `--tokenizer fastokens`, 32 agent sessions growing from 20k to 150k tokens by 2k
 * per turn, 50 req/s open loop, engines in a mocker process). Same method as `frontend-stages`: the
 * server runs with `--cpu-prof`, after a 25 s warm-up (seed 1) the load phase (seed 2) reads the
 * process's CPU per thread from /proc and splits the main thread's CPU by stage in proportion to
 * its profile samples. The split counts the turns after the sessions' opening ones: those open
 * every session cold at a staggered point (20k to 150k tokens, BPE-encoded on the tokenizer
 * thread), which a long-running server sees once per session at 20k tokens; the whole phase with
 * them is one row of its own. Beside the stages, the main thread's heaviest functions by self time
 * (the profile's leaf frames), so that a stage's cost can be traced to code, and the other threads'
 * CPU split into worker threads (busy time of their own profiles) and the rest (V8's GC and JIT
 * helper threads, libuv's pool: Node names none of them). Set `BENCH_KEEP_PROFILE=1` to keep the
 * .cpuprofile files (the path is printed on stderr).
 */
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Row, Suite } from '../harness.js';
import { AGENT_RUN, WARMUP_S, corpusLoadOptions } from './frontend.js';
import {
  byThread,
  mainProfile,
  monoUs,
  profiledServer,
  r3,
  stageRows,
  stagesOf,
  threadCpu,
  processRow,
  type Profile,
} from './frontend-stages.js';

/** Self µs per leaf function (`name url:line`) of the main thread's profile between `fromUs` and `toUs`. */
function selfTimes(p: Profile, fromUs: number, toUs: number): Map<string, number> {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const out = new Map<string, number>();
  let t = p.startTime;
  for (let i = 0; i < p.samples.length; i++) {
    t += p.timeDeltas[i] ?? 0;
    if (t < fromUs || t > toUs) continue;
    const f = byId.get(p.samples[i]!)!.callFrame as Profile['nodes'][number]['callFrame'] & {
      lineNumber?: number;
    };
    if (f.functionName === '(idle)') continue;
    const url = f.url.replace(/^.*\/(apps|packages|node_modules)\//, '$1/');
    const key = `${f.functionName || '(anonymous)'} ${url}${f.url ? `:${(f.lineNumber ?? 0) + 1}` : ''}`;
    out.set(key, (out.get(key) ?? 0) + (p.timeDeltas[i + 1] ?? 0));
  }
  return out;
}

export const suite: Suite = {
  name: 'frontend-agent-stages',
  description:
    'CPU ms per agent request by stage, thread and function: 20k → 150k-token agent sessions, Qwen3 tokenizer, 50 req/s (server under --cpu-prof)',
  async run(ctx) {
    if (!fs.existsSync('/proc/self/task')) return [];
    const sessions = AGENT_RUN.sessions;
    const profDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvr-agent-stages-'));
    const keep = process.env.BENCH_KEEP_PROFILE === '1';
    let server: ChildProcess | undefined;
    try {
      const srv = await profiledServer(profDir);
      server = srv.server;
      const { exited, stats, load } = srv;
      const o = corpusLoadOptions(ctx.quick, 'agent', sessions);
      ctx.progress('warm-up', 0, 1);
      await load({ ...o, seconds: ctx.quick ? 2 : WARMUP_S, warmupS: 0, seed: 1 });
      const label = `${AGENT_RUN.rate} req/s agent load under --cpu-prof`;
      ctx.progress(label, 0, 1);
      await stats();
      // The phase opens every session with a cold prompt (sessions start at staggered points from
      // 20k to 150k tokens, all BPE-encoded on the tokenizer thread); a long-running server sees
      // one cold 20k-token turn per session of ~65 turns. The split is of the turns after them.
      const pid = server.pid!;
      const beforeAll = threadCpu(pid);
      let before = beforeAll;
      let t0 = monoUs();
      const r = await load({ ...o, rate: AGENT_RUN.rate, seed: 2 }, () => {
        before = threadCpu(pid);
        t0 = monoUs();
      });
      const t1 = monoUs();
      const after = threadCpu(server.pid!);
      const s = await stats();
      ctx.progress(label, 1, 1);
      server.kill('SIGTERM');
      await exited;
      const requests = r.sent;
      const threads = byThread(server.pid!, before, after);
      const all = byThread(server.pid!, beforeAll, after);
      const { file: mainFile, prof } = mainProfile(profDir, server.pid!, 'frontend-agent-stages');
      if (keep) console.error(`frontend-agent-stages: profiles kept in ${profDir}`);
      const busy = stagesOf(prof, t0, t1);
      busy.delete('idle');
      const busyUs = [...busy.values()].reduce((a, b) => a + b, 0);
      const mainPerReq = threads.main / requests;
      const rows: Row[] = [
        processRow(
          `frontend @${AGENT_RUN.rate}/s, agent 20k-150k, turns after the sessions' opening ones: CPU per request, whole process`,
          threads,
          requests,
          r,
          {
            ...(r.dispatch ? { dispatch_p50_ms: r.dispatch.p50, dispatch_p99_ms: r.dispatch.p99 } : {}),
            load_avg: os.loadavg()[0]!.toFixed(2),
          },
        ),
        {
          name: 'the whole phase, its 32 cold opening turns (20k-150k tokens) included: CPU per request, whole process',
          value: r3((all.main + all.zmq + all.other) / (requests + sessions)),
          unit: 'ms',
          extra: {
            requests: requests + sessions,
            main_thread_ms: r3(all.main / (requests + sessions)),
            other_threads_ms: r3(all.other / (requests + sessions)),
            gc_pauses_ms_per_req: r3(s.gcMs / (requests + sessions)),
          },
        },
      ];
      rows.push(...stageRows(busy, mainPerReq));
      // Worker threads (tokenizer thread, KV-event threads) have profiles of their own: their busy
      // time in the window; the rest of the other threads' CPU is V8's GC/JIT helpers and libuv's pool.
      let workersUs = 0;
      const workerRows: Row[] = [];
      for (const f of fs.readdirSync(profDir).sort()) {
        if (f === mainFile || !f.includes(`.${server.pid}.`)) continue;
        const wp = JSON.parse(fs.readFileSync(path.join(profDir, f), 'utf8')) as Profile;
        const self = [...selfTimes(wp, t0, t1)].sort((a, b) => b[1] - a[1]);
        const us = self.reduce((a, [, v]) => a + v, 0);
        workersUs += us;
        if (us / 1000 / requests < 0.01) continue;
        workerRows.push({
          name: `  worker thread ${f.split('.')[4]}: ${self
            .slice(0, 2)
            .map(([fn]) => fn.split(' ')[0])
            .join(', ')}`,
          value: r3(us / 1000 / requests),
          unit: 'ms/req',
        });
      }
      const workersMs = Math.min(workersUs / 1000, threads.other);
      rows.push({
        name: 'other threads: worker threads (tokenizer, KV events), busy per their profiles',
        value: r3(workersMs / requests),
        unit: 'ms/req',
      });
      rows.push(...workerRows);
      rows.push({
        name: 'other threads: the rest (V8 GC/JIT helpers, libuv pool)',
        value: r3((threads.other - workersMs) / requests),
        unit: 'ms/req',
      });
      rows.push({ name: 'ZMQ I/O thread (KV events in)', value: r3(threads.zmq / requests), unit: 'ms/req' });
      const fns = [...selfTimes(prof, t0, t1)].sort((a, b) => b[1] - a[1]).slice(0, 25);
      for (const [fn, us] of fns)
        rows.push({
          name: `self time: ${fn}`,
          value: r3((us / busyUs) * mainPerReq),
          unit: 'ms/req',
          extra: { share: `${((100 * us) / busyUs).toFixed(1)} %` },
        });
      return rows;
    } finally {
      server?.kill('SIGTERM');
      if (!keep) fs.rmSync(profDir, { recursive: true, force: true });
    }
  },
};
