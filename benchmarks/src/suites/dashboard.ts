/**
 * `pnpm bench dashboard`: what `/dashboard` costs the frontend. The frontend bench server
 * (apps/frontend/src/bench/server.ts: the frontend with a mocker process of 4 fast engines) takes
 * ~8k-token chat requests at a fixed 300 req/s (open loop) in alternating phases without and with a
 * dashboard viewer (an SSE client on `/dashboard/events`, which is what the page opens; the
 * snapshot is built once per tick whatever the number of viewers), then once more with the
 * server started with `--dashboard off`. Figure: the server process's CPU ms per request in each
 * phase (all its threads; the mocker process excluded) and the viewer phases' difference, and the
 * wall time of each snapshot tick as the server reports it in the frames (`tick_ms`).
 */
import http from 'node:http';
import type { Row, Suite } from '../harness.js';
import { lines, tsNode } from './frontend.js';

interface ServerStats {
  cpuMs: number;
  cores: number;
  p99: number;
}
interface LoadResult {
  rps: number;
  errors: number;
  sent: number;
}

/** An SSE viewer of `/dashboard/events`: counts frames and bytes, keeps each frame's `tick_ms`. */
function viewer(base: string): {
  frames: () => number;
  bytes: () => number;
  ticks: number[];
  close: () => void;
} {
  let frames = 0;
  let bytes = 0;
  let buf = '';
  const ticks: number[] = [];
  const req = http.get(`${base}/dashboard/events`, (res) => {
    res.setEncoding('utf8');
    res.on('data', (d: string) => {
      bytes += d.length;
      buf += d;
      let end;
      while ((end = buf.indexOf('\n\n')) >= 0) {
        const ev = buf.slice(0, end);
        buf = buf.slice(end + 2);
        if (!ev.startsWith('data: ')) continue;
        frames++;
        const t = (JSON.parse(ev.slice(6)) as { tick_ms: number | null }).tick_ms;
        if (t !== null) ticks.push(t);
      }
    });
  });
  req.on('error', () => undefined);
  return { frames: () => frames, bytes: () => bytes, ticks, close: () => req.destroy() };
}

const median = (a: number[]): number => {
  const s = [...a].sort((x, y) => x - y);
  return s.length === 0 ? NaN : s[Math.floor(s.length / 2)];
};

const r2 = (x: number) => Math.round(x * 100) / 100;
const RATE = 300;

async function server(flags: string[]) {
  const s = tsNode(
    'server.ts',
    ['--router-mode', 'kv', '--tokenizer', 'fastokens', '--router-event-threads', '1', ...flags],
    'pipe',
  );
  const next = lines(s);
  const { frontend, model } = JSON.parse(await next()) as { frontend: string; model: string };
  const stats = async (): Promise<ServerStats> => {
    s.stdin!.write('eld\n');
    return JSON.parse(await next()) as ServerStats;
  };
  const phase = async (seconds: number, warmupS: number): Promise<[LoadResult, ServerStats]> => {
    await stats();
    const c = tsNode('load.ts', [
      frontend,
      model,
      JSON.stringify({ concurrency: 32, seconds, warmupS, maxTokens: 8, sessions: 64, rate: RATE }),
    ]);
    const r = JSON.parse(await lines(c)()) as LoadResult;
    return [r, await stats()];
  };
  return { frontend, phase, kill: () => s.kill('SIGTERM') };
}

export const suite: Suite = {
  name: 'dashboard',
  description: `CPU per request of the frontend at ${RATE} req/s with and without a /dashboard viewer, and with --dashboard off`,
  async run(ctx) {
    const seconds = ctx.quick ? 4 : 12;
    const rows: Row[] = [];
    const row = (name: string, r: LoadResult, s: ServerStats, extra: Record<string, number> = {}) => {
      const perReq = s.cpuMs / Math.max(1, r.sent);
      rows.push({
        name,
        value: r2(perReq),
        unit: 'CPU ms/req',
        extra: { req_s: r2(r.rps), errors: r.errors, cores: s.cores, eld_p99_ms: s.p99, ...extra },
      });
      return perReq;
    };
    const on = await server([]);
    const idle: number[] = [];
    const watched: number[] = [];
    const tickMs: number[] = [];
    try {
      ctx.progress('warm-up', 0, 1);
      await on.phase(3, 0);
      for (let i = 0; i < 2; i++) {
        ctx.progress(`no viewer ${i + 1}`, 0, 1);
        const [r0, s0] = await on.phase(seconds, 1);
        idle.push(row(`--dashboard auto, no viewer (${i + 1})`, r0, s0));
        ctx.progress(`one viewer ${i + 1}`, 0, 1);
        const v = viewer(on.frontend);
        const [r1, s1] = await on.phase(seconds, 1);
        v.close();
        watched.push(
          row(`--dashboard auto, one viewer (${i + 1})`, r1, s1, {
            frames: v.frames(),
            kb_per_frame: r2(v.bytes() / 1024 / Math.max(1, v.frames())),
            tick_ms_p50: r2(median(v.ticks)),
            tick_ms_max: r2(Math.max(...v.ticks)),
          }),
        );
        tickMs.push(...v.ticks);
      }
    } finally {
      on.kill();
    }
    const off = await server(['--dashboard', 'off']);
    try {
      ctx.progress('--dashboard off', 0, 1);
      await off.phase(3, 0);
      const [r, s] = await off.phase(seconds, 1);
      row('--dashboard off', r, s);
    } finally {
      off.kill();
    }
    const mean = (a: number[]) => a.reduce((x, y) => x + y, 0) / a.length;
    // The page's own work, measured inside the server: one tick per second, whatever the request rate.
    rows.push({
      name: 'snapshot tick (build + serialise + write), per second',
      value: r2(median(tickMs)),
      unit: 'ms p50',
      extra: {
        max: r2(Math.max(...tickMs)),
        ticks: tickMs.length,
        per_request_at_rate_us: r2((median(tickMs) * 1000) / RATE),
      },
    });
    rows.push({
      name: 'one viewer − no viewer (mean of the pairs)',
      value: r2(mean(watched) - mean(idle)),
      unit: 'CPU ms/req',
      extra: { per_second_at_rate_ms: r2((mean(watched) - mean(idle)) * RATE) },
    });
    return rows;
  },
};
