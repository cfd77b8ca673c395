/**
 * Runs one `SimEngine` in real (or virtual) time: each data-parallel rank is a lane with at most one
 * pass in flight. A pass is computed when it starts (`engine.step`), and its tokens, KV events and
 * load become visible when it ends, `durationMs` later. The next pass starts at the previous pass's
 * model end time, not at the moment the timer actually fired, so timer lateness never accumulates:
 * token i of a request leaves at (its model time + the current timer jitter), never drifting.
 */
import { KvrError, invalidRequest, type FinishReason, type ParsedGenerate } from '@kvrouter/protocols';
import type { EngineKvEvent, EngineLoad, SimEngine, StepResult } from '@kvrouter/engine-sim';
import { defaultPassScheduler, type PassScheduler, type ScheduledPass } from './pass-scheduler.js';
import { RequestStream } from './request-stream.js';

export interface DriverHooks {
  /** KV events of a pass, at its end, in the engine's order (raw per-rank ids). */
  onKvEvents?(events: readonly EngineKvEvent[]): void;
  /** A rank's load after a pass (or a cancel) that changed it. */
  onLoad?(load: EngineLoad): void;
}

export interface DriverOptions {
  scheduler?: PassScheduler;
  hooks?: DriverHooks;
  /** Output length for requests without `max_tokens` (clamped to what the KV cache can hold). Default 8192. */
  defaultMaxTokens?: number;
  /**
   * When the process falls this far behind the model timeline (a long GC pause, an overloaded
   * machine), the lane restarts its timeline at the current time instead of bursting through the
   * backlog. Default 1000 ms.
   */
  maxLagMs?: number;
}

export interface DriverStats {
  submitted: number;
  /** Streams that ended with a finish reason. */
  finished: number;
  /** Requests dropped because their consumer went away. */
  cancelled: number;
  /** Times a lane gave up on catching up with the model timeline (see `maxLagMs`). */
  lagResets: number;
}

interface Lane {
  rank: number;
  /** Last time handed to this rank's engine (its calls must be non-decreasing). */
  engineNow: number;
  /** Model end time of the pass in flight. */
  due: number;
  result: StepResult | null;
  pending: ScheduledPass | null;
  kickQueued: boolean;
  /** kv_used_blocks last reported through `onLoad`. */
  reported: number;
}

interface Live {
  stream: RequestStream;
  rank: number;
  stop: ReadonlySet<number> | null;
}

/** Engine field names → the generate payload's. */
const WIRE_FIELD: Record<string, string> = {
  id: 'request_id',
  tokenIds: 'token_ids',
  maxTokens: 'stop_conditions.max_tokens',
  dpRank: 'dp_rank',
};

export class EngineDriver {
  readonly scheduler: PassScheduler;
  private readonly lanes: Lane[];
  private readonly live = new Map<string, Live>();
  private readonly hooks: DriverHooks;
  private readonly defaultMaxTokens: number;
  private readonly maxLagMs: number;
  private stopped: KvrError | null = null;
  private readonly counters: DriverStats = { submitted: 0, finished: 0, cancelled: 0, lagResets: 0 };

  constructor(
    readonly engine: SimEngine,
    opts: DriverOptions = {},
  ) {
    this.scheduler = opts.scheduler ?? defaultPassScheduler();
    this.hooks = opts.hooks ?? {};
    const d = opts.defaultMaxTokens ?? 8192;
    if (!Number.isInteger(d) || d < 1)
      throw new KvrError('invalid_argument', `defaultMaxTokens: must be an integer >= 1, got ${d}`, 400, {
        field: 'defaultMaxTokens',
      });
    this.defaultMaxTokens = d;
    const lag = opts.maxLagMs ?? 1000;
    if (typeof lag !== 'number' || !(lag > 0))
      throw new KvrError('invalid_argument', `maxLagMs: must be a number > 0, got ${lag}`, 400, {
        field: 'maxLagMs',
      });
    this.maxLagMs = lag;
    const t0 = this.scheduler.clock.now();
    this.lanes = engine.ranks.map((_, rank) => ({
      rank,
      engineNow: t0,
      due: t0,
      result: null,
      pending: null,
      kickQueued: false,
      reported: 0,
    }));
  }

  get stats(): DriverStats {
    return { ...this.counters };
  }

  /** Requests whose streams are open. */
  get activeRequests(): number {
    return this.live.size;
  }

  /**
   * Enqueues a validated request and returns its item stream. Throws (nothing enqueued) on a
   * duplicate id, a rank out of range, a request the KV cache cannot hold, or after `stop`.
   * `signal` aborting (the caller went away) cancels the request in the engine.
   */
  submit(req: ParsedGenerate, signal?: AbortSignal): RequestStream {
    if (this.stopped) throw this.stopped;
    const lane = this.lanes[req.dpRank];
    if (lane === undefined)
      throw invalidRequest(
        'dp_rank',
        `this worker serves ranks [0, ${this.lanes.length - 1}], got ${req.dpRank}`,
        'generate',
      );
    if (this.live.has(req.requestId))
      throw invalidRequest(
        'request_id',
        `a request with id ${JSON.stringify(req.requestId)} is already running`,
        'generate',
      );
    const cfg = this.engine.config;
    const maxTokens =
      req.maxTokens ??
      Math.max(
        1,
        Math.min(this.defaultMaxTokens, cfg.numGpuBlocks * cfg.blockSize - req.tokenIds.length + 1),
      );
    const busy = lane.result !== null;
    const t = busy ? lane.engineNow : Math.max(this.scheduler.clock.now(), lane.engineNow);
    try {
      this.engine.enqueue(
        {
          id: req.requestId,
          tokenIds: req.tokenIds,
          maxTokens,
          dpRank: req.dpRank,
          ...(req.kvTransferred ? { kvTransferred: true } : {}),
        },
        t,
      );
    } catch (e) {
      throw wireError(e);
    }
    lane.engineNow = t;
    const stream = new RequestStream(req.requestId, (s) => this.dropped(s), signal);
    this.live.set(req.requestId, { stream, rank: req.dpRank, stop: req.stopTokenIds });
    this.counters.submitted++;
    // Starting the pass in a microtask lets requests that arrive in the same tick share it.
    if (!busy && !lane.kickQueued) {
      lane.kickQueued = true;
      queueMicrotask(() => this.kick(lane));
    }
    if (signal?.aborted) stream.return().catch(() => undefined);
    return stream;
  }

  /** Cancels a running request (its stream ends without a finish reason). */
  cancel(requestId: string): boolean {
    const l = this.live.get(requestId);
    if (!l) return false;
    void l.stream.return();
    return true;
  }

  /**
   * Stops the lanes: no pass starts or ends any more, open streams fail with `reason` (after the
   * tokens already sent) and their requests leave the engine. Idempotent.
   */
  stop(reason: KvrError = new KvrError('engine_shutdown', 'the simulated engine stopped', 503)): void {
    if (this.stopped) return;
    this.stopped = reason;
    for (const lane of this.lanes) {
      lane.pending?.cancel();
      lane.pending = null;
      lane.result = null;
    }
    for (const [id, l] of [...this.live]) {
      this.live.delete(id);
      this.engine.cancel(id);
      l.stream.fail(reason);
    }
  }

  private dropped(s: RequestStream): void {
    const l = this.live.get(s.requestId);
    if (!l || l.stream !== s) return;
    this.live.delete(s.requestId);
    this.counters.cancelled++;
    // Released blocks change the load now; a busy lane reports it when its pass ends.
    if (this.engine.cancel(s.requestId) && this.lanes[l.rank].result === null)
      this.syncLoad(this.lanes[l.rank]);
  }

  private kick(lane: Lane): void {
    lane.kickQueued = false;
    if (this.stopped || lane.result !== null) return;
    this.startPass(lane, Math.max(this.scheduler.clock.now(), lane.engineNow));
  }

  private startPass(lane: Lane, t: number): void {
    lane.engineNow = t;
    const r = this.engine.step(t, lane.rank);
    if (r.idle) {
      this.deliver(r);
      this.syncLoad(lane);
      return;
    }
    lane.result = r;
    lane.due = t + r.durationMs;
    lane.pending = this.scheduler.at(lane.due, () => this.endPass(lane));
  }

  private endPass(lane: Lane): void {
    const r = lane.result!;
    lane.result = null;
    lane.pending = null;
    this.deliver(r);
    // After delivery: stop tokens may have cancelled requests, and cancels during the pass count too.
    this.syncLoad(lane);
    if (this.stopped || !this.engine.hasWork(lane.rank)) return;
    let next = lane.due;
    const now = this.scheduler.clock.now();
    if (now - next > this.maxLagMs) {
      next = now;
      this.counters.lagResets++;
    }
    this.startPass(lane, next);
  }

  private deliver(r: StepResult): void {
    if (r.kvEvents.length > 0) this.hooks.onKvEvents?.(r.kvEvents);
    for (const e of r.emitted) {
      const l = this.live.get(e.requestId);
      if (!l) continue;
      let finish: FinishReason | undefined = e.finishReason;
      if (finish === undefined && l.stop !== null && e.tokenIds.some((t) => l.stop!.has(t))) {
        finish = 'stop';
        // The engine would go on to max_tokens; a stop token ends the request there.
        this.engine.cancel(e.requestId);
      }
      if (finish !== undefined) {
        this.live.delete(e.requestId);
        this.counters.finished++;
      }
      l.stream.push(e.tokenIds, finish, e.cachedTokens);
    }
  }

  private syncLoad(lane: Lane): void {
    if (this.stopped) return;
    const load = this.engine.load(lane.rank);
    if (load.kv_used_blocks === lane.reported) return;
    lane.reported = load.kv_used_blocks;
    this.hooks.onLoad?.(load);
  }
}

function wireError(e: unknown): unknown {
  if (!(e instanceof KvrError)) return e;
  const f = typeof e.detail?.field === 'string' ? e.detail.field : undefined;
  const wire = f === undefined ? undefined : (WIRE_FIELD[f] ?? f);
  if (wire === undefined) return e;
  return new KvrError(e.code, `generate ${wire}: ${e.message}`, e.status, { ...e.detail, field: wire });
}
