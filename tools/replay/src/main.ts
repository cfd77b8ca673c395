/**
 * `pnpm replay` — trace replay and deterministic simulation (docs/protocol.md §18).
 *
 *   replay [run] <trace.jsonl | --synthetic PRESET> [options]   one configuration
 *   replay compare <trace.jsonl | --synthetic PRESET> -c CFG...  several router configurations
 *   replay generate --synthetic PRESET --out FILE                write a Mooncake trace
 *
 * Router flags are the config table's; see `--help`.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { KvrError, isKvrError } from '@kvrouter/protocols';
import {
  compareSvg,
  compareTable,
  formatTrace,
  reportJson,
  sweepSvg,
  sweepTable,
  ttftSamples,
  buildReport,
  type CompareEntry,
  type Report,
} from '@kvrouter/sim';
import { Command, Option } from 'commander';
import { formatSummary } from './format.js';
import { runOnline } from './online.js';
import {
  addEngineOptions,
  addSimOptions,
  addSyntheticOptions,
  intArg,
  simConfigOf,
  type EngineOpts,
  type SimOpts,
  type SyntheticOpts,
} from './options.js';
import { ProgressBar } from './progress.js';
import { addRouterHelp, resolveRouter, routerSpecs, splitRouterArgs } from './router-args.js';
import { engineTimingFor, makeWorkload, oracleFor, runOffline, type Io } from './run.js';
import { runSweep } from './sweep.js';

/** `--sweep 0.3,0.5,1.1`: loads as fractions of round-robin's capacity, each in (0, 10]. */
function loadList(v: string): number[] {
  const xs = v.split(',').map((s) => Number(s.trim()));
  if (xs.length === 0 || xs.some((x) => !(x > 0 && x <= 10)))
    throw new KvrError(
      'invalid_argument',
      `--sweep: expected loads in (0, 10] separated by commas, got ${JSON.stringify(v)}`,
      undefined,
      {
        field: '--sweep',
      },
    );
  return xs;
}

type RunOpts = EngineOpts &
  SimOpts &
  SyntheticOpts & { replayMode: 'offline' | 'online'; url: string; model?: string };

/** pnpm runs the script inside tools/replay; relative paths mean the caller's directory. */
const callerDir = (): string => process.env.INIT_CWD ?? process.cwd();
const abs = (p: string): string => (isAbsolute(p) ? p : resolve(callerDir(), p));

function write(path: string, text: string): void {
  const p = abs(path);
  mkdirSync(dirname(p), { recursive: true });
  writeFileSync(p, text);
}

/** The routing part of a resolved config (no infrastructure fields, which vary by machine). */
function routerSettings(config: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const s of routerSpecs()) out[s.key] = config[s.key];
  return out;
}

function common(cmd: Command): Command {
  addSyntheticOptions(addSimOptions(addEngineOptions(cmd)));
  return addRouterHelp(cmd);
}

export function buildCli(io: Io, env: Record<string, string | undefined>, routerArgv: string[]): Command {
  const program = new Command('replay')
    .description(
      'KV-router trace replay: deterministic simulation of engines + the real router, or online replay against a frontend',
    )
    .showHelpAfterError()
    .exitOverride();

  const routerFor = (extra: readonly string[] = []) => {
    const r = resolveRouter([...routerArgv, ...extra], env);
    for (const w of r.warnings) io.stderr.write(`warning: ${w}\n`);
    return r.config;
  };

  common(
    program
      .command('run', { isDefault: true })
      .description('replay one trace (or synthetic workload) with one router configuration')
      .argument('[trace]', 'Mooncake JSONL trace'),
  )
    .addOption(
      new Option('--replay-mode <mode>', 'offline (virtual time, in process) or online (HTTP, real time)')
        .choices(['offline', 'online'])
        .default('offline'),
    )
    .addOption(new Option('--url <url>', 'frontend base URL (online mode)').default('http://127.0.0.1:8000'))
    .addOption(new Option('--model <name>', 'model name (online mode; default: the first of /v1/models)'))
    .action(async (trace: string | undefined, o: RunOpts) => {
      const sim = simConfigOf(o);
      if (o.replayMode === 'online') {
        const w = makeWorkload(trace === undefined ? undefined : abs(trace), o, io);
        const bar = new ProgressBar(
          io.stderr,
          o.progress && io.stderr.isTTY === true,
          undefined,
          250,
          'online',
        );
        const data = await runOnline(w.rows, {
          url: o.url,
          model: o.model,
          traceBlockSize: o.traceBlockSize,
          arrivalSpeedupRatio: o.arrivalSpeedupRatio,
          onProgress: (d, n, ms) => bar.update(d, n, ms),
        });
        bar.finish();
        const report = buildReport(data, o.oracle ? oracleFor(w.rows, sim) : null, { workload: w.source });
        io.stdout.write(formatSummary(report, 'online', null));
        if (o.reportJson) write(o.reportJson, reportJson(report));
        return;
      }
      const router = routerFor();
      // Engine flags are checked (and their files read) before a long trace is loaded.
      const timing = engineTimingFor(o, router.aicSystem, sim, io);
      const w = makeWorkload(trace === undefined ? undefined : abs(trace), o, io);
      const oracle = o.oracle ? oracleFor(w.rows, sim) : null;
      const run = await runOffline(w, sim, router, oracle, io, o.progress, undefined, timing.model);
      run.report.config.router = routerSettings(router as unknown as Record<string, unknown>);
      run.report.config.engineTiming = timing.plan;
      io.stdout.write(formatSummary(run.report, 'offline', run.wallMs));
      if (o.reportJson) write(o.reportJson, reportJson(run.report));
    });

  common(
    program
      .command('compare')
      .description(
        'run several router configurations on one workload: ratio table + SVG (TTFT CDFs, hit rate)',
      )
      .argument('[trace]', 'Mooncake JSONL trace'),
  )
    .addOption(
      new Option(
        '-c, --config <flags>',
        'one configuration: router flags ("--router-mode kv --router-predicted-ttl-secs 5") or a bare mode name; repeat; the first is the baseline',
      ).argParser((v: string, prev: string[] | undefined) => [...(prev ?? []), v]),
    )
    .addOption(new Option('--svg <file>', 'chart output').default('replay-compare.svg'))
    .addOption(
      new Option(
        '--sweep <loads>',
        "offered loads as fractions of round-robin's capacity, e.g. 0.3,0.5,0.7,0.9,1.1: every configuration at each (chart: hit rate and TTFT against load)",
      ).argParser(loadList),
    )
    .addOption(new Option('--sweep-md <file>', 'with --sweep: also write the table as Markdown'))
    .action(
      async (
        trace: string | undefined,
        o: RunOpts & { config?: string[]; svg: string; sweep?: number[]; sweepMd?: string },
      ) => {
        const sim = simConfigOf(o);
        // One engine fleet for every configuration; `--aic-system` from the shared router flags.
        const timing = engineTimingFor(o, resolveRouter(routerArgv, env).config.aicSystem, sim, io);
        const w = makeWorkload(trace === undefined ? undefined : abs(trace), o, io);
        const oracle = o.oracle ? oracleFor(w.rows, sim) : null;
        const configs = o.config ?? ['round-robin', 'random', 'least-loaded', 'kv'];
        const routerOf = (c: string) => {
          const words = c.trim().split(/\s+/).filter(Boolean);
          const extra = words[0]?.startsWith('-') ? words : ['--router-mode', ...words];
          const { router: flags, rest } = splitRouterArgs(extra);
          if (rest.length > 0)
            throw new KvrError(
              'invalid_argument',
              `--config ${JSON.stringify(c)}: not router flags: ${rest.join(' ')}`,
              undefined,
              { field: '--config' },
            );
          return routerFor(flags);
        };
        if (o.sweep) {
          const sc = configs.map((label) => ({ label, router: routerOf(label) }));
          const rrIdx = sc.findIndex((c) => c.router.routerMode === 'round-robin');
          const rr = rrIdx >= 0 ? sc[rrIdx]!.router : routerOf('round-robin');
          const res = await runSweep(w, sim, o.sweep, sc, rr, oracle, io, o.progress, timing.model);
          const table = sweepTable(res.points, Math.max(0, rrIdx));
          io.stdout.write(
            `round-robin capacity: ${res.capacityRps.toFixed(3)} req/s (arrival speedup ${res.capacityRatio.toFixed(4)}; calibration ${res.calibration
              .map(
                (c) =>
                  `×${c.ratio.toFixed(3)} → ${c.ttftMs.toFixed(0)} ms, ${(c.utilization * 100).toFixed(0)}% busy`,
              )
              .join(
                ', ',
              )}) · ${w.rows.length} requests · ${(res.wallMs / 1000).toFixed(0)} s of simulation wall time\n\n` +
              table,
          );
          if (o.sweepMd) write(o.sweepMd, table);
          write(
            o.svg,
            sweepSvg(
              res.points,
              `kvrouter replay sweep · ${w.rows.length} requests · ${sim.numWorkers} workers · RR capacity ${res.capacityRps.toFixed(2)} req/s`,
            ),
          );
          io.stdout.write(`chart: ${abs(o.svg)}\n`);
          if (o.reportJson)
            write(
              o.reportJson,
              JSON.stringify(
                {
                  capacity_rps: res.capacityRps,
                  capacity_ratio: res.capacityRatio,
                  calibration: res.calibration,
                  points: res.points.map((p) => ({
                    load: p.load,
                    offered_rps: p.offeredRps,
                    ideal_ttft_ms: p.idealTtftMs,
                    ideal_idle_ttft_ms: p.idealIdleTtftMs,
                    decode_share: p.decodeShare,
                    decode_step_ms: p.decodeStepMs,
                    reports: p.entries.map((e) => ({
                      label: e.label,
                      ...(JSON.parse(reportJson(e.report)) as Record<string, unknown>),
                    })),
                  })),
                },
                null,
                2,
              ) + '\n',
            );
          return;
        }
        const entries: CompareEntry[] = [];
        const reports: Report[] = [];
        for (const c of configs) {
          const router = routerOf(c);
          const run = await runOffline(w, sim, router, oracle, io, o.progress, c, timing.model);
          run.report.config.router = routerSettings(router as unknown as Record<string, unknown>);
          run.report.config.engineTiming = timing.plan;
          run.report.config.label = c;
          io.stdout.write(formatSummary(run.report, c, run.wallMs));
          entries.push({ label: c, report: run.report, ttftMs: ttftSamples(run.result.requests) });
          reports.push(run.report);
        }
        io.stdout.write('\n' + compareTable(entries));
        write(
          o.svg,
          compareSvg(
            entries,
            `kvrouter replay compare · ${w.rows.length} requests · ${sim.numWorkers} workers`,
          ),
        );
        io.stdout.write(`chart: ${abs(o.svg)}\n`);
        if (o.reportJson)
          write(
            o.reportJson,
            JSON.stringify(JSON.parse(`[${reports.map((r) => reportJson(r)).join(',')}]`), null, 2) + '\n',
          );
      },
    );

  addSyntheticOptions(
    program
      .command('generate')
      .description('write a synthetic workload as a Mooncake JSONL trace')
      .requiredOption('--out <file>', 'output trace file')
      .addOption(
        new Option('--seed <n>', 'generator seed').default(0).argParser(intArg('--seed', 0, 0xffffffff)),
      )
      .addOption(
        new Option('--trace-block-size <n>', 'tokens per hash id')
          .default(512)
          .argParser(intArg('--trace-block-size', 1, 1 << 20)),
      ),
  ).action((o: SyntheticOpts & { out: string; seed: number; traceBlockSize: number }) => {
    if (o.synthetic === undefined)
      throw new KvrError('invalid_argument', 'generate needs --synthetic <preset>', undefined, {
        field: '--synthetic',
      });
    const w = makeWorkload(undefined, o, io);
    write(o.out, formatTrace(w.rows));
    io.stdout.write(`wrote ${w.rows.length} rows to ${abs(o.out)}\n`);
  });

  return program;
}

export async function main(argv: string[], io: Io, env: Record<string, string | undefined>): Promise<number> {
  const { router, rest } = splitRouterArgs(argv);
  const program = buildCli(io, env, router);
  program.configureOutput({ writeOut: (s) => io.stdout.write(s), writeErr: (s) => io.stderr.write(s) });
  try {
    await program.parseAsync(rest, { from: 'user' });
    return 0;
  } catch (e) {
    const ce = e as { code?: string; exitCode?: number };
    if (typeof ce.code === 'string' && ce.code.startsWith('commander.')) return ce.exitCode ?? 2;
    io.stderr.write(`error: ${e instanceof Error ? e.message : String(e)}\n`);
    return isKvrError(e) && (e.status ?? 500) < 500 ? 2 : 1;
  }
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith('/replay/src/main.ts')) {
  main(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr }, process.env).then(
    (code) => process.exit(code),
    (e: unknown) => {
      process.stderr.write(`${String(e)}\n`);
      process.exit(1);
    },
  );
}
