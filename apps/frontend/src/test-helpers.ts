/**
 * Shared by this app's tests (not exported): a frontend on a loopback port with its own discovery
 * store and in-process request plane, so tests never share workers.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import type { Browser } from 'playwright-core';
import { resolveConfig } from '@kvrouter/config';
import { InprocHub, MemDiscoveryHub } from '@kvrouter/runtime';
import { Rng, startEtcd, startMocker, startNats, type Proc, type ServiceHandle } from '@kvrouter/testkit';
import { Frontend, type EmbeddedOptions, type FrontendOptions } from './frontend.js';
import type { Logger, WorkerSet } from './models.js';

const quietLog: Logger & { lines: string[] } = {
  lines: [],
  info(m) {
    this.lines.push(`info ${m}`);
  },
  warn(m) {
    this.lines.push(`warn ${m}`);
  },
  error(m) {
    this.lines.push(`error ${m}`);
  },
};

export interface TestFrontendOptions extends Omit<FrontendOptions, 'embedded'> {
  env?: Record<string, string>;
  embedded?: EmbeddedOptions;
}

/** Simulated engines 20x faster than the §17 timing model (a few ms per pass). */
const FAST_ENGINE = { speedupRatio: 20, numGpuBlocks: 4096, blockSize: 16 };

export async function startFrontend(argv: string[] = [], o: TestFrontendOptions = {}): Promise<Frontend> {
  const { config } = resolveConfig(
    'frontend',
    ['--http-host', '127.0.0.1', '--http-port', '0', ...argv],
    o.env ?? {},
  );
  return Frontend.start(config, {
    log: o.log ?? quietLog,
    memHub: o.memHub ?? new MemDiscoveryHub(),
    inprocHub: o.inprocHub ?? new InprocHub(),
    tokenizerThreads: o.tokenizerThreads ?? 0,
    embedded: { ...o.embedded, engine: { ...FAST_ENGINE, ...o.embedded?.engine } },
    ...(o.noHttp ? { noHttp: true } : {}),
  });
}

const CHROMIUM = '/usr/bin/chromium';

/**
 * Debian's Chromium through playwright-core (no browser download), headless, with nothing that
 * reaches the network by itself; pages are tested against the frontend on loopback.
 */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM))
    throw new Error(`${CHROMIUM} is missing: run \`node tools/services.mjs install\``);
  const { chromium } = await import('playwright-core');
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/** Polls until `cond` holds (state that settles through the event loop), failing after `ms`. */
export async function eventually(cond: () => boolean, ms = 5000, what = 'condition'): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** A logger that keeps its lines (`info` lines as is, `warn ` / `error ` prefixed) for assertions. */
export function captureLog(): Logger & { lines: string[] } {
  const lines: string[] = [];
  return {
    lines,
    info: (m) => void lines.push(m),
    warn: (m) => void lines.push(`warn ${m}`),
    error: (m) => void lines.push(`error ${m}`),
  };
}

/** The frontend's first worker set once `n` of its workers are routable (workers in other processes register late). */
export async function readySet(fe: Frontend, n: number, ms = 30_000): Promise<WorkerSet> {
  let set: WorkerSet | undefined;
  await eventually(
    () => {
      set = fe.registry.allSets()[0];
      return set !== undefined && set.readyCount === n;
    },
    ms,
    `${n} routable workers`,
  );
  return set!;
}

/**
 * etcd + nats-server, a mocker process with two workers, and two frontends in this process with
 * `--router-replica-sync` (kv mode, each its own lease and so its own router id). `close` stops
 * whatever `nats` holds then (a test may restart it).
 */
export interface ReplicaPair {
  etcd: ServiceHandle;
  nats: ServiceHandle;
  mocker: Proc;
  a: Frontend;
  b: Frontend;
  close(): Promise<void>;
}

export async function startReplicaPair(ns: string): Promise<ReplicaPair> {
  const [etcd, nats] = await Promise.all([startEtcd(), startNats({ jetstream: false })]);
  const mocker = startMocker({ etcd: etcd.url, nats: nats.url }, ns, 2);
  const argv = [
    ...['--discovery-backend', 'etcd', '--event-plane', 'nats', '--namespace', ns],
    ...['--router-mode', 'kv', '--router-replica-sync', '--router-event-threads', '1'],
  ];
  const env = { ETCD_ENDPOINTS: etcd.url, NATS_SERVER: nats.url };
  const [a, b] = await Promise.all([startFrontend(argv, { env }), startFrontend(argv, { env })]);
  const pair: ReplicaPair = {
    etcd,
    nats,
    mocker,
    a,
    b,
    close: async () => {
      await Promise.all([a.close(0), b.close(0)]);
      await mocker.kill();
      await Promise.all([etcd.stop(), pair.nats.stop()]);
    },
  };
  return pair;
}

/** Every rank of every worker of every model: no requests, no prefill tokens, no blocks, nothing in flight. */
export function routerIdle(fe: Frontend): boolean {
  for (const s of fe.registry.allSets()) {
    if (s.router.liveRequestCount !== 0 || s.router.activeRequestCount !== 0) return false;
    for (const w of s.workers.values()) {
      if (s.router.inflight(w.id) !== 0) return false;
      const l = s.router.rankLoad({ worker_id: w.id, dp_rank: 0 });
      if (l.active_requests !== 0 || l.active_prefill_tokens !== 0 || l.active_decode_blocks !== 0)
        return false;
    }
  }
  return true;
}

const NO_TOTAL = 'counter metrics should have "_total" suffix';
const ABBREV = 'metric names should not contain abbreviated units';
/** promtool lint findings caused by names PROTOCOL §16 fixes (Dynamo compatibility); nothing else is accepted. */
const ALLOWED_LINT = new Set([
  `dynamo_component_kv_cache_events_applied ${NO_TOTAL}`,
  `dynamo_frontend_disconnected_clients ${NO_TOTAL}`,
  `dynamo_frontend_tokenizer_latency_ms ${ABBREV}`,
  ...['block_hashing', 'seq_hashing', 'indexer_find_matches', 'scheduling', 'total'].map(
    (p) => `dynamo_router_overhead_${p}_ms ${ABBREV}`,
  ),
]);

/**
 * `promtool check metrics` on an exposition (promtool comes from `node tools/services.mjs install`).
 * Returns what is wrong: a parse failure, or lint findings other than the §16-mandated names.
 */
export function promtoolProblems(text: string): string[] {
  const r = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8', timeout: 30_000 });
  if (r.error) return [`promtool not runnable (${r.error.message}); run node tools/services.mjs install`];
  const findings = `${r.stdout}${r.stderr}`
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
  // 0 = clean, 3 = lint findings only; anything else is a parse error.
  if (r.status !== 0 && r.status !== 3) return [`promtool exit ${r.status}: ${findings.join('; ')}`];
  return findings.filter((f) => !ALLOWED_LINT.has(f));
}

/** Reads a streaming response body as text pieces. */
export function bodyReader(r: Response): { read(): Promise<string | null>; cancel(): Promise<void> } {
  const reader = (
    r.body as unknown as {
      getReader(): { read(): Promise<{ done: boolean; value?: Uint8Array }>; cancel(): Promise<void> };
    }
  ).getReader();
  const dec = new TextDecoder();
  return {
    async read() {
      const x = await reader.read();
      return x.done ? null : dec.decode(x.value, { stream: true });
    },
    cancel: () => reader.cancel(),
  };
}

const WORDS = ['the', ' cat', ' sat', ' on', ' über', ' 日本語', ' mat', '\n', ' tokenizer', ' 42'];

/** About `chars` characters of seeded text from a small mixed-script word list (tokenizer tests). */
export function wordText(seed: number, chars: number): string {
  const rng = new Rng(seed);
  const parts: string[] = [];
  let n = 0;
  while (n < chars) {
    const w = rng.pick(WORDS);
    parts.push(w);
    n += w.length;
  }
  return parts.join('');
}
