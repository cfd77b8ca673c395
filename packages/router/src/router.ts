/**
 * KvRouter: one router for one (model, worker component), PROTOCOL.md §0. Composition of the pure
 * pieces: hashing (protocols), the index (an injected KvIndexer), the load model, cost, pick, queue
 * and busy predicates (core-cost). Clock, timers, randomness and every transport are injected.
 *
 * The admission gate (filters → load snapshot → park check → cost → pick → book → record) is one
 * synchronous call with no await inside, so each decision sees the previous booking (§10).
 */
import {
  CandidateBatch,
  CostBreakdown,
  DEFAULT_BUSY_THRESHOLDS,
  DEFAULT_COST_PARAMS,
  DEFAULT_CUDA_TO_CPU_RATIO,
  DEFAULT_EXPIRY_MS,
  DEFAULT_QUEUE_THRESHOLD,
  EXPIRY_CHECK_INTERVAL_MS,
  MultiWorkerSequences,
  RoundRobin,
  RouterQueue,
  allWorkersBusy,
  applyOverrides,
  computeCosts,
  effectiveBusyThresholds,
  noEligibleWorkers,
  pickIndex,
  pinnedWorkerBusy,
  preferredTaintMultiplier,
  priorityJump,
  selectDeviceAwareWeighted,
  selectDirect,
  selectLeastLoaded,
  selectRandom,
  validateBusyThresholds,
  validateCostParams,
  ROUTER_MODES,
  QUEUE_POLICIES,
  type BusyThresholds,
  type CostParams,
  type Instance,
  type RouterConfigOverride,
  type RouterMode,
} from '@kvrouter/core-cost';
import {
  KvrError,
  PREFILL_INSTANCE_HEADER,
  WORKER_INSTANCE_HEADER,
  computeLocalBlockHashes,
  computeSequenceHashes,
  isQueryOnly,
  pairsToU64s,
  parseU64,
  stringifyJson,
  type ActiveSequenceEvent,
  type RouterId,
  type SequenceHash,
  type WorkerId,
  type WorkerWithDpRank,
} from '@kvrouter/protocols';
import { ApproxIndexer, type KvIndexer } from '@kvrouter/radix-indexer';
import type { Clock, TimerHandle } from './clock.js';
import {
  SESSION_CAPACITY_OF_STR_LEN,
  SESSION_OPEN_GRACE_S,
  SESSION_REAP_INTERVAL_MS,
  StickySessions,
  type SessionBinding,
} from './sessions.js';
import type {
  CandidateTerms,
  DecisionExplanation,
  KvRouterOptions,
  PrefillDurationPredictor,
  ReasonCode,
  RouteRequest,
  RouterOverhead,
  RouterPhase,
  RoutingDecision,
  RoutingRecorder,
} from './types.js';
import {
  normalizeWorkerConfig,
  WorkerSet,
  type RankEntry,
  type WorkerConfig,
  type WorkerEntry,
} from './workers.js';

/** Periodic queue re-check (§10): 60 s, or 100 ms with the AIC prefill model. */
export const QUEUE_RECHECK_MS = 60_000;
export const QUEUE_RECHECK_AIC_MS = 100;
/** Maintenance tick: lazy-expiry backstop (§9.2) and session reaper (§12), both every 30 s. */
export const MAINTENANCE_INTERVAL_MS = Math.min(EXPIRY_CHECK_INTERVAL_MS, SESSION_REAP_INTERVAL_MS);
export const DEFAULT_OVERLAP_REFRESH_AFTER_SECS = 10;

const show = (v: unknown): string =>
  typeof v === 'string' ? `'${v}'` : typeof v === 'object' && v !== null ? typeof v : String(v as number);
const invalid = (field: string, reason: string, v?: unknown): KvrError =>
  new KvrError('invalid_argument', `${field} ${reason}${v === undefined ? '' : `, got ${show(v)}`}`, 400, {
    field,
  });

interface Pin {
  workerId: WorkerId;
  dpRank: number | null;
  reason: 'pinned' | 'session';
}

interface SessionIntent {
  sessionId: string;
  action: 'open' | 'close' | 'bind' | undefined;
  timeoutS: number;
  /** Binding found at arrival (refreshed). */
  binding: SessionBinding | undefined;
}

/** One request between arrival and decision. */
interface Pending {
  id: string;
  isl: number;
  tokens: Uint32Array;
  /** Local / sequence hashes as (lo, hi) pairs: scratch views until parked, then copies. */
  local: Uint32Array;
  seq: Uint32Array;
  scores: Map<string, number> | null;
  params: CostParams;
  pin: Pin | null;
  queryOnly: boolean;
  osl: number | null;
  priority: number;
  strictPriority: number | null;
  allowed: ReadonlySet<bigint> | null;
  required: ReadonlySet<string> | null;
  preferred: ReadonlyMap<string, number> | null;
  session: SessionIntent | null;
  loraName: string | undefined;
  explain: boolean;
  queuedAt: number | null;
  refreshed: boolean;
  tStart: number;
  tHash: number;
  tSeq: number;
  tFind: number;
  settle: ((d: RoutingDecision) => void) | null;
  fail: ((e: unknown) => void) | null;
  unlisten: (() => void) | null;
}

/** A request the router has decided and not yet seen freed. */
interface Live {
  worker: WorkerWithDpRank;
  /** Entry of the worker set at decision time (in-flight count), if the worker was known. */
  entry: WorkerEntry | undefined;
  /** Load booked in the active-sequence tracker. */
  booked: boolean;
  /** `close` action: send `close_session` to this worker once the request ends. */
  closeSession: { sessionId: string; worker: WorkerWithDpRank } | null;
}

const EMPTY = new Uint32Array(0);

export class KvRouter {
  readonly blockSize: number;
  readonly mode: RouterMode;
  readonly routerId: bigint | null;
  readonly phase: RouterPhase;
  private readonly clock: Clock;
  private readonly random: () => number;
  private readonly randomU32: () => number;
  private readonly hr: () => number;
  private readonly workers = new WorkerSet();
  private readonly seqs: MultiWorkerSequences;
  private readonly params: CostParams;
  private thresholds: BusyThresholds;
  private busyOn: boolean;
  private readonly queue: RouterQueue<Pending> | null;
  private readonly queueThreshold: number | null;
  private readonly queueRecheckMs: number;
  private readonly refreshMs: number;
  private readonly indexer: (KvIndexer & Partial<RoutingRecorder>) | null;
  private readonly side: (KvIndexer & RoutingRecorder) | null;
  private readonly predictor: PrefillDurationPredictor | null;
  private readonly isEagle: boolean;
  private readonly cudaToCpuRatio: number;
  private readonly opts: KvRouterOptions;
  private readonly sessions = new StickySessions();
  private readonly live = new Map<string, Live>();
  private readonly rr = new RoundRobin();
  // Scoring scratch, reused by every decision (the admission gate is synchronous).
  private readonly batch = new CandidateBatch(64);
  private readonly out = new CostBreakdown();
  private cand: RankEntry[] = [];
  private localBuf = new Uint32Array(2048);
  private seqBuf = new Uint32Array(2048);
  private epoch = 0;
  private draining = false;
  private queueTimer: TimerHandle | null = null;
  private maintTimer: TimerHandle | null = null;
  private closed = false;

  constructor(opts: KvRouterOptions) {
    if (!opts || typeof opts !== 'object') throw invalid('options', 'must be an object');
    const bs = opts.blockSize;
    if (typeof bs !== 'number' || !Number.isSafeInteger(bs) || bs < 1)
      throw invalid('blockSize', 'must be an integer >= 1', bs);
    const clock = opts.clock;
    if (
      !clock ||
      typeof clock.now !== 'function' ||
      typeof clock.setTimeout !== 'function' ||
      typeof clock.clearTimeout !== 'function'
    )
      throw invalid('clock', 'must provide now(), setTimeout() and clearTimeout()');
    if (typeof opts.random !== 'function') throw invalid('random', 'must be a function returning [0, 1)');
    const mode = opts.mode ?? 'kv';
    if (!ROUTER_MODES.includes(mode))
      throw invalid('mode', `must be one of ${ROUTER_MODES.join(', ')}`, mode);
    const policy = opts.queuePolicy ?? 'fcfs';
    if (!QUEUE_POLICIES.includes(policy))
      throw invalid('queuePolicy', `must be one of ${QUEUE_POLICIES.join(', ')}`, policy);
    const qt = opts.queueThreshold === undefined ? DEFAULT_QUEUE_THRESHOLD : opts.queueThreshold;
    if (qt !== null && !(typeof qt === 'number' && qt > 0 && Number.isFinite(qt)))
      throw invalid('queueThreshold', 'must be greater than 0 (null disables queueing)', qt);
    const refresh = opts.overlapRefreshAfterSecs ?? DEFAULT_OVERLAP_REFRESH_AFTER_SECS;
    if (!(typeof refresh === 'number' && refresh >= 0 && Number.isFinite(refresh)))
      throw invalid('overlapRefreshAfterSecs', 'must be a finite number >= 0', refresh);
    const expirySecs = opts.activeRequestExpirySecs ?? DEFAULT_EXPIRY_MS / 1000;
    if (!(typeof expirySecs === 'number' && expirySecs > 0 && Number.isFinite(expirySecs)))
      throw invalid('activeRequestExpirySecs', 'must be a finite number > 0', expirySecs);
    const ratio = opts.cudaToCpuRatio ?? DEFAULT_CUDA_TO_CPU_RATIO;
    if (!Number.isSafeInteger(ratio) || ratio < 1)
      throw invalid('cudaToCpuRatio', 'must be an integer >= 1', ratio);
    const phase = opts.phase ?? 'aggregated';
    if (phase !== 'aggregated' && phase !== 'prefill' && phase !== 'decode')
      throw invalid('phase', 'must be aggregated, prefill or decode', phase);
    if (opts.publishActiveSequenceEvent && typeof opts.routerId !== 'bigint')
      throw invalid('routerId', 'is required (a u64 bigint) for replica sync');
    if (opts.decisionLog) {
      const r = opts.decisionLog.sampleRate;
      if (typeof opts.decisionLog.sink !== 'function')
        throw invalid('decisionLog.sink', 'must be a function');
      if (!(typeof r === 'number' && r >= 0 && r <= 1))
        throw invalid('decisionLog.sampleRate', 'must be between 0.0 and 1.0', r);
    }
    const params = validateCostParams({ ...DEFAULT_COST_PARAMS, ...opts.cost });
    const thresholds = validateBusyThresholds(
      effectiveBusyThresholds(opts.admissionControl ?? 'none', {
        ...DEFAULT_BUSY_THRESHOLDS,
        ...opts.busyThresholds,
      }),
    );
    const pttl = opts.predictedTtlSecs;
    if (pttl != null && !(typeof pttl === 'number' && pttl > 0 && Number.isFinite(pttl)))
      throw invalid('predictedTtlSecs', 'must be > 0', pttl);

    this.opts = opts;
    this.blockSize = bs;
    this.clock = clock;
    this.mode = mode;
    this.phase = phase;
    this.routerId = opts.routerId ?? null;
    const random = opts.random;
    this.random = random;
    this.randomU32 = () => (random() * 4294967296) >>> 0;
    this.hr = opts.hrtime ?? (() => clock.now());
    this.params = params;
    this.thresholds = thresholds;
    this.busyOn = anyThreshold(thresholds);
    this.queueThreshold = mode === 'kv' ? qt : null;
    this.queue =
      this.queueThreshold === null
        ? null
        : new RouterQueue<Pending>(policy, clock.now(), { strictPriority: opts.strictPriority ?? false });
    this.predictor = opts.prefillDurationPredictor ?? null;
    this.queueRecheckMs = this.predictor ? QUEUE_RECHECK_AIC_MS : QUEUE_RECHECK_MS;
    this.refreshMs = refresh * 1000;
    this.indexer = opts.indexer ?? null;
    this.side =
      opts.sideIndexer ??
      (pttl != null
        ? new ApproxIndexer({ ttlSecs: pttl, maxTreeSize: Number.MAX_SAFE_INTEGER, now: () => clock.now() })
        : null);
    this.isEagle = opts.isEagle ?? false;
    this.cudaToCpuRatio = ratio;
    this.seqs = new MultiWorkerSequences({
      blockSize: bs,
      trackActiveBlocks: params.trackActiveBlocks,
      assumeKvReuse: params.assumeKvReuse,
      trackPrefillTokens: params.trackPrefillTokens,
      trackOutputBlocks: opts.trackOutputBlocks ?? false,
      expiryMs: expirySecs * 1000,
      randomU32: this.randomU32,
      onChange: opts.publishLoad ? (w) => this.publishLoadOf(w) : undefined,
      onExpired: (id) => this.onExpired(id),
    });
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
    for (const r of change.removedRanks) {
      for (const id of this.seqs.removeWorkerDpRank(n.id, r)) this.forget(id);
      this.indexer?.removeWorkerDpRank(n.id, r);
      this.side?.removeWorkerDpRank(n.id, r);
    }
    if (change.removedRanks.length > 0) this.sessions.dropWorker(n.id, new Set(change.removedRanks));
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
      throw invalid('workerId', 'must be a u64', workerId);
    }
    if (!this.workers.remove(id)) return false;
    for (const rid of this.seqs.removeWorker(id)) this.forget(rid);
    this.indexer?.removeWorker(id);
    this.side?.removeWorker(id);
    this.sessions.dropWorker(id);
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
   * admitted (§10); rejects with a KvrError per §8.1 / §12 / FLAGS.md.
   */
  route(req: RouteRequest): Promise<RoutingDecision> {
    try {
      if (this.closed) throw new KvrError('router_closed', 'router is closed', 503);
      const p = this.prepare(req);
      if (this.mode !== 'kv') return this.afterDecision(p, this.admitSimple(p));
      // Earlier arrivals first: a newcomer never overtakes a queued request that could go now.
      if (this.queue && this.queue.size > 0) this.drain();
      this.hashAndMatch(p, req);
      const d = this.tryAdmit(p);
      if (d) return this.afterDecision(p, d);
      return this.park(p, req.signal);
    } catch (e) {
      return Promise.reject(e instanceof Error ? e : new Error(String(e)));
    }
  }

  private prepare(req: RouteRequest): Pending {
    if (!req || typeof req !== 'object') throw invalid('request', 'must be an object');
    const id = req.requestId;
    if (typeof id !== 'string' || id.length === 0)
      throw invalid('requestId', 'must be a non-empty string', id);
    const nv = req.nvext;
    const tokens = req.tokens ?? nv?.token_data;
    if (this.mode === 'kv' && !(tokens instanceof Uint32Array))
      throw invalid('tokens', 'must be a Uint32Array of token ids');
    const isl = req.isl ?? tokens?.length ?? 0;
    if (!Number.isSafeInteger(isl) || isl < 0) throw invalid('isl', 'must be an integer >= 0', isl);
    if (req.loraName !== undefined && typeof req.loraName !== 'string')
      throw invalid('loraName', 'must be a string');
    const queryOnly = req.queryOnly === true || isQueryOnly(nv);
    if (!queryOnly && (this.live.has(id) || this.queue?.has(id)))
      throw new KvrError('duplicate_request', `request ${id} is already being routed`, 400, {
        field: 'requestId',
      });

    const hints = nv?.agent_hints;
    let ov: RouterConfigOverride | undefined = req.overrides;
    if (hints?.kv_overlap_score_credit != null && ov?.overlap_score_credit == null)
      ov = { ...ov, overlap_score_credit: hints.kv_overlap_score_credit };
    const params = applyOverrides(this.params, ov);

    let pin = this.resolvePin(req);
    if (this.mode === 'direct' && !pin) selectDirect(null);
    const now = this.clock.now();

    let session: SessionIntent | null = null;
    const sc = nv?.session_control;
    if (sc && this.mode === 'kv') {
      const { binding, expired } = this.sessions.lookup(sc.session_id, now);
      if (expired) this.endSession(expired);
      session = { sessionId: sc.session_id, action: sc.action, timeoutS: sc.timeout, binding };
      if (binding && !pin)
        pin = { workerId: binding.worker.worker_id, dpRank: binding.worker.dp_rank, reason: 'session' };
      if (sc.action === 'close' && !queryOnly) this.sessions.unbind(sc.session_id);
    }

    let allowed: Set<bigint> | null = null;
    if (req.allowedWorkerIds != null) {
      allowed = new Set();
      for (const w of req.allowedWorkerIds) allowed.add(parseU64(w));
    }
    const c = req.constraints;
    const t = this.hr();
    return {
      id,
      isl,
      tokens: tokens ?? EMPTY,
      local: EMPTY,
      seq: EMPTY,
      scores: null,
      params,
      pin,
      queryOnly,
      osl: hints?.osl ?? null,
      priority: priorityJump(hints),
      strictPriority: hints?.strict_priority ?? null,
      allowed,
      required: c && c.required_taints.size > 0 ? c.required_taints : null,
      preferred: c && c.preferred_taints.size > 0 ? c.preferred_taints : null,
      session,
      loraName: req.loraName,
      explain: req.explain === true || this.opts.explain === true,
      queuedAt: null,
      refreshed: false,
      tStart: t,
      tHash: 0,
      tSeq: 0,
      tFind: 0,
      settle: null,
      fail: null,
      unlisten: null,
    };
  }

  /** §15 pins per phase; the header wins over nvext. */
  private resolvePin(req: RouteRequest): Pin | null {
    const nv = req.nvext;
    const header = req.pinHeader !== undefined && req.pinHeader !== '' ? req.pinHeader : undefined;
    let id: bigint | undefined;
    let rank: number | undefined;
    if (header !== undefined) {
      try {
        id = parseU64(header.trim());
      } catch {
        const name = this.phase === 'prefill' ? PREFILL_INSTANCE_HEADER : WORKER_INSTANCE_HEADER;
        throw new KvrError('invalid_request', `${name} must be a u64 (an integer or a decimal string)`, 400, {
          field: name,
        });
      }
    }
    if (this.phase === 'prefill') {
      id ??= nv?.prefill_worker_id;
      rank = nv?.prefill_dp_rank;
    } else {
      id ??=
        this.phase === 'decode' ? (nv?.decode_worker_id ?? nv?.backend_instance_id) : nv?.backend_instance_id;
      rank = nv?.dp_rank;
    }
    return id === undefined ? null : { workerId: id as WorkerId, dpRank: rank ?? null, reason: 'pinned' };
  }

  /** Tokens → local hashes → sequence hashes → findMatches (primary, side). */
  private hashAndMatch(p: Pending, req: RouteRequest): void {
    const bs = this.blockSize;
    const need = 2 * Math.ceil((p.tokens.length + 1) / bs);
    if (this.localBuf.length < need) {
      this.localBuf = new Uint32Array(need * 2);
      this.seqBuf = new Uint32Array(need * 2);
    }
    const opts =
      p.loraName || req.mmHashes || this.isEagle
        ? { loraName: p.loraName, mmHashes: req.mmHashes, isEagle: this.isEagle }
        : undefined;
    p.local = computeLocalBlockHashes(p.tokens, bs, opts, this.localBuf);
    const t1 = this.hr();
    p.seq = computeSequenceHashes(p.local, this.seqBuf);
    const t2 = this.hr();
    try {
      p.scores = this.findScores(p.seq);
    } catch (e) {
      // As with a failing remote index (§7.7): route with empty overlaps rather than fail the request.
      p.scores = null;
      this.report(e, 'findMatches');
    }
    const t3 = this.hr();
    p.tHash = t1 - p.tStart;
    p.tSeq = t2 - t1;
    p.tFind = t3 - t2;
  }

  /** Per-rank overlap (§7.6: max of primary and side); null when no index is configured. */
  private findScores(seq: Uint32Array): Map<string, number> | null {
    const a = this.indexer ? this.indexer.findMatchesBySeq(seq).scores : null;
    if (!this.side) return a;
    const b = this.side.findMatchesBySeq(seq).scores;
    if (!a || a.size === 0) return b;
    if (b.size === 0) return a;
    const m = new Map(a);
    for (const [k, v] of b) if (v > (m.get(k) ?? 0)) m.set(k, v);
    return m;
  }

  /**
   * The admission gate for kv mode: filters → load snapshot → park check → cost → pick → book →
   * record. Returns null when the request must park. Throws the §8.1 errors.
   */
  private tryAdmit(p: Pending): RoutingDecision | null {
    const t0 = this.hr();
    const now = this.clock.now();
    const pin = p.pin;
    let pinRank: RankEntry | undefined;
    if (pin) {
      const w = this.workers.get(pin.workerId);
      if (!w) return this.unbookedPin(p, pin);
      pinRank = this.workers.rank(pin.workerId, pin.dpRank ?? w.dpStart);
      if (!pinRank) throw noEligibleWorkers();
    }
    const n = this.filter(p, pinRank, now);
    const b = this.batch;
    const cand = this.cand;
    this.seqs.fillLoads(b, p.seq, now);
    this.fillOverlaps(p, n);
    if (p.preferred) {
      for (let i = 0; i < n; i++) {
        let sum = 0;
        for (const [t, wgt] of p.preferred) if (cand[i].owner.taints.has(t)) sum += wgt;
        b.taintMultiplier[i] = preferredTaintMultiplier(sum);
      }
    }

    const threshold = this.queueThreshold;
    if (threshold !== null && !p.queryOnly) {
      let parked = true;
      for (let i = 0; i < n; i++) {
        if (!(b.activePrefillTokens[i] > threshold * cand[i].owner.maxNumBatchedTokens)) {
          parked = false;
          break;
        }
      }
      if (parked) return null;
    }

    let refreshed = false;
    if (p.queuedAt !== null && !p.refreshed && this.refreshMs > 0 && now - p.queuedAt > this.refreshMs) {
      p.refreshed = refreshed = true;
      try {
        p.scores = this.findScores(p.seq);
        this.fillOverlaps(p, n);
      } catch (e) {
        // §10: on failure the overlaps from arrival stay.
        this.report(e, 'overlap refresh');
      }
    }

    const out = this.out;
    const params = p.params;
    computeCosts(b, { isl: p.isl, blockSize: this.blockSize }, params, out);
    const idx = pinRank ? 0 : pickIndex(out.cost, n, params.temperature, this.random);
    const chosen = cand[idx];
    const reason: ReasonCode = pin ? pin.reason : params.temperature === 0 ? 'kv_argmin' : 'kv_softmax';
    const overlap = b.deviceBlocks[idx];
    const cached = out.cachedTokens[idx];
    let booked = false;
    if (!p.queryOnly) {
      booked = this.book(p, chosen, cached, now);
      this.live.set(p.id, { worker: chosen.worker, entry: chosen.owner, booked, closeSession: null });
      chosen.owner.inflight++;
      this.armMaintenance();
      this.record(chosen.worker, p);
    }
    const explanation: DecisionExplanation = {
      reason,
      mode: this.mode,
      temperature: params.temperature,
      candidateCount: n,
      busyFiltered: this.lastBusyFiltered,
      chosen: this.termsAt(idx),
      queuedMs: p.queuedAt === null ? 0 : now - p.queuedAt,
      overlapRefreshed: refreshed || p.refreshed,
    };
    const logged = this.sampled();
    if (p.explain || logged) {
      const all: CandidateTerms[] = new Array<CandidateTerms>(n);
      for (let i = 0; i < n; i++) all[i] = this.termsAt(i);
      explanation.candidates = all;
    }
    const d = this.decision(p, chosen.worker, overlap, cached, out.requestBlocks, booked, explanation);
    if (logged) this.logDecision(d);
    const t1 = this.hr();
    if (this.opts.onOverhead) this.emitOverhead(p, t1 - t0, t1);
    return d;
  }

  private lastBusyFiltered = 0;

  /**
   * §8.1 filters, in order: allowed workers, pin, dp bounds (resolved with the pin), required
   * taints, busy. Fills `cand` and sizes the batch; throws when nothing is left.
   */
  private filter(p: Pending, pinRank: RankEntry | undefined, now: number): number {
    this.epoch++;
    const ranks = pinRank ? [pinRank] : this.workers.ranks;
    const cand = this.cand;
    const allowed = p.allowed;
    const required = p.required;
    let n = 0;
    let compatible = 0;
    let busy = 0;
    for (let i = 0; i < ranks.length; i++) {
      const r = ranks[i];
      const w = r.owner;
      if (allowed && !allowed.has(w.id)) continue;
      if (required && !hasAll(w.taints, required)) continue;
      compatible++;
      if (this.busyOn && this.workerBusy(w, now)) {
        busy++;
        continue;
      }
      r.candIndex = n;
      r.candEpoch = this.epoch;
      cand[n++] = r;
    }
    this.lastBusyFiltered = busy;
    if (n === 0) {
      if (compatible === 0) throw noEligibleWorkers();
      if (pinRank) throw pinnedWorkerBusy(pinRank.worker);
      throw allWorkersBusy();
    }
    cand.length = n;
    const b = this.batch.reset(n);
    for (let i = 0; i < n; i++) {
      const r = cand[i];
      b.workers[i] = r.worker;
      b.loadSlot[i] = r.loadSlot;
      b.loadGen[i] = r.loadGen;
    }
    return n;
  }

  /** §11: a worker is busy only if all its ranks are; in kv mode the router's tracker feeds the signals. */
  private workerBusy(w: WorkerEntry, now: number): boolean {
    if (w.busyEpoch === this.epoch) return w.busyNow;
    let all = w.ranks.length > 0;
    const cap = { totalKvBlocks: w.totalKvBlocks, maxNumBatchedTokens: w.maxNumBatchedTokens };
    for (const r of w.ranks) {
      if (this.mode === 'kv') {
        const s = this.seqs.rank(r.worker);
        if (s)
          r.busy.observe({
            active_prefill_tokens: s.activePrefillTokens(now),
            active_decode_blocks: s.activeDecodeBlocks,
          });
      }
      if (!r.busy.isBusy(this.thresholds, cap)) {
        all = false;
        break;
      }
    }
    w.busyEpoch = this.epoch;
    w.busyNow = all;
    return all;
  }

  /** Scores hold only the matching ranks: visit those, not every candidate. */
  private fillOverlaps(p: Pending, n: number): void {
    const dev = this.batch.deviceBlocks;
    dev.fill(0, 0, n);
    const s = p.scores;
    if (!s || s.size === 0) return;
    const byKey = this.workers.byKey;
    const epoch = this.epoch;
    // forEach: `for (const [k, v] of map)` allocates an entry array per matched rank.
    s.forEach((v, key) => {
      const r = byKey.get(key);
      if (r !== undefined && r.candEpoch === epoch) dev[r.candIndex] = v;
    });
  }

  /** AddRequest on the chosen rank (§9.2) and its replica-sync event (§5.4). */
  private book(p: Pending, r: RankEntry, cachedTokens: number, now: number): boolean {
    const params = p.params;
    let expectedMs: number | null = null;
    if (this.predictor && params.trackPrefillTokens) {
      expectedMs = this.predictor({
        worker: r.worker,
        isl: p.isl,
        prefixTokens: Math.min(cachedTokens, p.isl),
      });
      if (expectedMs !== null && !(expectedMs >= 0 && Number.isFinite(expectedMs)))
        throw invalid('prefillDurationPredictor', 'must return a finite number >= 0 or null', expectedMs);
    }
    const ok = this.seqs.addRequest(
      r.worker,
      {
        requestId: p.id,
        isl: p.isl,
        seqHashes: p.seq,
        cachedTokens,
        expectedOutputTokens: p.osl,
        expectedPrefillDurationMs: expectedMs,
        assumeKvReuse: params.assumeKvReuse,
        trackPrefillTokens: params.trackPrefillTokens,
      },
      now,
    );
    if (ok && this.opts.publishActiveSequenceEvent) {
      const prefill = params.trackPrefillTokens ? p.isl - Math.min(cachedTokens, p.isl) : 0;
      let tokenSeq: SequenceHash[] | null = null;
      if (params.trackActiveBlocks) {
        const held = this.seqs.rank(r.worker)?.requestBlocks(p.id);
        tokenSeq = held ? (pairsToU64s(held) as SequenceHash[]) : null;
      }
      this.publishSeq({
        request_id: p.id,
        worker: r.worker,
        router_id: this.routerId as RouterId,
        ...(p.loraName ? { lora_name: p.loraName } : {}),
        data: {
          AddRequest: {
            token_sequence: tokenSeq,
            track_prefill_tokens: params.trackPrefillTokens,
            expected_output_tokens: p.osl,
            prefill_load_hint:
              prefill > 0
                ? {
                    initial_effective_prefill_tokens: prefill,
                    expected_prefill_duration:
                      expectedMs === null
                        ? null
                        : {
                            secs: Math.floor(expectedMs / 1000),
                            nanos: Math.round((expectedMs % 1000) * 1e6),
                          },
                  }
                : null,
          },
        },
      });
    }
    return ok;
  }

  /** §7.5 / §7.6: approximate and side indexes learn from the decision. */
  private record(w: WorkerWithDpRank, p: Pending): void {
    const n = p.local.length >> 1;
    if (n === 0) return;
    try {
      if (this.recordPrimary) this.indexer?.recordRouting?.(w, p.local, p.seq, n);
    } catch (e) {
      // An event-fed pool has the method but refuses (`not_approximate`): stop asking. Building and
      // catching that error cost ~20 µs per decision.
      if (e instanceof KvrError && e.code === 'not_approximate') this.recordPrimary = false;
      // The request is booked and will be dispatched; a prediction that failed is only a lost hint.
      else this.report(e, 'recordRouting');
    }
    try {
      this.side?.recordRouting(w, p.local, p.seq, n);
    } catch (e) {
      this.report(e, 'recordRouting');
    }
  }

  private recordPrimary = true;

  /** A pin to a worker the router does not know: sent direct without booking (§15). */
  private unbookedPin(p: Pending, pin: Pin, reason: ReasonCode = 'pinned_unbooked'): RoutingDecision {
    const w = { worker_id: pin.workerId, dp_rank: pin.dpRank ?? 0 } as WorkerWithDpRank;
    if (!p.queryOnly) this.live.set(p.id, { worker: w, entry: undefined, booked: false, closeSession: null });
    const requiredBlocks = Math.ceil(p.isl / this.blockSize);
    const d = this.decision(p, w, 0, 0, requiredBlocks, false, this.simpleExplanation(reason));
    if (this.sampled()) this.logDecision(d);
    return d;
  }

  /** round-robin, random, least-loaded, device-aware-weighted, direct (§8.8). */
  private admitSimple(p: Pending): RoutingDecision {
    let entry: WorkerEntry | undefined;
    let dpRank: number;
    let reason: ReasonCode;
    const pin = p.pin;
    this.epoch++;
    const now = this.clock.now();
    if (pin) {
      entry = this.workers.get(pin.workerId);
      if (!entry) return this.unbookedPin(p, pin, this.mode === 'direct' ? 'direct' : 'pinned_unbooked');
      dpRank = pin.dpRank ?? entry.dpStart;
      if (!this.workers.rank(entry.id, dpRank) || !this.compatible(entry, p)) throw noEligibleWorkers();
      if (this.busyOn && this.workerBusy(entry, now))
        throw pinnedWorkerBusy({ worker_id: entry.id, dp_rank: dpRank });
      reason = this.mode === 'direct' ? 'direct' : 'pinned';
    } else {
      const pool = this.workers.workers.filter((w) => this.compatible(w, p));
      const inst: Instance[] = pool.map((w) => ({
        id: w.id,
        busy: this.busyOn && this.workerBusy(w, now),
        inflight: w.inflight,
        deviceType: w.deviceType,
      }));
      let i: number;
      switch (this.mode) {
        case 'random':
          i = selectRandom(inst, this.random());
          reason = 'random';
          break;
        case 'least-loaded':
          i = selectLeastLoaded(inst, this.random);
          reason = 'least_loaded';
          break;
        case 'device-aware-weighted':
          i = selectDeviceAwareWeighted(inst, this.random, this.cudaToCpuRatio);
          reason = 'device_aware_weighted';
          break;
        default:
          i = this.rr.select(inst);
          reason = 'round_robin';
      }
      entry = pool[i];
      dpRank = entry.dpStart;
    }
    const w = { worker_id: entry.id, dp_rank: dpRank } as WorkerWithDpRank;
    if (!p.queryOnly) {
      this.live.set(p.id, { worker: w, entry, booked: false, closeSession: null });
      entry.inflight++;
    }
    const d = this.decision(
      p,
      w,
      0,
      0,
      Math.ceil(p.isl / this.blockSize),
      false,
      this.simpleExplanation(reason),
    );
    if (this.sampled()) this.logDecision(d);
    return d;
  }

  private compatible(w: WorkerEntry, p: Pending): boolean {
    if (p.allowed && !p.allowed.has(w.id)) return false;
    return !p.required || hasAll(w.taints, p.required);
  }

  private simpleExplanation(reason: ReasonCode): DecisionExplanation {
    return {
      reason,
      mode: this.mode,
      temperature: 0,
      candidateCount: 1,
      busyFiltered: 0,
      chosen: null,
      queuedMs: 0,
      overlapRefreshed: false,
    };
  }

  private decision(
    p: Pending,
    worker: WorkerWithDpRank,
    overlapBlocks: number,
    cachedTokens: number,
    requiredBlocks: number,
    booked: boolean,
    explanation: DecisionExplanation,
  ): RoutingDecision {
    const d: RoutingDecision = {
      requestId: p.id,
      worker,
      workerId: worker.worker_id,
      dpRank: worker.dp_rank,
      overlapBlocks,
      cachedTokens,
      requiredBlocks,
      kvHitRate: requiredBlocks > 0 ? overlapBlocks / requiredBlocks : 0,
      booked,
      queryOnly: p.queryOnly,
      explanation,
    };
    if (p.queryOnly) d.tokenData = p.tokens;
    return d;
  }

  /** Session bookkeeping once a rank is chosen (§12); `open` waits for the RPC. */
  private afterDecision(p: Pending, d: RoutingDecision): Promise<RoutingDecision> {
    const s = p.session;
    if (!s || p.queryOnly) return Promise.resolve(d);
    const now = this.clock.now();
    const live = this.live.get(p.id);
    if (s.action === 'bind' && !s.binding) {
      this.sessions.bind(s.sessionId, d.worker, s.timeoutS * 1000, false, now);
      this.armMaintenance();
    } else if (s.action === 'close') {
      if (s.binding?.opened && live) live.closeSession = { sessionId: s.sessionId, worker: s.binding.worker };
    } else if (s.action === 'open') {
      const rpc = this.opts.sessionRpc;
      const payload = {
        action: 'open_session' as const,
        session_id: s.sessionId,
        timeout: s.timeoutS + SESSION_OPEN_GRACE_S,
        capacity_of_str_len: SESSION_CAPACITY_OF_STR_LEN,
      };
      const opening = rpc
        ? Promise.resolve().then(() => rpc(d.worker, payload))
        : Promise.reject(new Error('no session_control transport configured'));
      return opening.then(
        () => {
          this.sessions.bind(s.sessionId, d.worker, s.timeoutS * 1000, true, this.clock.now());
          this.armMaintenance();
          return d;
        },
        (e: unknown) => {
          // The request fails: its booking must not outlive it.
          this.free(p.id);
          throw new KvrError(
            'session_open_failed',
            `open_session ${s.sessionId} failed: ${errText(e)}`,
            503,
            {
              session_id: s.sessionId,
            },
          );
        },
      );
    }
    return Promise.resolve(d);
  }

  // ---------------------------------------------------------------------------------------------
  // Queue (§10)

  private park(p: Pending, signal: AbortSignal | undefined): Promise<RoutingDecision> {
    const q = this.queue!;
    if (signal?.aborted) throw cancelled(p.id);
    // The hashes live in scratch until now; a parked request needs its own copies.
    p.local = p.local.slice();
    p.seq = p.seq.slice();
    const now = this.clock.now();
    p.queuedAt = now;
    let best = 0;
    const b = this.batch;
    for (let i = 0; i < b.n; i++) if (b.deviceBlocks[i] > best) best = b.deviceBlocks[i];
    const promise = new Promise<RoutingDecision>((resolve, reject) => {
      p.settle = (d) => resolve(this.afterDecision(p, d));
      p.fail = reject;
    });
    q.push(
      {
        id: p.id,
        now,
        priorityJump: p.priority,
        isl: p.isl,
        cachedTokens: Math.min(p.isl, best * this.blockSize),
        strictPriority: p.strictPriority,
      },
      p,
    );
    if (signal) {
      const onAbort = () => this.free(p.id);
      signal.addEventListener('abort', onAbort, { once: true });
      p.unlisten = () => signal.removeEventListener('abort', onAbort);
    }
    this.queueChanged();
    return promise;
  }

  /** `update()`: admit from the head until the head must still park (head-of-line blocking accepted). */
  private drain(): void {
    const q = this.queue;
    if (!q || q.size === 0 || this.draining) return;
    this.draining = true;
    let changed = false;
    try {
      while (q.size > 0) {
        const head = q.peek()!;
        let d: RoutingDecision | null;
        try {
          d = this.tryAdmit(head);
        } catch (e) {
          q.pop();
          changed = true;
          head.unlisten?.();
          head.fail!(e);
          continue;
        }
        if (!d) break;
        q.pop();
        changed = true;
        head.unlisten?.();
        head.settle!(d);
      }
    } finally {
      this.draining = false;
    }
    if (changed) this.queueChanged();
  }

  private queueChanged(): void {
    const q = this.queue!;
    this.opts.onQueueChange?.(q.size);
    if (q.size > 0 && this.queueTimer === null) {
      this.queueTimer = this.clock.setTimeout(() => {
        this.queueTimer = null;
        this.drain();
        if (q.size > 0) this.queueChanged();
      }, this.queueRecheckMs);
    } else if (q.size === 0 && this.queueTimer !== null) {
      this.clock.clearTimeout(this.queueTimer);
      this.queueTimer = null;
    }
  }

  /** Requests parked right now. */
  get queueDepth(): number {
    return this.queue?.size ?? 0;
  }

  // ---------------------------------------------------------------------------------------------
  // Lifecycle hooks for dispatchers

  /** First token (§9.2 step 2). False if the request holds no booking. */
  markPrefillCompleted(requestId: string): boolean {
    const e = this.live.get(requestId);
    if (!e?.booked) return false;
    const ok = this.seqs.markPrefillCompleted(requestId, this.clock.now());
    if (ok) {
      this.publishSeq({
        request_id: requestId,
        worker: e.worker,
        router_id: this.routerId as RouterId,
        data: 'MarkPrefillCompleted',
      });
      this.drain();
    }
    return ok;
  }

  /** Output tokens so far (cumulative) after a response item (§9.3; no-op unless output blocks are tracked). */
  onOutputTokens(requestId: string, outputTokens: number): boolean {
    const e = this.live.get(requestId);
    if (!e?.booked) return false;
    return this.seqs.addOutputTokens(requestId, outputTokens, this.clock.now());
  }

  /**
   * End of stream, error or disconnect (§9.2 step 3); also cancels a parked request. Idempotent:
   * false when the request is not (or no longer) known.
   */
  free(requestId: string): boolean {
    const q = this.queue;
    const parked = q?.remove(requestId);
    if (parked) {
      parked.unlisten?.();
      parked.fail!(cancelled(requestId));
      this.queueChanged();
      return true;
    }
    const e = this.live.get(requestId);
    if (!e) return false;
    this.live.delete(requestId);
    if (e.entry) e.entry.inflight--;
    if (e.booked && this.seqs.free(requestId, this.clock.now()))
      this.publishSeq({
        request_id: requestId,
        worker: e.worker,
        router_id: this.routerId as RouterId,
        data: 'Free',
      });
    if (e.closeSession) this.sendClose(e.closeSession.sessionId, e.closeSession.worker);
    this.drain();
    return true;
  }

  /** Alias of `free` for a client that went away. */
  cancel(requestId: string): boolean {
    return this.free(requestId);
  }

  /** Runs the expiry backstop and the session reaper now (the 30 s timer calls this). */
  maintain(): void {
    const now = this.clock.now();
    this.seqs.maybeExpire(now);
    for (const b of this.sessions.reap(now)) this.endSession(b);
    this.drain();
  }

  private onExpired(id: string): void {
    const e = this.live.get(id);
    if (!e) return;
    this.live.delete(id);
    if (e.entry) e.entry.inflight--;
    if (e.closeSession) this.sendClose(e.closeSession.sessionId, e.closeSession.worker);
  }

  /** Bookings dropped with their worker or rank: the dispatcher's later free is then a no-op. */
  private forget(id: string): void {
    this.live.delete(id);
  }

  private armMaintenance(): void {
    if (this.maintTimer !== null || this.closed) return;
    this.maintTimer = this.clock.setTimeout(() => {
      this.maintTimer = null;
      this.maintain();
      if (this.seqs.activeRequestCount > 0 || this.sessions.size > 0 || this.live.size > 0)
        this.armMaintenance();
    }, MAINTENANCE_INTERVAL_MS);
  }

  // ---------------------------------------------------------------------------------------------
  // Sessions (§12)

  /** Current binding of a session, without refreshing it. */
  sessionBinding(sessionId: string): SessionBinding | undefined {
    return this.sessions.peek(sessionId);
  }

  private endSession(b: SessionBinding): void {
    if (b.opened) this.sendClose(b.sessionId, b.worker);
  }

  private sendClose(sessionId: string, worker: WorkerWithDpRank): void {
    const rpc = this.opts.sessionRpc;
    if (!rpc || !this.workers.get(worker.worker_id)) return;
    Promise.resolve()
      .then(() => rpc(worker, { action: 'close_session', session_id: sessionId }))
      .catch((e: unknown) => this.report(e, `close_session ${sessionId}`));
  }

  // ---------------------------------------------------------------------------------------------
  // Busy monitor (§11) and load publication (§5.5)

  /** Ingests an `ActiveLoad` (router- or worker-published). False for an unknown rank. */
  ingestLoad(load: {
    worker_id: bigint;
    dp_rank: number;
    active_decode_blocks?: number | null;
    active_prefill_tokens?: number | null;
    kv_used_blocks?: number | null;
  }): boolean {
    if (!load || typeof load.worker_id !== 'bigint') throw invalid('worker_id', 'must be a u64 bigint');
    if (!Number.isSafeInteger(load.dp_rank) || load.dp_rank < 0)
      throw invalid('dp_rank', 'must be an integer >= 0', load.dp_rank);
    const r = this.workers.rank(load.worker_id, load.dp_rank);
    if (!r) return false;
    r.busy.observe(load);
    return true;
  }

  get busyThresholds(): BusyThresholds {
    return { ...this.thresholds };
  }

  /** Sets thresholds at runtime (`/busy_threshold`); a field given as null disables that check. */
  setBusyThresholds(t: Partial<BusyThresholds>): BusyThresholds {
    const next = validateBusyThresholds({ ...this.thresholds, ...pickDefined(t) });
    this.thresholds = next;
    this.busyOn = anyThreshold(next);
    return { ...next };
  }

  /** The router's projected load of one rank (§9). */
  rankLoad(worker: WorkerWithDpRank): {
    active_prefill_tokens: number;
    active_decode_blocks: number;
    active_requests: number;
  } {
    return this.seqs.load(worker, this.clock.now());
  }

  /** Requests booked in the tracker (own and replica-synced). */
  get activeRequestCount(): number {
    return this.seqs.activeRequestCount;
  }

  /** Requests this router decided and has not seen freed. */
  get liveRequestCount(): number {
    return this.live.size;
  }

  private publishLoadOf(w: WorkerWithDpRank): void {
    const l = this.seqs.load(w, this.clock.now());
    try {
      this.opts.publishLoad!({
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

  // ---------------------------------------------------------------------------------------------
  // Replica sync (§5.4)

  private publishSeq(ev: ActiveSequenceEvent): void {
    const pub = this.opts.publishActiveSequenceEvent;
    if (!pub) return;
    try {
      pub(ev);
    } catch (e) {
      this.report(e, 'publishActiveSequenceEvent');
    }
  }

  /** Applies another router's booking event; own events (same router_id) are ignored. True if state changed. */
  applyReplicaEvent(ev: ActiveSequenceEvent): boolean {
    if (!ev || typeof ev !== 'object') throw invalid('event', 'must be an object');
    if (typeof ev.router_id !== 'bigint') throw invalid('router_id', 'must be a u64 bigint');
    if (typeof ev.request_id !== 'string' || ev.request_id.length === 0)
      throw invalid('request_id', 'must be a non-empty string');
    const w = ev.worker;
    if (!w || typeof w.worker_id !== 'bigint' || !Number.isSafeInteger(w.dp_rank) || w.dp_rank < 0)
      throw invalid('worker', 'must be {worker_id: u64, dp_rank: u32}');
    if (this.mode !== 'kv' || (this.routerId !== null && ev.router_id === this.routerId)) return false;
    // A request id this router owns is never touched by another router's events.
    if (this.live.has(ev.request_id)) return false;
    const now = this.clock.now();
    let changed: boolean;
    const data = ev.data;
    if (data === 'Free') changed = this.seqs.free(ev.request_id, now);
    else if (data === 'MarkPrefillCompleted') changed = this.seqs.markPrefillCompleted(ev.request_id, now);
    else if (data && typeof data === 'object' && 'AddRequest' in data) {
      const a = data.AddRequest;
      const hint = a.prefill_load_hint;
      const prefill = hint ? hint.initial_effective_prefill_tokens : 0;
      if (!Number.isSafeInteger(prefill) || prefill < 0)
        throw invalid(
          'prefill_load_hint.initial_effective_prefill_tokens',
          'must be an integer >= 0',
          prefill,
        );
      const dur = hint?.expected_prefill_duration;
      const seq = a.token_sequence ? u64sToPairsChecked(a.token_sequence) : EMPTY;
      changed = this.seqs.addRequest(
        w,
        {
          requestId: ev.request_id,
          // Only the effective prefill travels; isl = that with nothing cached reproduces it.
          isl: prefill,
          cachedTokens: 0,
          seqHashes: seq,
          assumeKvReuse: true,
          trackPrefillTokens: a.track_prefill_tokens !== false && prefill > 0,
          expectedOutputTokens: a.expected_output_tokens ?? null,
          expectedPrefillDurationMs: dur ? dur.secs * 1000 + dur.nanos / 1e6 : null,
        },
        now,
      );
      if (changed) this.armMaintenance();
    } else throw invalid('data', 'must be AddRequest, Free or MarkPrefillCompleted');
    if (changed) this.drain();
    return changed;
  }

  // ---------------------------------------------------------------------------------------------
  // Explanation, decision log, overhead

  private termsAt(i: number): CandidateTerms {
    const b = this.batch;
    const o = this.out;
    const w = b.workers[i];
    return {
      worker_id: w.worker_id,
      dp_rank: w.dp_rank,
      device_blocks: b.deviceBlocks[i],
      effective_overlap: o.effectiveOverlap[i],
      cached_tokens: o.cachedTokens[i],
      active_prefill_tokens: b.activePrefillTokens[i],
      active_decode_blocks: b.activeDecodeBlocks[i],
      active_requests: b.activeRequests[i],
      active_prefix_depth: b.activePrefixDepth[i],
      raw_prefill: o.rawPrefill[i],
      decay: o.decay[i],
      credit_blocks: o.creditBlocks[i],
      prefill_term: o.prefillTerm[i],
      decode: o.decode[i],
      additional: o.additional[i],
      active_request_term: o.activeRequestTerm[i],
      logit: o.logit[i],
      taint_multiplier: o.taintMultiplier[i],
      cost: o.cost[i],
    };
  }

  private sampled(): boolean {
    const log = this.opts.decisionLog;
    return log != null && log.sampleRate > 0 && (log.random ?? this.random)() < log.sampleRate;
  }

  private logDecision(d: RoutingDecision): void {
    const e = d.explanation;
    try {
      this.opts.decisionLog!.sink(
        stringifyJson({
          ts: this.clock.now(),
          router_id: this.routerId,
          request_id: d.requestId,
          mode: e.mode,
          reason: e.reason,
          worker_id: d.workerId,
          dp_rank: d.dpRank,
          block_size: this.blockSize,
          required_blocks: d.requiredBlocks,
          overlap_blocks: d.overlapBlocks,
          cached_tokens: d.cachedTokens,
          kv_hit_rate: d.kvHitRate,
          query_only: d.queryOnly,
          temperature: e.temperature,
          busy_filtered: e.busyFiltered,
          queued_ms: e.queuedMs,
          overlap_refreshed: e.overlapRefreshed,
          candidates: e.candidates ?? [],
        }),
      );
    } catch (err) {
      this.report(err, 'decision log');
    }
  }

  private emitOverhead(p: Pending, scheduling: number, end: number): void {
    const o: RouterOverhead = {
      block_hashing: p.tHash,
      seq_hashing: p.tSeq,
      indexer_find_matches: p.tFind,
      scheduling,
      // A parked request's wait is not routing overhead: its total is the sum of its phases.
      total: p.queuedAt === null ? end - p.tStart : p.tHash + p.tSeq + p.tFind + scheduling,
    };
    try {
      this.opts.onOverhead!(o);
    } catch (e) {
      this.report(e, 'onOverhead');
    }
  }

  private report(e: unknown, context: string): void {
    try {
      this.opts.onError?.(e, context);
    } catch {
      // A failing error hook must not break routing.
    }
  }

  /** Stops the timers and fails every parked request (`router_closed`, 503). */
  close(): void {
    this.closed = true;
    if (this.queueTimer !== null) this.clock.clearTimeout(this.queueTimer);
    if (this.maintTimer !== null) this.clock.clearTimeout(this.maintTimer);
    this.queueTimer = this.maintTimer = null;
    const q = this.queue;
    while (q && q.size > 0) {
      const p = q.pop()!;
      p.unlisten?.();
      p.fail!(new KvrError('router_closed', 'router is closed', 503));
    }
  }
}

// -----------------------------------------------------------------------------------------------

function anyThreshold(t: BusyThresholds): boolean {
  return (
    t.activeDecodeBlocks !== null || t.activePrefillTokens !== null || t.activePrefillTokensFrac !== null
  );
}

function hasAll(have: ReadonlySet<string>, need: ReadonlySet<string>): boolean {
  for (const t of need) if (!have.has(t)) return false;
  return true;
}

function pickDefined<T extends object>(t: Partial<T>): Partial<T> {
  const out: Partial<T> = {};
  for (const k of Object.keys(t) as (keyof T)[]) if (t[k] !== undefined) out[k] = t[k];
  return out;
}

function cancelled(id: string): KvrError {
  return new KvrError('cancelled', `request ${id} was cancelled while queued`, 499, { request_id: id });
}

function errText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function u64sToPairsChecked(v: readonly bigint[]): Uint32Array {
  if (!Array.isArray(v)) throw invalid('token_sequence', 'must be an array of u64');
  const out = new Uint32Array(2 * v.length);
  for (let i = 0; i < v.length; i++) {
    const x: unknown = v[i];
    if (typeof x !== 'bigint' || x < 0n || x > 0xffffffffffffffffn)
      throw invalid(`token_sequence[${i}]`, 'must be a u64 bigint');
    out[2 * i] = Number(x & 0xffffffffn);
    out[2 * i + 1] = Number(x >> 32n);
  }
  return out;
}
