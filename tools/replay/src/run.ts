/**
 * Offline runs: load (or generate) the workload, run the simulation with the real router, compute
 * the oracle bounds once per workload, print and write reports.
 */
import { readFileSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import type { ResolvedConfig } from '@kvrouter/config';
import { DEFAULT_ENGINE_CONFIG } from '@kvrouter/engine-sim';
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
import type { SyntheticOpts } from './options.js';
import { syntheticSpecOf } from './options.js';

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
export function loadTrace(path: string, strict: boolean, io: Io): Workload {
  const text = readFileSync(path, 'utf8');
  const t = parseTrace(text, { strict });
  for (const i of t.issues.slice(0, 20)) io.stderr.write(`warning: ${path}:${i.line}: ${i.message} (row skipped)\n`);
  if (t.issues.length > 20) io.stderr.write(`warning: ${t.issues.length - 20} more malformed rows skipped\n`);
  return { rows: t.rows, source: { trace: path, rows: t.rows.length, skipped: t.issues.length } };
}

export function makeWorkload(trace: string | undefined, o: SyntheticOpts & { strict?: boolean; seed: number; traceBlockSize: number }, io: Io): Workload {
  if (trace !== undefined && o.synthetic !== undefined) throw new Error('give either a trace file or --synthetic, not both');
  if (trace !== undefined) return loadTrace(trace, o.strict === true, io);
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
export function readModelFile(path: string): string | null {
  const p = isAbsolute(path) ? path : resolve(process.env.INIT_CWD ?? process.cwd(), path);
  try {
    return readFileSync(p, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'EISDIR') return null;
    throw e;
  }
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
): Promise<OfflineRun> {
  const bar = new ProgressBar(io.stderr, progress && io.stderr.isTTY === true, undefined, 100, label);
  const t0 = performance.now();
  const result = await runSimulation(w.rows, sim, kvRouterPolicy(router, { readText: readModelFile }), {
    onProgress: (p) => bar.update(p.done, p.total, p.simMs),
  });
  const wallMs = performance.now() - t0;
  bar.finish();
  const report = buildReport(result, oracle, { workload: w.source });
  return { report, result, wallMs };
}
