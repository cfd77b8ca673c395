/**
 * Benchmark client process: closed-loop load of multi-turn chat completions against one URL.
 * Usage: `load.ts <url> <model> '<json options>'`; prints one JSON line with per-request samples'
 * percentiles. The server's own timings come back in the responses' `nvext.timing`.
 */
import fs from 'node:fs';
import http from 'node:http';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { AgentWorkload, SessionWorkload } from '@kvrouter/testkit';

/** node:http with keep-alive: far less client CPU per request than fetch's web streams. */
const agent = new http.Agent({ keepAlive: true, maxSockets: 1024 });

function postText(url: string, body: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (d: Buffer) => parts.push(d));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, text: Buffer.concat(parts).toString('utf8') }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

export interface LoadOptions {
  /** Closed loop: this many clients, each sending its next request when the last one ended. */
  concurrency: number;
  /** Open loop instead: requests started at this fixed rate (req/s), however many are in flight. */
  rate?: number;
  seconds: number;
  warmupS: number;
  maxTokens: number;
  sessions: number;
  /** Scrape `${url}/metrics` halfway through and return it. */
  scrape?: boolean;
  /** A text file of real-world text for the prompts (default: the word-list workload). */
  corpusFile?: string | null;
  /** Characters per token of that text for the model's tokenizer. */
  charsPerToken?: number;
  /** `agent`: agent sessions growing from 20k to 150k tokens by 2k per turn (default `chat`: ~8k-token chats). */
  workload?: 'chat' | 'agent';
  /** Seed of the prompts' text (default 7): a phase with a seed of its own sends no prompt an earlier phase sent. */
  seed?: number;
  /**
   * Print `{"opened":true}` on stdout once every session's opening turn is answered, before the
   * result line: a caller can start its own measurement there (steady-state turns only).
   */
  openedLine?: boolean;
}

interface Sample {
  e2eMs: number;
  dispatchMs: number;
  engineMs: number;
  promptTokens: number;
}

async function one(url: string, model: string, messages: unknown, maxTokens: number): Promise<Sample> {
  const t0 = performance.now();
  const r = await postText(
    `${url}/v1/chat/completions`,
    JSON.stringify({
      model,
      messages,
      max_tokens: maxTokens,
      stream: true,
      stream_options: { include_usage: true },
      nvext: { extra_fields: ['timing'] },
    }),
  );
  const text = r.text;
  const e2eMs = performance.now() - t0;
  if (r.status !== 200) throw new Error(`HTTP ${r.status}: ${text.slice(0, 200)}`);
  let timing: { dispatch_ms: number; engine_ms: number } | null = null;
  let promptTokens = 0;
  for (const ev of text.split('\n\n')) {
    if (!ev.startsWith('data: {')) continue;
    const c = JSON.parse(ev.slice(6)) as {
      nvext?: { timing?: { dispatch_ms: number; engine_ms: number } };
      usage?: { prompt_tokens: number } | null;
    };
    if (c.nvext?.timing) timing = c.nvext.timing;
    if (c.usage) promptTokens = c.usage.prompt_tokens;
  }
  if (!timing) throw new Error('no nvext.timing in the response');
  return { e2eMs, dispatchMs: timing.dispatch_ms, engineMs: timing.engine_ms, promptTokens };
}

function pct(v: number[]): { p50: number; p90: number; p99: number; max: number } {
  const s = Float64Array.from(v).sort();
  const at = (q: number) => (s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.floor(q * s.length))]!);
  return { p50: at(0.5), p90: at(0.9), p99: at(0.99), max: at(1) };
}

export async function runLoad(url: string, model: string, o: LoadOptions) {
  const text = {
    seed: o.seed ?? 7,
    corpus: o.corpusFile ? fs.readFileSync(o.corpusFile, 'utf8') : null,
    ...(o.charsPerToken ? { charsPerToken: o.charsPerToken } : {}),
  };
  const wl =
    o.workload === 'agent'
      ? new AgentWorkload({ sessions: o.sessions, ...text })
      : new SessionWorkload({ sessions: o.sessions, turns: 16, ...text });
  // Every session's opening turn (a fresh ~8k-token context) first, four at a time and unmeasured:
  // the measured phase then sees the steady mix, where one request in 16 starts a new session.
  for (let i = 0; i < o.sessions; i += 4)
    await Promise.all(
      Array.from({ length: Math.min(4, o.sessions - i) }, () =>
        one(url, model, wl.take().messages, o.maxTokens).catch(() => undefined),
      ),
    );
  if (o.openedLine) console.log(JSON.stringify({ opened: true }));
  // The client's own event-loop delay: end-to-end figures include it, so a tail here is not the server's.
  const eld = monitorEventLoopDelay({ resolution: 1 });
  const start = performance.now();
  eld.enable();
  let sent = 0;
  const measureFrom = start + o.warmupS * 1000;
  const end = measureFrom + o.seconds * 1000;
  const samples: Sample[] = [];
  let errors = 0;
  let firstError = '';
  let metrics: string | null = null;
  const send = async (): Promise<void> => {
    const turn = wl.take();
    const t = performance.now();
    sent++;
    try {
      const s = await one(url, model, turn.messages, o.maxTokens);
      if (t >= measureFrom && t <= end) samples.push(s);
    } catch (e) {
      errors++;
      firstError ||= (e as Error).message;
    }
  };
  const users: Promise<void>[] = [];
  if (o.rate) {
    // Open loop: start times are fixed in advance, so a slow response never delays the next arrival.
    const gap = 1000 / o.rate;
    users.push(
      (async () => {
        const inflight: Promise<void>[] = [];
        for (let k = 0; start + k * gap < end; k++) {
          const due = start + k * gap;
          const wait = due - performance.now();
          if (wait > 1) await new Promise((r) => setTimeout(r, wait));
          inflight.push(send());
        }
        await Promise.all(inflight);
      })(),
    );
  } else
    for (let i = 0; i < o.concurrency; i++)
      users.push(
        (async () => {
          while (performance.now() < end) await send();
        })(),
      );
  const scrape = o.scrape
    ? (async () => {
        await new Promise((r) => setTimeout(r, o.warmupS * 1000 + (o.seconds * 1000) / 2));
        metrics = await (await fetch(`${url}/metrics`)).text();
      })()
    : Promise.resolve();
  await Promise.all([...users, scrape]);
  eld.disable();
  return {
    /** Requests sent in the whole phase (warm-up seconds included), for per-request server CPU. */
    sent,
    clientEld: { p99: eld.percentile(99) / 1e6, max: eld.max / 1e6 },
    rps: samples.length / o.seconds,
    // Completions per second of the measured window (open loop: equals the offered rate when kept up).
    requests: samples.length,
    errors,
    firstError,
    isl: pct(samples.map((s) => s.promptTokens)),
    dispatch: pct(samples.map((s) => s.dispatchMs)),
    added: pct(samples.map((s) => s.e2eMs - s.engineMs)),
    e2e: pct(samples.map((s) => s.e2eMs)),
    metrics,
  };
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop()!)) {
  const [url, model, opts] = process.argv.slice(2);
  const r = await runLoad(url!, model!, JSON.parse(opts!) as LoadOptions);
  console.log(JSON.stringify(r));
}
