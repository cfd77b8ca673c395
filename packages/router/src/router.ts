/**
 * KvRouter: one router for one (model, worker component), docs/protocol.md §0. It wires the parts and
 * owns the worker set and the timers; each concern lives in its own module (see the README's
 * module map): options, request intent, overlap source, admission gate, booking, queue driver,
 * replica sync, sessions, simple modes, explanation. Clock, timers, randomness and every
 * transport are injected.
 *
 * A decision is one synchronous call: gate (filters → load snapshot → park check → cost → pick)
 * then booking, with no await between them, so each decision sees the previous booking (§10).
 */
import {
  MultiWorkerSequences,
  allWorkersBusy,
  validateBusyThresholds,
  type BusyThresholds,
} from '@kvrouter/core-cost';
import {
  KvrError,
  invalidArgument,
  parseU64,
  type ActiveSequenceEvent,
  type TimerHandle,
  type WorkerId,
  type WorkerWithDpRank,
} from '@kvrouter/protocols';
import { Bookings } from './booking.js';
import { Explainer } from './explain.js';
import { AdmissionGate } from './gate.js';
import { prepareIntent, type IntentContext, type Pending } from './intent.js';
import {
  MAINTENANCE_INTERVAL_MS,
  pickDefined,
  reporter,
  resolveOptions,
  type ResolvedOptions,
} from './options.js';
import { OverlapSource } from './overlap.js';
import { QueueDriver } from './queue-driver.js';
import { ReplicaSync, type ReplicaLiveList } from './replica.js';
import { SessionControl } from './session-rpc.js';
import type { SessionBinding } from './sessions.js';
import { SimpleModes } from './simple.js';
import { TruthMonitor, type TruthReport } from './truth.js';
import type { KvRouterOptions, RouteRequest, RouterPhase, RoutingDecision } from './types.js';
import { normalizeWorkerConfig, WorkerSet, type WorkerConfig } from './workers.js';

export {
  QUEUE_RECHECK_MS,
  QUEUE_RECHECK_AIC_MS,
  MAINTENANCE_INTERVAL_MS,
  DEFAULT_OVERLAP_REFRESH_AFTER_SECS,
} from './options.js';

/**
 * Requests one router tracks at most (decided and not yet freed, plus parked; issue 17, bounded
 * memory): past it a new request is refused as `all_workers_busy` (503, overload). Each holds its
 * booking (hash copies, ~16 bytes per prompt block, plus a few hundred bytes); docs/memory.md.
 */
export const MAX_LIVE_REQUESTS = 65_536;

export class KvRouter {
  readonly blockSize: number;
  readonly mode: ResolvedOptions['mode'];
  readonly routerId: bigint | null;
  readonly phase: RouterPhase;
  private readonly o: ResolvedOptions;
  private readonly report: (e: unknown, context: string) => void;
  private readonly workers = new WorkerSet();
  private readonly seqs: MultiWorkerSequences;
  private readonly overlap: OverlapSource;
  private readonly gate: AdmissionGate;
  private readonly bookings: Bookings;
  private readonly replica: ReplicaSync;
  private readonly sessions: SessionControl;
  private readonly queue: QueueDriver | null;
  private readonly simple: SimpleModes;
  private readonly explain: Explainer;
  private readonly intentCtx: IntentContext;
  /**
   * Truth check (issue 19; `truth.ts`): kv mode with an index. Fed by `observeEngineCached`; a worker
   * it marks load-only gets overlap 0 in the gate (`WorkerEntry.loadOnly`).
   */
  readonly truth: TruthMonitor | null;
  /** The maintenance timer while armed (the kernel's `TimerHandle` is opaque: boxed to tell armed from not). */
  private maintTimer: { handle: TimerHandle } | null = null;
  private closed = false;

  constructor(opts: KvRouterOptions) {
    const o = (this.o = resolveOptions(opts));
    const report = (this.report = reporter(o.hooks));
    this.blockSize = o.blockSize;
    this.mode = o.mode;
    this.phase = o.phase;
    this.routerId = o.routerId;
    const params = o.params;
    this.seqs = new MultiWorkerSequences({
      blockSize: o.blockSize,
      trackActiveBlocks: params.trackActiveBlocks,
      assumeKvReuse: params.assumeKvReuse,
      trackPrefillTokens: params.trackPrefillTokens,
      trackOutputBlocks: o.trackOutputBlocks,
      expiryMs: o.expiryMs,
      randomU32: o.randomU32,
      onChange: o.hooks.publishLoad ? (w) => this.publishLoadOf(w) : undefined,
      onExpired: (id) => this.bookings.expired(id),
    });
    const seqs = this.seqs;
    const armMaintenance = () => this.armMaintenance();
    const drain = () => this.drain();
    this.overlap = new OverlapSource(o, report);
    this.gate = new AdmissionGate(o, this.workers, seqs, this.overlap, report);
    this.explain = new Explainer(o, this.gate.batch, this.gate.out, report);
    this.sessions = new SessionControl({
      o,
      workers: this.workers,
      report,
      armMaintenance,
      free: (id) => this.free(id),
      closeOnEnd: (id, close) => this.bookings.closeOnEnd(id, close),
    });
    this.replica = new ReplicaSync({
      o,
      seqs,
      report,
      owns: (id) => this.bookings.has(id),
      armMaintenance,
      drain,
      ownIds: () => this.bookings.ids(),
      knowsWorker: (id) => this.workers.get(id) !== undefined,
    });
    this.bookings = new Bookings({
      o,
      seqs,
      overlap: this.overlap,
      replica: this.replica,
      armMaintenance,
      sendClose: (id, w) => this.sessions.sendClose(id, w),
      rateOf: (r) => this.gate.rateOf(r),
    });
    this.simple = new SimpleModes(o, this.workers, this.gate, this.bookings, this.explain);
    this.queue =
      o.queueThreshold === null
        ? null
        : new QueueDriver({
            o,
            admit: (p) => this.admit(p),
            afterDecision: (p, d) => this.sessions.afterDecision(p, d),
            bestOverlap: () => this.gate.bestOverlap(),
          });
    const indexer = o.deps.indexer ?? null;
    this.truth =
      this.mode === 'kv' && indexer && opts.truth !== false
        ? new TruthMonitor(
            {
              blockSize: o.blockSize,
              treeSizes: this.overlap.remote ? null : () => indexer.treeSizes(),
              ...(opts.truth ? { thresholds: opts.truth } : {}),
            },
            (id, on) => {
              const w = this.workers.get(id);
              if (w) w.loadOnly = on;
            },
          )
        : null;
    this.intentCtx = {
      o,
      isKnown: (id) => this.bookings.has(id) || (this.queue?.has(id) ?? false),
      arriveSession: (req, queryOnly, now) => this.sessions.arrive(req, queryOnly, now),
    };
  }

  // ---------------------------------------------------------------------------------------------
  // Worker set

  /** Adds a worker, or updates it when already known (§6.5). */
  addWorker(cfg: WorkerConfig): void {
    this.upsertWorker(cfg, false);
  }

  /** Updates a known worker's runtime config; an unknown id is a 404-style error. */
  updateWorker(cfg: WorkerConfig): void {
    this.upsertWorker(cfg, true);
  }

  private upsertWorker(cfg: WorkerConfig, mustExist: boolean): void {
    const n = normalizeWorkerConfig(cfg);
    if (mustExist && !this.workers.get(n.id))
      throw new KvrError('unknown_worker', `worker ${n.id} is not known`, 404, { field: 'workerId' });
    const change = this.workers.upsert(n);
    if (change.added) this.truth?.addWorker(n.id);
    for (const r of change.removedRanks) {
      for (const id of this.seqs.removeWorkerDpRank(n.id, r)) this.bookings.forget(id);
      this.overlap.removeWorkerDpRank(n.id, r);
    }
    if (change.removedRanks.length > 0) this.sessions.bindings.dropWorker(n.id, new Set(change.removedRanks));
    if (this.mode === 'kv') {
      this.seqs.addWorker(n.id, n.dpStart, n.dpSize);
      for (const r of this.workers.get(n.id)?.ranks ?? []) {
        r.loadSlot = this.seqs.slotOf(r.worker);
        r.loadGen = this.seqs.slotGen(r.loadSlot);
      }
    }
    this.drain();
  }

  /** Removes a worker: the index drops it and its bookings are freed (§6.5). False if unknown. */
  removeWorker(workerId: bigint | number | string): boolean {
    let id: bigint;
    try {
      id = parseU64(workerId);
    } catch {
      throw invalidArgument('workerId', 'must be a u64', workerId);
    }
    if (!this.workers.remove(id)) return false;
    this.truth?.removeWorker(id);
    for (const rid of this.seqs.removeWorker(id)) this.bookings.forget(rid);
    this.overlap.removeWorker(id);
    this.sessions.bindings.dropWorker(id);
    this.drain();
    return true;
  }

  get workerCount(): number {
    return this.workers.size;
  }

  workerIds(): WorkerId[] {
    return this.workers.workers.map((w) => w.id);
  }

  /** In-flight count of a worker (§8.8). */
  inflight(workerId: bigint): number {
    return this.workers.get(workerId)?.inflight ?? 0;
  }

  // ---------------------------------------------------------------------------------------------
  // Routing

  /**
   * Routes one request. Resolves with the decision at once, or later when a parked request is
   * admitted (§10); rejects with a KvrError per §8.1 / §12 / docs/configuration.md. With a remote index the
   * remote answer is awaited first (§7.7), before anything is checked or booked.
   */
  route(req: RouteRequest): Promise<RoutingDecision> {
    if (this.overlap.remote && this.mode === 'kv')
      return this.overlap.prefetch(req).then(() => this.routeNow(req));
    return this.routeNow(req);
  }

  private routeNow(req: RouteRequest): Promise<RoutingDecision> {
    try {
      if (this.closed) throw new KvrError('router_closed', 'router is closed', 503);
      if (this.bookings.size + (this.queue?.size ?? 0) >= MAX_LIVE_REQUESTS) throw allWorkersBusy();
      const p = prepareIntent(req, this.intentCtx);
      if (this.mode !== 'kv') return this.sessions.afterDecision(p, this.simple.admit(p));
      // Earlier arrivals first: a newcomer never overtakes a queued request that could go now.
      if (this.queue && this.queue.size > 0) this.queue.drain();
      this.overlap.hashAndMatch(p, req);
      const d = this.admit(p);
      if (d) return this.sessions.afterDecision(p, d);
      return this.queue!.park(p, req.signal, (id) => this.free(id));
    } catch (e) {
      return Promise.reject(e instanceof Error ? e : new Error(String(e)));
    }
  }

  /** kv mode: the gate's verdict, then booking in the same synchronous call. Null: park. */
  private admit(p: Pending): RoutingDecision | null {
    const hr = this.o.hr;
    const t0 = hr();
    const now = this.o.clock.now();
    const v = this.gate.evaluate(p, now);
    if (v === 'park') return null;
    if (v === 'unknown_pin') return this.simple.unknownPin(p, p.where.pin!);
    // Read before booking adds this request to the rank's active set (the truth check's input).
    const inflight = this.gate.batch.activePrefixDepth[v.idx];
    // No await between the verdict and the booking: the next decision must see this one (§10).
    const booked = p.intent.queryOnly ? false : this.bookings.book(p, v.chosen, v.cached, now);
    const d = this.explain.kvDecision(p, v, booked, now);
    // The index's own overlap of the chosen rank, before a load-only override (the truth check's input).
    d.indexOverlapBlocks = v.chosen.owner.loadOnly ? (p.prompt.scores?.get(v.chosen.key) ?? 0) : v.overlap;
    d.inflightPrefixBlocks = inflight;
    const t1 = hr();
    this.explain.overhead(p, t1 - t0, t1);
    return d;
  }

  private drain(): void {
    this.queue?.drain();
  }

  /** Requests parked right now. */
  get queueDepth(): number {
    return this.queue?.size ?? 0;
  }

  /** Period of the §10 queue re-check in ms (100 with a prefill-duration predictor, else 60 000). */
  get queueRecheckMs(): number {
    return this.o.queueRecheckMs;
  }

  // ---------------------------------------------------------------------------------------------
  // Lifecycle hooks for dispatchers

  /**
   * The engine's `cached_tokens` for a request this router decided (first response item), compared
   * with the index's prediction (truth check). `isl`: the prompt length routed. No-op outside kv
   * mode, for query-only decisions and decisions without an index prediction.
   */
  observeEngineCached(d: RoutingDecision, reportedTokens: number, isl: number): void {
    const t = this.truth;
    if (t === null || d.queryOnly || d.indexOverlapBlocks === undefined) return;
    const bs = this.blockSize;
    const predicted = d.indexOverlapBlocks * bs;
    const upTo = Math.max(predicted, (d.inflightPrefixBlocks ?? 0) * bs);
    t.observe(d.workerId, predicted, reportedTokens, isl, this.o.clock.now(), upTo);
  }

  /** The truth check's report now (applies its time rule first); null without a truth check. */
  truthReport(): TruthReport | null {
    return this.truth?.evaluate(this.o.clock.now()) ?? null;
  }

  /** First token (§9.2 step 2). False if the request holds no booking. */
  markPrefillCompleted(requestId: string): boolean {
    const ok = this.bookings.markPrefillCompleted(requestId);
    if (ok) this.drain();
    return ok;
  }

  /** Output tokens so far (cumulative) after a response item (§9.3; no-op unless output blocks are tracked). */
  onOutputTokens(requestId: string, outputTokens: number): boolean {
    return this.bookings.onOutputTokens(requestId, outputTokens);
  }

  /**
   * End of stream, error or disconnect (§9.2 step 3); also cancels a parked request. Idempotent:
   * false when the request is not (or no longer) known.
   */
  free(requestId: string): boolean {
    if (this.queue?.cancel(requestId)) return true;
    if (!this.bookings.free(requestId)) return false;
    this.drain();
    return true;
  }

  /** Alias of `free` for a client that went away. */
  cancel(requestId: string): boolean {
    return this.free(requestId);
  }

  /** Runs the expiry backstop and the session reaper now (the 30 s timer calls this). */
  maintain(): void {
    const now = this.o.clock.now();
    this.seqs.maybeExpire(now);
    this.sessions.reap(now);
    this.drain();
  }

  private armMaintenance(): void {
    if (this.maintTimer !== null || this.closed) return;
    const handle = this.o.clock.setTimeout(() => {
      this.maintTimer = null;
      this.maintain();
      if (this.seqs.activeRequestCount > 0 || this.sessions.bindings.size > 0 || this.bookings.size > 0)
        this.armMaintenance();
    }, MAINTENANCE_INTERVAL_MS);
    this.maintTimer = { handle };
  }

  /** Sticky-session bindings held (at most `MAX_SESSION_BINDINGS`, issue 17). */
  get sessionCount(): number {
    return this.sessions.bindings.size;
  }

  /** Bindings dropped to stay within `MAX_SESSION_BINDINGS`. */
  get sessionsEvicted(): number {
    return this.sessions.bindings.evicted;
  }

  /** Bytes of earlier turns' block hashes kept (at most `MAX_HASH_CHAIN_BYTES`), chains dropped, blocks reused. */
  get hashChains(): { held: number; limit: number; evicted: number; reusedBlocks: number } {
    const c = this.overlap.chains;
    return { held: c.held, limit: c.limitBytes, evicted: c.evicted, reusedBlocks: c.reusedBlocks };
  }

  /** Current binding of a session, without refreshing it. */
  sessionBinding(sessionId: string): SessionBinding | undefined {
    return this.sessions.bindings.peek(sessionId);
  }

  // ---------------------------------------------------------------------------------------------
  // Busy monitor (§11), loads (§5.5), replica sync (§5.4)

  /** Ingests an `ActiveLoad` (router- or worker-published). False for an unknown rank. */
  ingestLoad(load: {
    worker_id: bigint;
    dp_rank: number;
    active_decode_blocks?: number | null;
    active_prefill_tokens?: number | null;
    kv_used_blocks?: number | null;
  }): boolean {
    if (!load || typeof load.worker_id !== 'bigint')
      throw invalidArgument('worker_id', 'must be a u64 bigint');
    if (!Number.isSafeInteger(load.dp_rank) || load.dp_rank < 0)
      throw invalidArgument('dp_rank', 'must be an integer >= 0', load.dp_rank);
    const r = this.workers.rank(load.worker_id, load.dp_rank);
    if (!r) return false;
    r.busy.observe(load);
    return true;
  }

  get busyThresholds(): BusyThresholds {
    return { ...this.gate.busyThresholds };
  }

  /** Sets thresholds at runtime (`/busy_threshold`); a field given as null disables that check. */
  setBusyThresholds(t: Partial<BusyThresholds>): BusyThresholds {
    const next = validateBusyThresholds({ ...this.gate.busyThresholds, ...pickDefined(t) });
    this.gate.setBusyThresholds(next);
    return { ...next };
  }

  /** The router's projected load of one rank (§9). */
  rankLoad(worker: WorkerWithDpRank): {
    active_prefill_tokens: number;
    active_decode_blocks: number;
    active_requests: number;
  } {
    return this.seqs.load(worker, this.o.clock.now());
  }

  /** Requests booked in the tracker (own and replica-synced). */
  get activeRequestCount(): number {
    return this.seqs.activeRequestCount;
  }

  /** Requests this router decided and has not seen freed. */
  get liveRequestCount(): number {
    return this.bookings.size;
  }

  private publishLoadOf(w: WorkerWithDpRank): void {
    const l = this.seqs.load(w, this.o.clock.now());
    try {
      this.o.hooks.publishLoad!({
        worker_id: w.worker_id,
        dp_rank: w.dp_rank,
        active_decode_blocks: l.active_decode_blocks,
        active_prefill_tokens: l.active_prefill_tokens,
        kv_used_blocks: null,
      });
    } catch (e) {
      this.report(e, 'publishLoad');
    }
  }

  /** Applies another router's booking event; own events (same router_id) are ignored. True if state changed. */
  applyReplicaEvent(ev: ActiveSequenceEvent): boolean {
    return this.replica.apply(ev);
  }

  /** Replica reconciliation (issue 18): this router's live request ids for its peers. */
  replicaLiveList(): ReplicaLiveList | null {
    return this.replica.liveList();
  }

  /** A peer's live list: its bookings missing from it are freed; returns how many. */
  applyReplicaLiveList(list: ReplicaLiveList): number {
    return this.replica.applyLive(list);
  }

  /** Frees the bookings of peers whose live lists stopped `silentMs` ago; returns how many. */
  expireSilentReplicas(silentMs: number): number {
    return this.replica.expireSilent(silentMs);
  }

  /** Peer bookings tracked for reconciliation. */
  get replicaPeerBookings(): number {
    return this.replica.peerBookings;
  }

  /** Stops the timers and fails every parked request (`router_closed`, 503). */
  close(): void {
    this.closed = true;
    if (this.maintTimer !== null) this.o.clock.clearTimeout(this.maintTimer.handle);
    this.maintTimer = null;
    this.queue?.close();
  }
}
