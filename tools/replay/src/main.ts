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
    .action(async (trace: string | undefined, o: RunOpts & { config?: string[]; svg: string }) => {
      const sim = simConfigOf(o);
      // One engine fleet for every configuration; `--aic-system` from the shared router flags.
      const timing = engineTimingFor(o, resolveRouter(routerArgv, env).config.aicSystem, sim, io);
      const w = makeWorkload(trace === undefined ? undefined : abs(trace), o, io);
      const oracle = o.oracle ? oracleFor(w.rows, sim) : null;
      const configs = o.config ?? ['round-robin', 'random', 'least-loaded', 'kv'];
      const entries: CompareEntry[] = [];
      const reports: Report[] = [];
      for (const c of configs) {
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
        const router = routerFor(flags);
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
    });

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
