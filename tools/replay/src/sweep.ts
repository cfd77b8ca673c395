/**
 * `replay compare --sweep LOADS`: every configuration at several offered loads, given as fractions
 * of round-robin's capacity (issue 19 "must show").
 *
 * Capacity: the arrival rate at which round-robin starts to queue, taken as the largest arrival
 * speedup at which its mean TTFT stays within twice its mean TTFT at the given `--arrival-speedup-ratio`
 * (which must be a light load): the speedup grows 1.5x per run until the TTFT doubles (at most 8
 * runs), then two geometric bisections narrow it. (Busy time is no measure: decode passes keep an
 * engine busy long before its prefill budget is used up.) Load L is run at L times that speedup.
 * Offered load in req/s is the request count over the arrival span at that speedup.
 *
 * The TTFT limit of a load point (issue 19): round-robin's mean TTFT divided by the TTFT a router
 * would get with no queueing and the oracle's hit rate: each request's uncached share
 * `isl · (1 − pooled oracle hit rate)` prefilled with no queue ahead of it in chunks of
 * `max_num_batched_tokens` (the engines' timing model), on an engine that decodes what that load
 * decodes: with the share `p` of engine time spent in passes that decode and the mean decode step
 * `d` (the duration of a pass that only decodes), both measured on the round-robin run at that
 * load, each request adds `p · (chunks · d + d / 2)` (every pass carries a step; a request that
 * arrives mid-step waits half of one on average). That is batching, not queueing: no router
 * avoids it. The first definition (alone on an idle engine, `p` = 0) is kept beside it.
 */
import { DEFAULT_ENGINE_CONFIG, POLYNOMIAL_TIMING, type TimingModel } from '@kvrouter/engine-sim';
import type { ResolvedConfig } from '@kvrouter/config';
import type { OracleResult, Report, SimConfig, SweepPoint, UnitSummary } from '@kvrouter/sim';
import { runOffline, type Io, type Workload } from './run.js';

export interface SweepConfig {
  label: string;
  router: ResolvedConfig<'router'>;
}

export interface SweepResult {
  /** Arrival speedup at round-robin's capacity (the calibration's search below), and the offered req/s there. */
  capacityRatio: number;
  capacityRps: number;
  calibration: { ratio: number; utilization: number; ttftMs: number }[];
  points: SweepPoint[];
  /** Wall time of every simulation, ms. */
  wallMs: number;
}

/** Offered req/s of a run: requests over the span of their arrivals. */
function offeredRps(r: { arrival: Float64Array }): number {
  let lo = Infinity;
  let hi = -Infinity;
  for (const a of r.arrival) {
    if (a < lo) lo = a;
    if (a > hi) hi = a;
  }
  return hi > lo ? r.arrival.length / ((hi - lo) / 1000) : 0;
}

/** Share of engine time in passes that decode, and the mean decode step (see the module comment). */
export function decodeLoad(units: readonly UnitSummary[], endMs: number): { share: number; stepMs: number } {
  let decoding = 0;
  let steps = 0;
  let stepMs = 0;
  for (const u of units) {
    decoding += u.decodingMs;
    steps += u.decodeSteps;
    stepMs += u.decodeStepMs;
  }
  const span = units.length * endMs;
  return { share: span > 0 ? Math.min(1, decoding / span) : 0, stepMs: steps > 0 ? stepMs / steps : 0 };
}

/** Mean TTFT with no queueing at the oracle's hit rate (see the module comment). */
export function idealTtftMs(
  isl: ArrayLike<number>,
  hitRate: number,
  sim: SimConfig,
  timing: TimingModel | undefined,
  decode: { share: number; stepMs: number } = { share: 0, stepMs: 0 },
): number {
  const e = { ...DEFAULT_ENGINE_CONFIG, ...sim.engine };
  const t = timing ?? POLYNOMIAL_TIMING;
  let sum = 0;
  for (let k = 0; k < isl.length; k++) {
    let left = Math.max(1, Math.round(isl[k]! * (1 - hitRate)));
    let ms = 0;
    let chunks = 0;
    while (left > 0) {
      const chunk = Math.min(left, e.maxNumBatchedTokens);
      ms += t.prefillMs(chunk);
      left -= chunk;
      chunks++;
    }
    // The measured step is a pass duration: already divided by the speedup.
    sum += ms / e.speedupRatio + decode.share * (chunks + 0.5) * decode.stepMs + sim.dispatchDelayMs;
  }
  return isl.length > 0 ? sum / isl.length : NaN;
}

export async function runSweep(
  w: Workload,
  sim: SimConfig,
  loads: readonly number[],
  configs: readonly SweepConfig[],
  rr: ResolvedConfig<'router'>,
  oracle: OracleResult | null,
  io: Io,
  progress: boolean,
  timing: TimingModel | undefined,
): Promise<SweepResult> {
  let wallMs = 0;
  const calibration: SweepResult['calibration'] = [];
  const ttftAt = async (ratio: number): Promise<number> => {
    const run = await runOffline(
      w,
      { ...sim, arrivalSpeedupRatio: ratio },
      rr,
      null,
      io,
      progress,
      `calibrate ×${ratio.toFixed(3)}`,
      timing,
    );
    wallMs += run.wallMs;
    const t = run.report.ttft_ms.mean;
    calibration.push({ ratio, utilization: run.report.load_balance?.mean_utilization ?? 0, ttftMs: t });
    return t;
  };
  // Round-robin "starts to queue" where its mean TTFT passes twice its TTFT at the given (light)
  // speedup: grow the speedup by 1.5x until it does (at most 8 runs), then two geometric bisections.
  const t0 = await ttftAt(sim.arrivalSpeedupRatio);
  if (!(t0 > 0)) throw new Error('sweep: round-robin finished no request; cannot find its capacity');
  let good = sim.arrivalSpeedupRatio;
  let bad = NaN;
  for (let i = 0; i < 8 && Number.isNaN(bad); i++) {
    const r = good * 1.5;
    if ((await ttftAt(r)) > 2 * t0) bad = r;
    else good = r;
  }
  for (let i = 0; i < 2 && !Number.isNaN(bad); i++) {
    const mid = Math.sqrt(good * bad);
    if ((await ttftAt(mid)) > 2 * t0) bad = mid;
    else good = mid;
  }
  const rc = good;
  const isl = Float64Array.from(w.rows, (r) => r.input_length);
  const idealIdle = oracle ? idealTtftMs(isl, oracle.pooledHitRate, sim, timing) : NaN;
  // The decode load of each point is measured on round-robin's run (the ratio's baseline).
  const rrAt = Math.max(
    0,
    configs.findIndex((c) => c.router.routerMode === 'round-robin'),
  );
  const points: SweepPoint[] = [];
  let capacityRps = NaN;
  for (const load of loads) {
    const ratio = rc * load;
    const s = { ...sim, arrivalSpeedupRatio: ratio };
    const reports: { label: string; report: Report }[] = [];
    let offered = NaN;
    let decode = { share: 0, stepMs: 0 };
    for (const [ci, c] of configs.entries()) {
      const label = `${c.label} @ ${Math.round(load * 100)}%`;
      const run = await runOffline(w, s, c.router, oracle, io, progress, label, timing);
      wallMs += run.wallMs;
      offered = offeredRps(run.result.requests);
      reports.push({ label: c.label, report: run.report });
      if (ci === rrAt) decode = decodeLoad(run.result.units, run.result.endMs);
    }
    const ideal = oracle ? idealTtftMs(isl, oracle.pooledHitRate, sim, timing, decode) : NaN;
    if (Number.isNaN(capacityRps)) capacityRps = offered / load;
    points.push({
      load,
      offeredRps: offered,
      idealTtftMs: ideal,
      idealIdleTtftMs: idealIdle,
      decodeShare: decode.share,
      decodeStepMs: decode.stepMs,
      entries: reports,
    });
  }
  return { capacityRatio: rc, capacityRps, calibration, points, wallMs };
}
