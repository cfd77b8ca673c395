/**
 * Router-side KV event subscriber (docs/protocol.md §3.6): one cursor per (worker, dp_rank), gap
 * detection, recovery from the worker's local indexer (ring-buffer events, else a tree dump),
 * retries with doubling backoff, a cap on concurrent recoveries, `Cleared` as a barrier, and
 * discovery / pool-resync driven full restores. Malformed input is counted and dropped; nothing
 * that arrives on the wire can stop the loop.
 *
 * Cursor states: `initial` (never restored, or given up), `live(last)`, `invalidated` (the index
 * lost this rank's blocks: pool resync, or a `Cleared` of another rank of the worker). Orthogonal
 * to it, a recovery phase: none / queued / inflight / backoff; while it is not none, live events
 * of the rank are not applied, only the highest id is remembered.
 */
import {
  DecodeError,
  decodeRouterEvent,
  type EventEnvelope,
  type LocalIndexerQueryResponse,
  type RouterEvent,
  type WorkerId,
  type DpRank,
  errorMessage,
  type Timers,
  KvrError,
} from '@kvrouter/protocols';
import type { KvIndexer } from '@kvrouter/radix-indexer';
import { checkCount, checkPositive, checkU32, checkU64 } from '../errors.js';
import { realTimers } from '../publisher/publisher.js';
import type { QueryClient } from '../query.js';

export type CursorState = 'initial' | 'live' | 'invalidated';
export type RecoveryPhase = 'none' | 'queued' | 'inflight' | 'backoff';

export interface GapInfo {
  worker_id: bigint;
  dp_rank: number;
  /** First missing id. */
  from: bigint;
  /** Id of the event that revealed the gap. */
  seen: bigint;
  /** False for workers without a local indexer: the gap is only counted. */
  recovering: boolean;
}

export interface RecoveryInfo {
  worker_id: bigint;
  dp_rank: number;
  outcome: 'events' | 'dump' | 'failed';
  /** Events (or dump blocks) applied. */
  applied: number;
  /** Queries made, retries included. */
  attempts: number;
  /** From the first request of this recovery to its end (queueing and backoff included). */
  durationMs: number;
  /** Cursor afterwards (0 after `failed`). */
  cursor: bigint;
}

export interface KvSubscriberOptions {
  index: Pick<KvIndexer, 'applyEvent' | 'removeWorker' | 'removeWorkerDpRank'>;
  /** Null: no recovery at all (every worker is treated as `enable_local_indexer=false`). */
  query: QueryClient | null;
  /** Pause between subscribing and the first recovery (§3.6 startup); default 100 ms. */
  startupDelayMs?: number;
  /** Default 8. */
  maxRetries?: number;
  /** Doubles per retry; default 200 ms. */
  initialBackoffMs?: number;
  /** Default 16. */
  maxConcurrentRecoveries?: number;
  /** Per query; default 10 000 ms. */
  queryTimeoutMs?: number;
  /** Whether a worker first seen through its events has a local indexer (the runtime default). Default true. */
  assumeLocalIndexer?: boolean;
  /** Before resubscribing after the event stream ended or failed; default 1000 ms. */
  resubscribeDelayMs?: number;
  timers?: Timers;
  /** ms clock for recovery durations; default `performance.now`. */
  now?: () => number;
  /** A message that did not decode (envelope or RouterEvent); counted and dropped. */
  onDecodeFailure?: (err: DecodeError) => void;
  onGap?: (gap: GapInfo) => void;
  onRecovery?: (info: RecoveryInfo) => void;
  onError?: (err: unknown, context: string) => void;
}

export interface SubscriberStats {
  received: number;
  applied: number;
  stale: number;
  gaps: number;
  /** Live events not applied because their rank was recovering. */
  heldBack: number;
  decodeFailures: number;
  recoveries: number;
  recoveredByEvents: number;
  recoveredByDump: number;
  /** Recoveries abandoned after the last retry (the rank went back to `initial`). */
  recoveryFailures: number;
  retries: number;
  /** Query results thrown away because a `Cleared`, resync or removal overtook them. */
  discarded: number;
  cleared: number;
  /** Events in a recovery reply that belong to another worker or rank. */
  foreignEvents: number;
}

interface WorkerState {
  readonly id: WorkerId;
  readonly ranks: Map<number, RankCursor>;
  localIndexer: boolean;
}

interface RankCursor {
  readonly ws: WorkerState;
  readonly rank: number;
  state: CursorState;
  last: bigint;
  phase: RecoveryPhase;
  /** The pending/next recovery is a full restore. */
  full: boolean;
  highest: bigint;
  retries: number;
  attempts: number;
  /** Bumped to orphan whatever recovery is queued, in flight or waiting. */
  token: number;
  timer: unknown;
  startedAt: number;
}

/** Removed worker ids remembered so late events cannot resurrect them (ids are never reused). */
const TOMBSTONES = 4096;

export class KvEventSubscriber {
  private readonly index: KvSubscriberOptions['index'];
  private readonly query: QueryClient | null;
  private readonly timers: Timers;
  private readonly now: () => number;
  private readonly maxRetries: number;
  private readonly backoffMs: number;
  private readonly maxConcurrent: number;
  private readonly queryTimeoutMs: number;
  private readonly workers = new Map<bigint, WorkerState>();
  private readonly removed = new Set<bigint>();
  private queue: { rc: RankCursor; token: number }[] = [];
  private qhead = 0;
  private inflight = 0;
  private ready = false;
  private closed = false;
  private startTimer: unknown = null;
  private source: { close?(): void; return?(): unknown } | null = null;
  private loop: Promise<void> | null = null;
  private readonly counters: SubscriberStats = {
    received: 0,
    applied: 0,
    stale: 0,
    gaps: 0,
    heldBack: 0,
    decodeFailures: 0,
    recoveries: 0,
    recoveredByEvents: 0,
    recoveredByDump: 0,
    recoveryFailures: 0,
    retries: 0,
    discarded: 0,
    cleared: 0,
    foreignEvents: 0,
  };

  constructor(private readonly opts: KvSubscriberOptions) {
    this.index = opts.index;
    this.query = opts.query;
    this.timers = opts.timers ?? realTimers;
    this.now = opts.now ?? (() => performance.now());
    this.maxRetries = checkCount(opts.maxRetries ?? 8, 'maxRetries');
    this.backoffMs = checkPositive(opts.initialBackoffMs ?? 200, 'initialBackoffMs');
    this.maxConcurrent = checkPositive(opts.maxConcurrentRecoveries ?? 16, 'maxConcurrentRecoveries');
    this.queryTimeoutMs = checkPositive(opts.queryTimeoutMs ?? 10_000, 'queryTimeoutMs');
    checkCount(opts.startupDelayMs ?? 100, 'startupDelayMs');
  }

  get stats(): SubscriberStats {
    return { ...this.counters };
  }

  /** Recoveries queued, in flight or waiting to retry. */
  get pendingRecoveries(): number {
    let n = 0;
    for (const ws of this.workers.values()) for (const rc of ws.ranks.values()) if (rc.phase !== 'none') n++;
    return n;
  }

  /** Cursor of one rank (tests, diagnostics). */
  cursor(workerId: bigint, dpRank = 0): { state: CursorState; last: bigint; phase: RecoveryPhase } | null {
    const rc = this.workers.get(workerId)?.ranks.get(dpRank);
    return rc ? { state: rc.state, last: rc.last, phase: rc.phase } : null;
  }

  // ---- lifecycle ---------------------------------------------------------------------------------

  /**
   * Starts consuming. `subscribe` is called at once and again whenever the stream ends or fails
   * (after `resubscribeDelayMs`); recoveries start `startupDelayMs` later (§3.6 startup).
   */
  start(subscribe: () => AsyncIterable<EventEnvelope> & { close?(): void }): void {
    if (this.loop) throw new Error('KvEventSubscriber: already started');
    this.loop = this.consume(subscribe);
    this.startTimer = this.timers.setTimeout(() => {
      this.startTimer = null;
      this.markReady();
    }, this.opts.startupDelayMs ?? 100);
  }

  /** Allows recoveries now (for callers that feed events themselves instead of `start`). */
  markReady(): void {
    if (this.ready) return;
    this.ready = true;
    this.pump();
  }

  private async consume(subscribe: () => AsyncIterable<EventEnvelope> & { close?(): void }): Promise<void> {
    while (!this.closed) {
      try {
        const src = subscribe();
        this.source = src as typeof this.source;
        for await (const env of src) {
          if (this.closed) break;
          this.handleEnvelope(env);
        }
        if (!this.closed)
          this.opts.onError?.(
            new KvrError('kv_events_failed', 'kv-events subscription ended'),
            'subscription',
          );
      } catch (e) {
        if (!this.closed) this.opts.onError?.(e, 'subscription');
      }
      if (this.closed) break;
      await new Promise<void>((r) => this.timers.setTimeout(r, this.opts.resubscribeDelayMs ?? 1000));
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.startTimer !== null) this.timers.clearTimeout(this.startTimer);
    for (const ws of this.workers.values()) for (const rc of ws.ranks.values()) this.supersede(rc);
    const src = this.source;
    this.source = null;
    if (src?.close) src.close();
    else await src?.return?.();
    await this.loop?.catch(() => undefined);
  }

  // ---- input -------------------------------------------------------------------------------------

  /** One envelope from the event plane; a payload that is not a RouterEvent is counted and dropped. */
  handleEnvelope(env: EventEnvelope): void {
    let ev: RouterEvent;
    try {
      ev = decodeRouterEvent(env.payload);
    } catch (e) {
      this.decodeFailure(e);
      return;
    }
    try {
      this.handleEvent(ev);
    } catch (e) {
      this.opts.onError?.(e, 'apply');
    }
  }

  /** Reports a message that failed to decode upstream of this class (e.g. the plane's envelope check). */
  decodeFailure(e: unknown): void {
    this.counters.decodeFailures++;
    const err = e instanceof DecodeError ? e : new DecodeError(errorMessage(e), { field: 'payload' });
    try {
      this.opts.onDecodeFailure?.(err);
    } catch {
      // A failing hook must not take the loop down.
    }
  }

  /** One decoded live event. */
  handleEvent(ev: RouterEvent): void {
    if (this.closed) return;
    const workerId = ev.worker_id as bigint;
    if (this.removed.has(workerId)) {
      this.counters.stale++;
      return;
    }
    this.counters.received++;
    const ws = this.worker(workerId);
    const rc = this.cursorOf(ws, ev.event.dp_rank);
    const id = ev.event.event_id as bigint;
    if (ev.event.data === 'cleared') {
      this.onCleared(rc, ev);
      return;
    }
    if (!this.recovers(ws)) {
      if (rc.state === 'live') {
        if (id <= rc.last) {
          this.counters.stale++;
          return;
        }
        if (id > rc.last + 1n) this.gap(rc, id, false);
      }
      this.apply(ev);
      rc.state = 'live';
      rc.last = id;
      return;
    }
    if (rc.phase !== 'none') {
      if (id > rc.highest) rc.highest = id;
      this.counters.heldBack++;
      return;
    }
    if (rc.state === 'live') {
      if (id <= rc.last) this.counters.stale++;
      else if (id === rc.last + 1n) {
        this.apply(ev);
        rc.last = id;
      } else {
        rc.highest = id;
        this.gap(rc, id, true);
        this.request(rc, false);
      }
      return;
    }
    if (id > rc.highest) rc.highest = id;
    this.counters.heldBack++;
    this.request(rc, true);
  }

  /**
   * `Cleared` empties the whole worker in the index (§3.2). It is a barrier: the rank's state after
   * it depends only on later events, so a newer `Cleared` is applied at once, sets the cursor and
   * orphans any recovery of the worker. Other ranks of the worker lost their blocks with it; those
   * that had any are restored from a fresh dump (implementation choice: upstream leaves them empty).
   */
  private onCleared(rc: RankCursor, ev: RouterEvent): void {
    const id = ev.event.event_id as bigint;
    if (rc.state === 'live' && id <= rc.last) {
      this.counters.stale++;
      return;
    }
    this.apply(ev);
    this.counters.cleared++;
    this.invalidateSiblings(rc);
    this.supersede(rc);
    rc.state = 'live';
    rc.last = id;
    rc.retries = 0;
    rc.full = false;
    if (this.recovers(rc.ws) && rc.highest > id) this.request(rc, false);
  }

  private invalidateSiblings(rc: RankCursor): void {
    const recovers = this.recovers(rc.ws);
    for (const o of rc.ws.ranks.values()) {
      if (o === rc) continue;
      const had = o.state === 'live' || o.phase !== 'none';
      this.supersede(o);
      if (!had) continue;
      if (recovers) {
        o.state = 'invalidated';
        this.request(o, true);
      } else o.state = 'initial';
    }
  }

  // ---- discovery and resync ----------------------------------------------------------------------

  /**
   * A worker appeared in discovery: each listed rank that is not live yet is restored from a full
   * dump (§3.6). `localIndexer` is the worker's `enable_local_indexer`.
   */
  addWorker(workerId: bigint, opts: { dpRanks?: readonly number[]; localIndexer?: boolean } = {}): void {
    checkU64(workerId, 'workerId');
    const ranks = opts.dpRanks ?? [0];
    ranks.forEach((r, i) => checkU32(r, `dpRanks[${i}]`));
    if (this.closed) return;
    this.removed.delete(workerId);
    const ws = this.worker(workerId);
    ws.localIndexer = opts.localIndexer ?? true;
    for (const r of ranks) {
      const rc = this.cursorOf(ws, r);
      if (this.recovers(ws) && rc.state !== 'live' && rc.phase === 'none') this.request(rc, true);
    }
  }

  /** A worker left discovery: its blocks go (all ranks) and its cursors are forgotten. */
  removeWorker(workerId: bigint): void {
    checkU64(workerId, 'workerId');
    const ws = this.workers.get(workerId);
    if (ws) for (const rc of ws.ranks.values()) this.supersede(rc);
    this.workers.delete(workerId);
    this.removed.add(workerId);
    if (this.removed.size > TOMBSTONES) this.removed.delete(this.removed.values().next().value!);
    this.index.removeWorker(workerId);
  }

  /**
   * The index lost these workers' blocks (the pool's `onResync` after a writer crash): every rank
   * of theirs is restored from a full dump.
   */
  resync(workerIds: readonly bigint[]): void {
    for (const id of workerIds) {
      const ws = this.workers.get(id);
      if (!ws) continue;
      for (const rc of ws.ranks.values()) {
        this.supersede(rc);
        if (this.recovers(ws)) {
          rc.state = 'invalidated';
          this.request(rc, true);
        } else rc.state = 'initial';
      }
    }
  }

  // ---- recovery ----------------------------------------------------------------------------------

  private recovers(ws: WorkerState): boolean {
    return ws.localIndexer && this.query !== null;
  }

  private request(rc: RankCursor, full: boolean): void {
    if (this.closed) return;
    if (full) rc.full = true;
    if (rc.phase !== 'none') return;
    rc.phase = 'queued';
    if (rc.startedAt < 0) {
      rc.startedAt = this.now();
      rc.attempts = 0;
      this.counters.recoveries++;
    }
    this.queue.push({ rc, token: rc.token });
    this.pump();
  }

  /** Orphans whatever recovery the rank has queued, in flight or waiting. */
  private supersede(rc: RankCursor): void {
    rc.token++;
    if (rc.timer !== null) {
      this.timers.clearTimeout(rc.timer);
      rc.timer = null;
    }
    rc.phase = 'none';
    rc.startedAt = -1;
  }

  private pump(): void {
    if (!this.ready || this.closed) return;
    while (this.inflight < this.maxConcurrent && this.qhead < this.queue.length) {
      const { rc, token } = this.queue[this.qhead++];
      if (rc.token !== token || rc.phase !== 'queued' || this.workers.get(rc.ws.id) !== rc.ws) continue;
      this.run(rc);
    }
    if (this.qhead === this.queue.length) {
      this.queue = [];
      this.qhead = 0;
    }
  }

  private run(rc: RankCursor): void {
    rc.phase = 'inflight';
    rc.attempts++;
    this.inflight++;
    const token = rc.token;
    const full = rc.full || rc.state !== 'live';
    rc.full = full;
    const start = full ? null : rc.last + 1n;
    const ac = new AbortController();
    let timer: unknown = null;
    const timeout = new Promise<never>((_, reject) => {
      timer = this.timers.setTimeout(() => {
        ac.abort();
        reject(
          new KvrError('request_timeout', `local indexer query timed out after ${this.queryTimeoutMs} ms`),
        );
      }, this.queryTimeoutMs);
    });
    const worker = { worker_id: rc.ws.id, dp_rank: rc.rank as DpRank };
    Promise.race([
      this.query!.query(
        worker,
        { worker_id: rc.ws.id, start_event_id: start as never, end_event_id: null },
        ac.signal,
      ),
      timeout,
    ]).then(
      (res) => this.settle(rc, token, start, res, null, timer),
      (err: unknown) => this.settle(rc, token, start, null, err, timer),
    );
  }

  private settle(
    rc: RankCursor,
    token: number,
    start: bigint | null,
    res: LocalIndexerQueryResponse | null,
    err: unknown,
    timer: unknown,
  ): void {
    this.inflight--;
    this.timers.clearTimeout(timer);
    try {
      if (this.closed) return;
      if (rc.token !== token || this.workers.get(rc.ws.id) !== rc.ws) {
        this.counters.discarded++;
        return;
      }
      if (res === null) return this.retry(rc, `query failed: ${errorMessage(err)}`);
      let applied: number;
      let outcome: 'events' | 'dump';
      if ('Events' in res) {
        if (start === null || rc.state !== 'live')
          return this.retry(rc, 'Events reply to a full-dump request');
        applied = this.applyEvents(rc, res.Events.events);
        outcome = 'events';
        this.counters.recoveredByEvents++;
      } else if ('TreeDump' in res) {
        applied = this.applyDump(rc, res.TreeDump.events);
        rc.state = 'live';
        rc.last = res.TreeDump.last_event_id as bigint;
        outcome = 'dump';
        this.counters.recoveredByDump++;
      } else if ('TooNew' in res)
        return this.retry(rc, `TooNew: worker has up to ${res.TooNew.newest_available}, asked from ${start}`);
      else if ('InvalidRange' in res)
        return this.retry(rc, `InvalidRange ${res.InvalidRange.start_id}..${res.InvalidRange.end_id}`);
      else return this.retry(rc, `worker error: ${res.Error}`);
      const info: RecoveryInfo = {
        worker_id: rc.ws.id,
        dp_rank: rc.rank,
        outcome,
        applied,
        attempts: rc.attempts,
        durationMs: this.now() - rc.startedAt,
        cursor: rc.last,
      };
      rc.phase = 'none';
      rc.retries = 0;
      rc.full = false;
      if (rc.highest > rc.last) {
        // Events went past what the reply covered while it was in flight: fetch the rest.
        this.request(rc, false);
      } else rc.startedAt = -1;
      this.report(info);
    } catch (e) {
      this.opts.onError?.(e, 'recovery');
    } finally {
      this.pump();
    }
  }

  private retry(rc: RankCursor, reason: string): void {
    this.counters.retries++;
    rc.retries++;
    if (rc.retries > this.maxRetries) {
      this.opts.onError?.(
        new KvrError(
          'kv_events_failed',
          `recovery of worker ${rc.ws.id} dp_rank ${rc.rank} abandoned after ${this.maxRetries} retries: ${reason}`,
        ),
        'recovery',
      );
      const info: RecoveryInfo = {
        worker_id: rc.ws.id,
        dp_rank: rc.rank,
        outcome: 'failed',
        applied: 0,
        attempts: rc.attempts,
        durationMs: this.now() - rc.startedAt,
        cursor: 0n,
      };
      // §3.6 implementation choice: drop the rank's blocks and start over from Initial.
      this.supersede(rc);
      this.index.removeWorkerDpRank(rc.ws.id, rc.rank);
      rc.state = 'initial';
      rc.last = 0n;
      rc.highest = 0n;
      rc.retries = 0;
      rc.full = false;
      this.counters.recoveryFailures++;
      this.report(info);
      return;
    }
    rc.phase = 'backoff';
    const token = rc.token;
    rc.timer = this.timers.setTimeout(
      () => {
        rc.timer = null;
        if (rc.token !== token || this.closed) return;
        rc.phase = 'none';
        this.request(rc, rc.full);
      },
      this.backoffMs * 2 ** (rc.retries - 1),
    );
  }

  /** Ring-buffer events newer than the cursor, in order; stops at a hole (the rest is asked again). */
  private applyEvents(rc: RankCursor, events: readonly RouterEvent[]): number {
    let n = 0;
    for (const ev of events) {
      if (ev.worker_id !== rc.ws.id || ev.event.dp_rank !== rc.rank) {
        this.counters.foreignEvents++;
        continue;
      }
      const id = ev.event.event_id as bigint;
      if (id <= rc.last) continue;
      if (id !== rc.last + 1n) {
        if (id > rc.highest) rc.highest = id;
        break;
      }
      this.apply(ev);
      if (ev.event.data === 'cleared') {
        this.counters.cleared++;
        this.invalidateSiblings(rc);
      }
      rc.last = id;
      n++;
    }
    return n;
  }

  private applyDump(rc: RankCursor, events: readonly RouterEvent[]): number {
    this.index.removeWorkerDpRank(rc.ws.id, rc.rank);
    let n = 0;
    for (const ev of events) {
      if (ev.worker_id !== rc.ws.id || ev.event.dp_rank !== rc.rank || ev.event.data === 'cleared') {
        this.counters.foreignEvents++;
        continue;
      }
      this.index.applyEvent(ev);
      n++;
    }
    return n;
  }

  // ---- helpers -----------------------------------------------------------------------------------

  private apply(ev: RouterEvent): void {
    this.index.applyEvent(ev);
    this.counters.applied++;
  }

  private gap(rc: RankCursor, seen: bigint, recovering: boolean): void {
    this.counters.gaps++;
    try {
      this.opts.onGap?.({ worker_id: rc.ws.id, dp_rank: rc.rank, from: rc.last + 1n, seen, recovering });
    } catch (e) {
      this.opts.onError?.(e, 'onGap');
    }
  }

  private report(info: RecoveryInfo): void {
    try {
      this.opts.onRecovery?.(info);
    } catch (e) {
      this.opts.onError?.(e, 'onRecovery');
    }
  }

  private worker(id: bigint): WorkerState {
    let ws = this.workers.get(id);
    if (!ws) {
      ws = { id: id as WorkerId, ranks: new Map(), localIndexer: this.opts.assumeLocalIndexer ?? true };
      this.workers.set(id, ws);
    }
    return ws;
  }

  private cursorOf(ws: WorkerState, rank: number): RankCursor {
    let rc = ws.ranks.get(rank);
    if (!rc) {
      rc = {
        ws,
        rank,
        state: 'initial',
        last: 0n,
        phase: 'none',
        full: false,
        highest: 0n,
        retries: 0,
        attempts: 0,
        token: 0,
        timer: null,
        startedAt: -1,
      };
      ws.ranks.set(rank, rc);
    }
    return rc;
  }
}
