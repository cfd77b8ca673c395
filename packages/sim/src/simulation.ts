/**
 * The deterministic simulation: K simulated engines (engine-sim) and one routing policy (the real
 * KvRouter) on one virtual clock. A request arrives, is routed, reaches its engine after the
 * dispatch delay and joins the next pass; each pass's tokens are visible at its end, and its KV
 * events and load reach the router `eventDelayMs` later. Nothing reads a wall clock or global
 * randomness, so the same rows, config and seed give the same result, bit for bit.
 */
import {
  DEFAULT_ENGINE_CONFIG,
  SimEngine,
  type EngineConfig,
  type StepResult,
  type TimingModel,
} from '@kvrouter/engine-sim';
import {
  KvrError,
  computeLocalBlockHashes,
  computeSequenceHashes,
  type EventId,
  type RouterEvent,
  type WorkerId,
  invalidArgument,
} from '@kvrouter/protocols';
import { CLS_PASS, EventQueue } from './event-queue.js';
import { GapTracker, type GapColumns } from './gap.js';
import type { PolicyFactory, RoutingPolicy, SimWorker } from './policy.js';
import { SimRng } from './rng.js';
import { TokenSynth, DEFAULT_TRACE_BLOCK_SIZE } from './tokens.js';
import type { TraceRow } from './trace.js';

export interface SimConfig {
  numWorkers: number;
  /** Engine model per worker (engine-sim defaults for what is absent; `seed` is derived per worker). */
  engine: Partial<Omit<EngineConfig, 'seed'>>;
  traceBlockSize: number;
  /** Trace timestamps and delays are divided by this. */
  arrivalSpeedupRatio: number;
  seed: number;
  /** Engine -> router delay of KV events and load reports, ms. */
  eventDelayMs: number;
  /** Router -> engine delay of a routed request, ms. */
  dispatchDelayMs: number;
}

export const DEFAULT_SIM_CONFIG: Readonly<SimConfig> = Object.freeze({
  numWorkers: 4,
  engine: {},
  traceBlockSize: DEFAULT_TRACE_BLOCK_SIZE,
  arrivalSpeedupRatio: 1,
  seed: 0,
  eventDelayMs: 0,
  dispatchDelayMs: 0,
});

export interface SimProgress {
  /** Requests finished or rejected. */
  done: number;
  total: number;
  simMs: number;
}

export interface SimHooks {
  /** Called every few thousand events and once at the end. */
  onProgress?: (p: SimProgress) => void;
  /** Pass timing of every engine (the mocker's `--planner-profile-data` / `--aic-perf-model`); default the §17 polynomials. */
  engineTiming?: TimingModel;
}

/** Per-request columns, indexed by the row's position in the input. NaN = never happened. */
export interface RequestColumns {
  arrival: Float64Array;
  /** Routing decision (after any router queueing). */
  routed: Float64Array;
  firstToken: Float64Array;
  finish: Float64Array;
  isl: Int32Array;
  /** Output tokens received. */
  tokens: Int32Array;
  /** Prompt tokens the engine served from its prefix cache (first admission). */
  cachedTokens: Int32Array;
  /** Device-overlap blocks the router expected. */
  routerOverlapBlocks: Int32Array;
  /** Flattened (worker, rank) unit, −1 if never routed. */
  unit: Int32Array;
  /** 0 unfinished, 1 finished, 2 rejected (router or engine). */
  status: Uint8Array;
}

export interface UnitSummary {
  workerId: WorkerId;
  dpRank: number;
  /** Sum of pass durations. */
  busyMs: number;
  passes: number;
  /** Sum of the durations of passes in which some request decoded. */
  decodingMs: number;
  /** Passes that only decoded (no prompt tokens) and the sum of their durations: the decode step. */
  decodeSteps: number;
  decodeStepMs: number;
  requests: number;
  preemptions: number;
  promptTokens: number;
  cachedTokens: number;
  evictedBlocks: number;
}

export interface SimResult {
  config: SimConfig;
  engine: Readonly<EngineConfig>;
  policy: string;
  requests: RequestColumns;
  units: UnitSummary[];
  /** Clock at the last event. */
  endMs: number;
  /** First rejection message per error code, and counts. */
  rejections: Record<string, { count: number; example: string }>;
  /** Why the run falls short of the oracle (`gap.ts`). */
  gap: GapColumns;
}

function checkConfig(c: SimConfig): void {
  const bad = (field: string, want: string, v: unknown): never => {
    throw invalidArgument(field, `must be ${want}`, v);
  };
  if (!Number.isSafeInteger(c.numWorkers) || c.numWorkers < 1 || c.numWorkers > 4096)
    bad('numWorkers', 'an integer in [1, 4096]', c.numWorkers);
  if (!(c.arrivalSpeedupRatio > 0) || !Number.isFinite(c.arrivalSpeedupRatio))
    bad('arrivalSpeedupRatio', 'a finite number > 0', c.arrivalSpeedupRatio);
  if (!(c.eventDelayMs >= 0) || !Number.isFinite(c.eventDelayMs))
    bad('eventDelayMs', 'a finite number >= 0', c.eventDelayMs);
  if (!(c.dispatchDelayMs >= 0) || !Number.isFinite(c.dispatchDelayMs))
    bad('dispatchDelayMs', 'a finite number >= 0', c.dispatchDelayMs);
  if (!Number.isSafeInteger(c.seed) || c.seed < 0 || c.seed > 0xffffffff)
    bad('seed', 'an integer in [0, 2^32 − 1]', c.seed);
}

interface Unit {
  engine: SimEngine;
  rank: number;
  workerId: WorkerId;
  /** A pass is running (its end event is queued). */
  running: boolean;
  /** A pass start is queued. */
  scheduled: boolean;
  busyMs: number;
  passes: number;
  decodingMs: number;
  decodeSteps: number;
  decodeStepMs: number;
  requests: number;
}

const newCols = (n: number): RequestColumns => ({
  arrival: new Float64Array(n).fill(NaN),
  routed: new Float64Array(n).fill(NaN),
  firstToken: new Float64Array(n).fill(NaN),
  finish: new Float64Array(n).fill(NaN),
  isl: new Int32Array(n),
  tokens: new Int32Array(n),
  cachedTokens: new Int32Array(n),
  routerOverlapBlocks: new Int32Array(n),
  unit: new Int32Array(n).fill(-1),
  status: new Uint8Array(n),
});

/** Microtask turns allowed for one settling batch before the router is declared stuck. */
const MAX_SETTLE_TURNS = 10_000;

export async function runSimulation(
  rows: readonly TraceRow[],
  config: Partial<SimConfig>,
  makePolicy: PolicyFactory,
  hooks: SimHooks = {},
): Promise<SimResult> {
  const cfg: SimConfig = { ...DEFAULT_SIM_CONFIG, ...config, engine: { ...config.engine } };
  checkConfig(cfg);
  if ('seed' in cfg.engine) {
    throw new KvrError(
      'invalid_argument',
      'engine.seed: derived from the simulation seed; set seed instead',
      400,
      { field: 'engine.seed' },
    );
  }
  const n = rows.length;
  const q = new EventQueue();
  const synth = new TokenSynth({
    traceBlockSize: cfg.traceBlockSize,
    vocabSize: cfg.engine.vocabSize ?? DEFAULT_ENGINE_CONFIG.vocabSize,
  });
  const engineRng = SimRng.stream(cfg.seed, 3);
  const units: Unit[] = [];
  const workers: SimWorker[] = [];
  const firstUnit: number[] = [];
  let engineCfg: Readonly<EngineConfig> | undefined;
  for (let i = 0; i < cfg.numWorkers; i++) {
    const engine = new SimEngine(
      { ...cfg.engine, seed: engineRng.u32() },
      hooks.engineTiming ? { timing: hooks.engineTiming } : {},
    );
    engineCfg ??= engine.config;
    const workerId = BigInt(i + 1) as WorkerId;
    firstUnit.push(units.length);
    for (let r = 0; r < engine.config.dataParallelSize; r++) {
      units.push({
        engine,
        rank: r,
        workerId,
        running: false,
        scheduled: false,
        busyMs: 0,
        passes: 0,
        decodingMs: 0,
        decodeSteps: 0,
        decodeStepMs: 0,
        requests: 0,
      });
    }
    workers.push({
      id: workerId,
      dpSize: engine.config.dataParallelSize,
      totalKvBlocks: engine.config.numGpuBlocks,
      maxNumBatchedTokens: engine.config.maxNumBatchedTokens,
    });
  }
  const routerRng = SimRng.stream(cfg.seed, 2);
  const policy: RoutingPolicy = makePolicy({
    clock: q.clock,
    random: () => routerRng.next(),
    blockSize: engineCfg!.blockSize,
    workers,
  });

  const cols = newCols(n);
  const bs = engineCfg!.blockSize;
  const gap = new GapTracker(
    units.length,
    n,
    (w, r) => {
      const i = Number(w) - 1;
      return i >= 0 && i < firstUnit.length ? firstUnit[i]! + r : -1;
    },
    bs,
  );
  const rejections: SimResult['rejections'] = {};
  let done = 0;

  // Sessions: each turn after the first is released by the end of the previous one (§18).
  const nextTurn = new Int32Array(n).fill(-1);
  const isFirst = new Uint8Array(n).fill(1);
  const lastOfSession = new Map<string, number>();
  let t0 = Infinity;
  for (let k = 0; k < n; k++) {
    const r = rows[k]!;
    if (r.timestamp < t0) t0 = r.timestamp;
    if (r.session_id === undefined) continue;
    const prev = lastOfSession.get(r.session_id);
    if (prev !== undefined) {
      nextTurn[prev] = k;
      isFirst[k] = 0;
    }
    lastOfSession.set(r.session_id, k);
  }
  const ratio = cfg.arrivalSpeedupRatio;
  const traceTime = (k: number): number => (rows[k]!.timestamp - t0) / ratio;

  const unitOf = (workerId: bigint, rank: number): number => {
    const i = Number(workerId) - 1;
    const u = i >= 0 && i < firstUnit.length ? firstUnit[i]! + rank : -1;
    if (u < 0 || u >= units.length || units[u]!.workerId !== workerId || units[u]!.rank !== rank) {
      throw new KvrError('internal', `router chose unknown rank ${workerId}:${rank}`, 500);
    }
    return u;
  };

  const release = (k: number): void => {
    const nk = nextTurn[k]!;
    if (nk < 0) return;
    const at = Math.max(traceTime(nk), q.now() + (rows[nk]!.delay ?? 0) / ratio);
    q.at(at, () => arrive(nk));
  };

  const reject = (k: number, e: unknown): void => {
    const code = e instanceof KvrError ? e.code : 'error';
    const msg = e instanceof Error ? e.message : String(e);
    const r = (rejections[code] ??= { count: 0, example: msg });
    r.count++;
    cols.status[k] = 2;
    cols.finish[k] = q.now();
    done++;
    release(k);
  };

  const kick = (u: number): void => {
    const unit = units[u]!;
    if (unit.running || unit.scheduled) return;
    unit.scheduled = true;
    q.at(q.now(), () => startPass(u), CLS_PASS);
  };

  const arrive = (k: number): void => {
    const row = rows[k]!;
    cols.arrival[k] = q.now();
    cols.isl[k] = row.input_length;
    const tokens = synth.promptTokens(row);
    const id = `r${k}`;
    gap.sample();
    policy.route(
      { requestId: id, tokens, isl: row.input_length, osl: row.output_length },
      (d) => {
        const u = unitOf(d.worker.worker_id, d.worker.dp_rank);
        const seq = computeSequenceHashes(computeLocalBlockHashes(tokens, bs));
        gap.decided(k, seq, Math.max(0, Math.floor((tokens.length - 1) / bs)), u, d.explanation);
        cols.routed[k] = q.now();
        cols.unit[k] = u;
        cols.routerOverlapBlocks[k] = d.overlapBlocks;
        q.at(q.now() + cfg.dispatchDelayMs, () => {
          const unit = units[u]!;
          try {
            unit.engine.enqueue(
              { id, tokenIds: tokens, maxTokens: row.output_length, dpRank: unit.rank },
              q.now(),
            );
          } catch (e) {
            policy.onFinish(id);
            reject(k, e);
            return;
          }
          unit.requests++;
          kick(u);
        });
      },
      (e) => reject(k, e),
    );
  };

  const startPass = (u: number): void => {
    const unit = units[u]!;
    unit.scheduled = false;
    const r = unit.engine.step(q.now(), unit.rank);
    if (r.idle) return;
    unit.running = true;
    unit.busyMs += r.durationMs;
    unit.passes++;
    if (r.decodeRequests > 0) {
      unit.decodingMs += r.durationMs;
      if (r.prefillTokens === 0) {
        unit.decodeSteps++;
        unit.decodeStepMs += r.durationMs;
      }
    }
    q.at(q.now() + r.durationMs, () => endPass(u, r));
  };

  const endPass = (u: number, r: StepResult): void => {
    const unit = units[u]!;
    unit.running = false;
    for (const t of r.emitted) {
      const id = t.requestId;
      const k = Number(id.slice(1));
      if (t.cachedTokens !== undefined) {
        cols.firstToken[k] = q.now();
        cols.cachedTokens[k] = t.cachedTokens;
        policy.onFirstToken(id);
      }
      cols.tokens[k] += t.tokenIds.length;
      policy.onOutputTokens(id, cols.tokens[k]!);
      if (t.finishReason !== undefined) {
        cols.finish[k] = q.now();
        cols.status[k] = 1;
        done++;
        policy.onFinish(id);
        release(k);
      }
    }
    if (r.kvEvents.length > 0) {
      const evs: RouterEvent[] = r.kvEvents.map((e) => ({
        worker_id: unit.workerId,
        storage_tier: 'device',
        event: { event_id: BigInt(e.event_id) as EventId, dp_rank: e.dp_rank, data: e.data },
      }));
      gap.onEvents(u, evs);
      q.at(q.now() + cfg.eventDelayMs, () => {
        for (const ev of evs) policy.onKvEvent(ev);
      });
    }
    if (r.loadChanged) {
      const load = { worker_id: unit.workerId, dp_rank: unit.rank, kv_used_blocks: r.load.kv_used_blocks };
      q.at(q.now() + cfg.eventDelayMs, () => policy.onLoad(load));
    }
    if (unit.engine.hasWork(unit.rank)) kick(u);
  };

  for (let k = 0; k < n; k++) if (isFirst[k]) q.at(traceTime(k), () => arrive(k));

  let events = 0;
  try {
    while (q.step()) {
      if (policy.settling() > 0) {
        // Let the router's promise callbacks run before the clock moves on.
        let turns = 0;
        while (policy.settling() > 0) {
          if (++turns > MAX_SETTLE_TURNS)
            throw new KvrError('internal', 'router decision did not settle', 500);
          await Promise.resolve();
        }
      }
      if ((++events & 4095) === 0) hooks.onProgress?.({ done, total: n, simMs: q.now() });
      // Every request has ended: what is left are router housekeeping timers, which may re-arm forever.
      if (done === n) break;
    }
  } finally {
    policy.close();
  }
  hooks.onProgress?.({ done, total: n, simMs: q.now() });

  const summaries: UnitSummary[] = units.map((u) => {
    const s = u.engine.stats(u.rank);
    return {
      workerId: u.workerId,
      dpRank: u.rank,
      busyMs: u.busyMs,
      passes: u.passes,
      decodingMs: u.decodingMs,
      decodeSteps: u.decodeSteps,
      decodeStepMs: u.decodeStepMs,
      requests: u.requests,
      preemptions: s.preemptions,
      promptTokens: s.promptTokens,
      cachedTokens: s.cachedTokens,
      evictedBlocks: s.evictedBlocks,
    };
  });
  return {
    config: cfg,
    engine: engineCfg!,
    policy: policy.name,
    requests: cols,
    units: summaries,
    endMs: q.now(),
    rejections,
    gap: gap.result(),
  };
}
