/**
 * The fleet `pnpm soak` and `faults` run, deployed as an operator would: real nats-server
 * (JetStream) and etcd, two mocker processes of 4 workers, the standalone router with
 * `--serve-indexer`, frontend A (its own index from KV events) and frontend B
 * (`--use-remote-indexer`), both with `--router-replica-sync`; the faults both inject; open-loop
 * chat traffic spread over both frontends (the soak's clients, `traffic.ts`); and what is left
 * once the fleet is idle.
 */
import {
  Rng,
  SessionWorkload,
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

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const now = () => performance.now() / 1000;

/** `--<name> <positive number>` of this process's command line, else `dflt`; anything else exits 2. */
export function numberArg(tool: string, name: string, dflt: number): number {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return dflt;
  const v = Number(process.argv[i + 1]);
  if (!Number.isFinite(v) || v <= 0) {
    console.error(`${tool}: --${name} must be a positive number, got ${process.argv[i + 1]}`);
    process.exit(2);
  }
  return v;
}

const MOCKER_ARGS = ['--speedup-ratio', '5', '--num-gpu-blocks-override', '2048'];
const ROUTER_ARGS = ['--serve-indexer', '--router-replica-sync'];
const MODEL = 'mock-model';

/** Load gauges that must read 0 once the fleet is idle: in-flight and queued requests, booked load. */
const IDLE_GAUGES =
  /^(dynamo_frontend_(inflight_requests|queued_requests|worker_active_decode_blocks|worker_active_prefill_tokens|router_queue_pending_requests))(\{|\s)/;

export class Fleet {
  nats!: ServiceHandle;
  etcd!: ServiceHandle;
  readonly mockers: Proc[] = [];
  router!: RouterProc;
  readonly frontends: FrontendProc[] = [];

  constructor(readonly ns: string) {}

  infra() {
    return { etcd: this.etcd.url, nats: this.nats.url };
  }

  async start(): Promise<void> {
    [this.nats, this.etcd] = await Promise.all([startNats({ jetstream: true }), startEtcd()]);
    for (let i = 0; i < 2; i++) this.mockers.push(startMocker(this.infra(), this.ns, 4, MOCKER_ARGS));
    this.router = await startRouterProcess(this.infra(), this.ns, ROUTER_ARGS);
    const common = ['--router-mode', 'kv', '--router-replica-sync'];
    this.frontends.push(await startFrontendProcess(this.infra(), this.ns, common));
    this.frontends.push(
      await startFrontendProcess(this.infra(), this.ns, [...common, '--use-remote-indexer']),
    );
    // Every worker routable from both frontends.
    for (const fe of this.frontends)
      await eventually(async () => (await this.workersOf(fe.url)) >= 8, 90_000, `8 workers on ${fe.url}`);
  }

  async stop(): Promise<void> {
    for (const p of [...this.frontends, this.router, ...this.mockers]) await p?.kill('SIGKILL');
    await Promise.all([this.nats?.stop(), this.etcd?.stop()]);
  }

  /** Workers a frontend routes to (its `/health` instances). */
  async workersOf(url: string): Promise<number> {
    const h = (await (await fetch(`${url}/health`, { signal: AbortSignal.timeout(3000) })).json()) as {
      instances?: unknown[];
    };
    return h.instances?.length ?? 0;
  }

  // ---------------------------------------------------------------- faults
  async killMocker(i: number, downMs: number): Promise<void> {
    await this.mockers[i]!.kill('SIGKILL');
    await sleep(downMs);
    this.mockers[i] = startMocker(this.infra(), this.ns, 4, MOCKER_ARGS);
  }

  async restartNats(downMs: number): Promise<void> {
    const port = this.nats.port;
    await this.nats.stop();
    await sleep(downMs);
    this.nats = await startNats({ jetstream: true, port });
  }

  /** kill -9, then the same ports and data directory. */
  async restartEtcd(downMs: number): Promise<void> {
    const old = this.etcd;
    const exited = new Promise<void>((r) => old.proc.once('exit', () => r()));
    old.proc.kill('SIGKILL');
    await exited;
    await sleep(downMs);
    this.etcd = await startEtcd({ restartOf: old });
  }

  /** kill -9 of the standalone router, a new one after `downMs`. */
  async restartRouter(downMs: number): Promise<void> {
    await this.router.kill('SIGKILL');
    await sleep(downMs);
    this.router = await startRouterProcess(this.infra(), this.ns, ROUTER_ARGS);
  }

  /** SIGSTOP for `ms`, then SIGCONT. */
  async pause(p: Proc, ms: number): Promise<void> {
    p.child.kill('SIGSTOP');
    await sleep(ms);
    p.child.kill('SIGCONT');
  }

  // ---------------------------------------------------------------- state
  /**
   * What is left once the fleet is idle, per frontend: non-zero load gauges (each series),
   * `dynamo_frontend_worker_*` series of workers no frontend routes to any more; and the standalone
   * router's health and lease.
   */
  async leftovers(): Promise<Record<string, unknown>> {
    const live = new Set<string>();
    for (const fe of this.frontends) {
      const h = (await (await fetch(`${fe.url}/health`)).json()) as {
        instances?: { instance_id: unknown }[];
      };
      for (const i of h.instances ?? []) live.add(String(i.instance_id));
    }
    const out: Record<string, unknown> = {};
    for (const [i, fe] of this.frontends.entries()) {
      const text = await (await fetch(`${fe.url}/metrics`)).text();
      const load: Record<string, number> = {};
      const nonzero: string[] = [];
      const stale = new Set<string>();
      for (const line of text.split('\n')) {
        const m = IDLE_GAUGES.exec(line);
        if (m) {
          const v = Number(line.slice(line.lastIndexOf(' ') + 1));
          load[m[1]!] = (load[m[1]!] ?? 0) + v;
          if (v !== 0) nonzero.push(line);
        }
        const w = /^dynamo_frontend_worker_[a-z_]+\{.*worker_id="(\d+)"/.exec(line);
        if (w && !live.has(w[1]!)) stale.add(w[1]!);
      }
      out[`frontend ${'AB'[i]}`] = {
        load_left: Object.fromEntries(Object.entries(load).filter(([, v]) => v !== 0)),
        nonzero_series: nonzero,
        dead_worker_series: stale.size,
        workers: await this.workersOf(fe.url),
      };
    }
    try {
      const h = (await (
        await fetch(`${this.router.systemUrl}/health`, { signal: AbortSignal.timeout(3000) })
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
}

export interface Sent {
  /** Seconds after the traffic's start. */
  t: number;
  fe: number;
  answer: Answer | null;
}

export interface TrafficOptions {
  rate: number;
  seed: number;
  sessions: number;
  /** Share of requests that stream (default 0.7). */
  streamShare?: number;
  /** Share of streams their client drops after the first chunk (default 0). */
  disconnectShare?: number;
  /** Share of requests cancelled at a random moment in their first 400 ms (default 0). */
  cancelShare?: number;
  /** No answer by then: `lost` (default 180 s). */
  deadlineMs?: number;
}

/**
 * Open-loop multi-turn chat (~1.5k-token prompts) at `rate` × `factor` req/s, round robin over the
 * fleet's frontends; every request and its one outcome in `sent`.
 */
export class Traffic {
  readonly sent: Sent[] = [];
  readonly pending = new Set<Promise<void>>();
  /** Multiplies the rate (a burst). */
  factor = 1;
  t0 = now();
  private readonly rng: Rng;
  private readonly workload: SessionWorkload;
  private running = false;
  private loop: Promise<void> = Promise.resolve();
  private k = 0;

  constructor(
    private readonly fleet: Fleet,
    private readonly o: TrafficOptions,
  ) {
    this.rng = new Rng(o.seed);
    this.workload = new SessionWorkload({ sessions: o.sessions, promptTokens: 1500, turns: 8, seed: o.seed });
  }

  /** One request now; a slow client reads its stream at `slowBytesPerSec`. */
  sendOne(extra: { slowBytesPerSec?: number; maxTokens?: number } = {}): void {
    const k = this.k++;
    const fe = k % this.fleet.frontends.length;
    const rng = this.rng;
    const stream = rng.bool(this.o.streamShare ?? 0.7) || extra.slowBytesPerSec !== undefined;
    const rec: Sent = { t: now() - this.t0, fe, answer: null };
    this.sent.push(rec);
    const p = send({
      url: this.fleet.frontends[fe]!.url,
      model: MODEL,
      messages: this.workload.take().messages,
      stream,
      maxTokens: extra.maxTokens ?? 16 + rng.int(0, 48),
      disconnect: stream && rng.bool(this.o.disconnectShare ?? 0),
      cancelAfterMs: rng.bool(this.o.cancelShare ?? 0) ? rng.int(0, 400) : null,
      deadlineMs: this.o.deadlineMs ?? 180_000,
      ...(extra.slowBytesPerSec ? { slowBytesPerSec: extra.slowBytesPerSec } : {}),
    }).then((a) => {
      rec.answer = a;
    });
    this.pending.add(p);
    void p.finally(() => this.pending.delete(p));
  }

  /** Starts (or resumes) the open loop. */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = (async () => {
      let next = now();
      while (this.running) {
        next += 1 / (this.o.rate * this.factor);
        const wait = next - now();
        if (wait > 0.002) await sleep(wait * 1000);
        if (!this.running) break;
        this.sendOne();
      }
    })();
  }

  /** Stops sending and waits until every request sent has its outcome. */
  async drain(): Promise<void> {
    this.running = false;
    await this.loop;
    await Promise.all([...this.pending]);
  }

  /** Engine prompt hit rate (cached / prompt tokens) of the ok answers sent in [a, b), or null. */
  hitRate(a: number, b: number): number | null {
    let p = 0;
    let c = 0;
    for (const r of this.sent)
      if (r.answer?.outcome === 'ok' && r.t >= a && r.t < b) {
        p += r.answer.promptTokens;
        c += r.answer.cachedTokens;
      }
    return p > 0 ? c / p : null;
  }
}
