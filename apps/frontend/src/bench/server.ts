/**
 * Benchmark server process: the frontend, and beside it a plain express reverse proxy (JSON body →
 * ChatML → tokens, round robin, SSE back; no KV routing, no caches, no metrics) as the baseline,
 * both over the very same fast simulated engines. Prints one JSON line `{"frontend", "proxy",
 * "model"}` when both listen. Flags after the script name go to the frontend.
 *
 * Engines (`BENCH_ENGINES`): `process` (default) = one mocker process (`apps/mocker`, 4 workers)
 * beside this one, file discovery, tcp request plane, zmq KV events, as deployed; `embedded` = the
 * frontend's own in-process simulated workers (inproc planes), which then share this process's
 * event loop with the frontend. `BENCH_ENGINE_SPEEDUP` (default 1000) speeds up prefill.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { PerformanceObserver, constants, monitorEventLoopDelay } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import * as cl100k from 'gpt-tokenizer/encoding/cl100k_base';
import '../http/cjs-interop.js';
import express from 'express';
import { resolveConfig } from '@kvrouter/config';
import {
  InprocRequestClient,
  TcpRequestClient,
  defaultInprocHub,
  type RequestClient,
  type Transport,
} from '@kvrouter/runtime';
import type { GenerateItem } from '@kvrouter/protocols';
import { Frontend } from '../frontend.js';
import { ChatMlTemplate } from '../tokenizer/template.js';
import { TiktokenTokenizer } from '../tokenizer/tiktoken.js';

const speedup = process.env.BENCH_ENGINE_SPEEDUP ?? '1000';
const engines = process.env.BENCH_ENGINES ?? 'process';
if (engines !== 'process' && engines !== 'embedded')
  throw new Error(`BENCH_ENGINES: expected process or embedded, got ${engines}`);
const NUM_ENGINES = 4;
const log = {
  info: () => undefined,
  warn: (m: string) => console.error(m),
  error: (m: string) => console.error(m),
};

let mocker: ChildProcess | null = null;
let stopping = false;
let fileKv: string | null = null;
const cleanupFiles = () => {
  mocker?.kill('SIGKILL');
  if (fileKv) fs.rmSync(fileKv, { recursive: true, force: true });
};
process.on('exit', cleanupFiles);

let fe: Frontend;
if (engines === 'process') {
  fileKv = fs.mkdtempSync(path.join(os.tmpdir(), 'kvr-bench-fkv-'));
  const repo = fileURLToPath(new URL('../../../../', import.meta.url));
  mocker = spawn(
    process.execPath,
    [
      '--conditions=source',
      '--import',
      'tsx',
      path.join(repo, 'apps/mocker/src/main.ts'),
      // BENCH_MODEL_PATH: a model directory whose tokenizer the engines' cards carry to the frontend.
      ...['--model-path', process.env.BENCH_MODEL_PATH ?? 'mock-model'],
      ...['--num-workers', String(NUM_ENGINES), '--block-size', '64'],
      ...['--speedup-ratio', speedup, '--decode-speedup-ratio', '1'],
      ...['--discovery-backend', 'file', '--request-plane', 'tcp', '--event-plane', 'zmq'],
    ],
    {
      env: { ...process.env, DYN_FILE_KV: fileKv, DYN_TCP_RPC_PORT: '' },
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  );
  mocker.once('exit', (code, sig) => {
    if (!stopping) {
      console.error(`bench: mocker exited (${code ?? sig})`);
      process.exit(1);
    }
  });
  const argv = [
    '--http-host',
    '127.0.0.1',
    '--http-port',
    '0',
    '--discovery-backend',
    'file',
    '--request-plane',
    'tcp',
    '--event-plane',
    'zmq',
  ];
  const { config } = resolveConfig('frontend', [...argv, ...process.argv.slice(2)], { DYN_FILE_KV: fileKv });
  fe = await Frontend.start(config, { log });
} else {
  const { config } = resolveConfig(
    'frontend',
    ['--http-host', '127.0.0.1', '--http-port', '0', ...process.argv.slice(2)],
    {},
  );
  fe = await Frontend.start(config, {
    log,
    embedded: { engine: { speedupRatio: Number(speedup), decodeSpeedupRatio: 1 }, defaultMaxTokens: 16 },
  });
}
// Every engine routable before any load.
for (
  const end = performance.now() + 60_000;
  !fe.registry.allSets().some((s) => s.readyCount === NUM_ENGINES);
) {
  if (performance.now() > end) throw new Error(`bench: ${NUM_ENGINES} engines did not register within 60 s`);
  await new Promise((r) => setTimeout(r, 50));
}
const set = fe.registry.allSets().find((s) => s.readyCount === NUM_ENGINES)!;
const transports: Transport[] = [...set.workers.keys()].map((id) => set.transportOf(id)!);
const client: RequestClient =
  engines === 'process' ? new TcpRequestClient() : new InprocRequestClient(defaultInprocHub());
const tok = new TiktokenTokenizer();
const template = new ChatMlTemplate();
let rr = 0;
let seq = 0;
const app = express();
app.disable('x-powered-by');
app.post('/v1/chat/completions', express.json({ limit: '192mb' }), (req, res, next) => {
  void (async () => {
    const t0 = performance.now();
    const b = req.body as {
      model: string;
      messages: { role: 'user'; content: string }[];
      max_tokens?: number;
    };
    const ids = Uint32Array.from(tok.encode(template.render(b.messages, { addGenerationPrompt: true })));
    const transport = transports[rr++ % transports.length]!;
    const id = `p-${++seq}`;
    const dispatched = performance.now();
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    let n = 0;
    for await (const item of client.stream<GenerateItem>(transport, 'generate', {
      request_id: id,
      model: b.model,
      token_ids: ids,
      stop_conditions: { max_tokens: b.max_tokens ?? 16 },
    })) {
      n += item.token_ids.length;
      res.write(
        `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: cl100k.decode(item.token_ids) }, finish_reason: item.finish_reason ?? null }] })}\n\n`,
      );
    }
    const end = performance.now();
    res.write(
      `data: ${JSON.stringify({ id, choices: [], usage: { prompt_tokens: ids.length, completion_tokens: n }, nvext: { timing: { dispatch_ms: dispatched - t0, engine_ms: end - dispatched } } })}\n\n`,
    );
    res.end('data: [DONE]\n\n');
  })().catch(next);
});
const proxy = http.createServer(app);
proxy.keepAliveTimeout = 65_000;
await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
const port = (proxy.address() as AddressInfo).port;
console.log(
  JSON.stringify({ frontend: fe.url, proxy: `http://127.0.0.1:${port}`, model: fe.registry.list()[0]!.id }),
);

// Control on stdin, one line per command, answered by one JSON line: `eld` = this process's
// event-loop delay (ms percentiles) and GC pauses since the previous `eld`, then reset.
const eld = monitorEventLoopDelay({ resolution: 1 });
eld.enable();
let gcMs = 0;
let gcMax = 0;
/**
 * CPU ms of the main thread alone (the event loop, with the GC work it does itself): the first field
 * of /proc/self/task/<pid>/schedstat (ns on a CPU); NaN where /proc is missing.
 */
const loopCpu = (): number => {
  try {
    return Number(fs.readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]) / 1e6;
  } catch {
    return NaN;
  }
};
let loop = loopCpu();
let cpu = process.cpuUsage();
let wall = performance.now();
/** Per GC kind (minor = scavenge, major = mark-compact, incremental marking, weak callbacks): count, ms, max ms. */
const gcKinds = new Map<string, { n: number; ms: number; max: number }>();
const GC_KIND: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb',
};
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    gcMs += e.duration;
    gcMax = Math.max(gcMax, e.duration);
    const kind = GC_KIND[(e as { detail?: { kind?: number } }).detail?.kind ?? -1] ?? 'other';
    const k = gcKinds.get(kind) ?? { n: 0, ms: 0, max: 0 };
    k.n++;
    k.ms += e.duration;
    k.max = Math.max(k.max, e.duration);
    gcKinds.set(kind, k);
  }
}).observe({ entryTypes: ['gc'] });
createInterface({ input: process.stdin }).on('line', (line) => {
  if (line.trim() !== 'eld') return;
  const q = (p: number) => Math.round(eld.percentile(p) / 1e3) / 1e3;
  const c = process.cpuUsage(cpu);
  const now = performance.now();
  console.log(
    JSON.stringify({
      p50: q(50),
      p99: q(99),
      max: Math.round(eld.max / 1e3) / 1e3,
      gcMs: Math.round(gcMs),
      gcMaxMs: Math.round(gcMax * 10) / 10,
      gc: Object.fromEntries(
        [...gcKinds].map(([k, v]) => [
          k,
          { n: v.n, ms: Math.round(v.ms), maxMs: Math.round(v.max * 10) / 10 },
        ]),
      ),
      // Memory now: V8 heap used and ArrayBuffer / Buffer memory outside it (MB).
      heapMb: Math.round(process.memoryUsage().heapUsed / 1e6),
      externalMb: Math.round(process.memoryUsage().external / 1e6),
      // CPU of the whole process (all threads, the mocker child not included) over the interval.
      cpuMs: Math.round((c.user + c.system) / 1e3),
      cores: Math.round(((c.user + c.system) / 1e3 / (now - wall)) * 100) / 100,
      // The main thread's share (tokenizer threads, GC helpers and libuv's pool excluded).
      loopCpuMs: Math.round(loopCpu() - loop),
    }),
  );
  loop = loopCpu();
  cpu = process.cpuUsage();
  wall = now;
  eld.reset();
  gcMs = 0;
  gcMax = 0;
  gcKinds.clear();
});

const stop = () => {
  stopping = true;
  // A benchmark server must never outlive its run, even with requests still open.
  setTimeout(() => process.exit(0), 5000).unref();
  proxy.close();
  mocker?.kill('SIGTERM');
  void fe.close(0).then(() => process.exit(0));
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
