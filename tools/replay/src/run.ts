/**
 * Offline runs: load (or generate) the workload, run the simulation with the real router, compute
 * the oracle bounds once per workload, print and write reports.
 */
import { readFileSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { inflateRawSync } from 'node:zlib';
import { aicEngineTimingFromFlag } from '@kvrouter/aic-model';
import type { ResolvedConfig } from '@kvrouter/config';
import {
  DEFAULT_ENGINE_CONFIG,
  profileTimingFromFlag,
  type EngineConfig,
  type TimingModel,
} from '@kvrouter/engine-sim';
import { KvrError } from '@kvrouter/protocols';
import {
  buildReport,
  generateSynthetic,
  kvRouterPolicy,
  oracleBounds,
  parseTrace,
  runSimulation,
  type OracleResult,
  type Report,
  type SimConfig,
  type SimResult,
  type TraceRow,
} from '@kvrouter/sim';
import { ProgressBar } from './progress.js';
import type { EngineOpts, EngineTimingPlan, SyntheticOpts } from './options.js';
import { engineTimingPlanOf, syntheticSpecOf } from './options.js';

export interface Workload {
  rows: TraceRow[];
  /** Where it came from, for the report. */
  source: Record<string, unknown>;
}

export interface Io {
  stdout: { write(s: string): unknown };
  stderr: { write(s: string): unknown; isTTY?: boolean; columns?: number };
}

/** Reads a Mooncake trace, reporting malformed rows (line number, field) on stderr. */
function loadTrace(path: string, strict: boolean, io: Io): Workload {
  const text = readFileSync(path, 'utf8');
  const t = parseTrace(text, { strict });
  for (const i of t.issues.slice(0, 20))
    io.stderr.write(`warning: ${path}:${i.line}: ${i.message} (row skipped)\n`);
  if (t.issues.length > 20) io.stderr.write(`warning: ${t.issues.length - 20} more malformed rows skipped\n`);
  return { rows: t.rows, source: { trace: path, rows: t.rows.length, skipped: t.issues.length } };
}

export function makeWorkload(
  trace: string | undefined,
  o: SyntheticOpts & { strict?: boolean; seed: number; traceBlockSize: number },
  io: Io,
): Workload {
  if (trace !== undefined && o.synthetic !== undefined)
    throw new KvrError('invalid_argument', 'give either a trace file or --synthetic, not both', undefined, {
      field: '--synthetic',
    });
  if (trace !== undefined) return loadTrace(trace, o.strict === true, io);
  // A plain Error on purpose: the CLI exits 1 (not 2, a bad option) when no workload is given (main.test.ts).
  if (o.synthetic === undefined) throw new Error('no workload: give a trace file or --synthetic <preset>');
  const spec = syntheticSpecOf(o, o.traceBlockSize);
  return { rows: generateSynthetic(spec, o.seed), source: { synthetic: o.synthetic, spec } };
}

export function oracleFor(rows: readonly TraceRow[], sim: SimConfig): OracleResult {
  const e = { ...DEFAULT_ENGINE_CONFIG, ...sim.engine };
  return oracleBounds(rows, {
    blockSize: e.blockSize,
    capacityBlocks: sim.numWorkers * e.dataParallelSize * e.numGpuBlocks,
    traceBlockSize: sim.traceBlockSize,
    vocabSize: e.vocabSize,
  });
}

/**
 * `--aic-model-path`'s config.json for the simulator's AIC predictor; null when absent. Relative
 * paths are the caller's (pnpm runs this tool inside tools/replay).
 */
function readModelFile(path: string): string | null {
  return readCallerFile(path, 'utf8');
}

function readCallerFile(path: string, enc: 'utf8'): string | null;
function readCallerFile(path: string): Uint8Array | null;
function readCallerFile(path: string, enc?: 'utf8'): string | Uint8Array | null {
  const p = isAbsolute(path) ? path : resolve(process.env.INIT_CWD ?? process.cwd(), path);
  try {
    return enc ? readFileSync(p, enc) : readFileSync(p);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'EISDIR') return null;
    throw e;
  }
}

const replayFail = (message: string, flag: string): never => {
  throw new KvrError('invalid_argument', message, undefined, { field: flag });
};

/**
 * The engines' pass-time model for a plan (undefined = the §17 polynomials), with the mocker's
 * messages (both use engine-sim's and aic-model's flag helpers). Files are the caller's (relative to
 * the directory `pnpm replay` was run from).
 */
function engineTimingOf(
  t: EngineTimingPlan,
  engine: Pick<EngineConfig, 'numGpuBlocks' | 'blockSize'>,
): TimingModel | undefined {
  const totalKvTokens = engine.numGpuBlocks * engine.blockSize;
  if (t.kind === 'polynomial') return undefined;
  if (t.kind === 'profile')
    return profileTimingFromFlag(
      t.path,
      (p, binary) => (binary ? readCallerFile(p) : readCallerFile(p, 'utf8')),
      totalKvTokens,
      replayFail,
      (b) => inflateRawSync(b),
    );
  return aicEngineTimingFromFlag(t, totalKvTokens, readModelFile, replayFail);
}

export interface EngineTiming {
  plan: EngineTimingPlan;
  model: TimingModel | undefined;
}

/** Plan (warnings on stderr) and model for the engine flags; `aicSystem` is the router table's `--aic-system`. */
export function engineTimingFor(
  o: EngineOpts,
  aicSystem: string | null,
  sim: SimConfig,
  io: Io,
): EngineTiming {
  const warnings: string[] = [];
  const plan = engineTimingPlanOf(o, aicSystem, warnings);
  for (const w of warnings) io.stderr.write(`warning: ${w}\n`);
  return { plan, model: engineTimingOf(plan, { ...DEFAULT_ENGINE_CONFIG, ...sim.engine }) };
}

export interface OfflineRun {
  report: Report;
  result: SimResult;
  wallMs: number;
}

/** One simulation with the router configured by `router` (a resolved config). */
export async function runOffline(
  w: Workload,
  sim: SimConfig,
  router: ResolvedConfig<'router'>,
  oracle: OracleResult | null,
  io: Io,
  progress: boolean,
  label?: string,
  engineTiming?: TimingModel,
): Promise<OfflineRun> {
  const bar = new ProgressBar(io.stderr, progress && io.stderr.isTTY === true, undefined, 100, label);
  const t0 = performance.now();
  const result = await runSimulation(w.rows, sim, kvRouterPolicy(router, { readText: readModelFile }), {
    onProgress: (p) => bar.update(p.done, p.total, p.simMs),
    engineTiming,
  });
  const wallMs = performance.now() - t0;
  bar.finish();
  const report = buildReport(result, oracle, { workload: w.source });
  return { report, result, wallMs };
}
