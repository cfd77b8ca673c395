/**
 * `runMain()`: the process shell every CLI shares (frontend, standalone router, mocker, worker):
 * start, print one ready line, shut down cleanly on SIGINT / SIGTERM, and exit with a code a
 * supervisor can act on.
 *
 * Exit codes: 0 after a clean shutdown, 1 on a startup failure (or a failed shutdown), 2 on invalid
 * configuration (`config_error`, `not_supported`), 130 on a second signal during shutdown.
 */
import { statSync, writeFileSync } from 'node:fs';
import { KvrError } from '@kvrouter/protocols';

export const EXIT_OK = 0;
export const EXIT_STARTUP_FAILED = 1;
export const EXIT_CONFIG = 2;
export const EXIT_SECOND_SIGNAL = 130;

/** Error codes that mean "the configuration is wrong", not "the world is" (exit 2). */
const CONFIG_CODES: ReadonlySet<string> = new Set(['config_error', 'not_supported']);

/** The file-system parts `parseAppConfig` takes (`dir` rows that must exist, `--dump-config-to`). */
export const cliFiles = {
  isDirectory: (p: string): boolean => statSync(p, { throwIfNoEntry: false })?.isDirectory() === true,
  writeFile: (p: string, text: string): void => writeFileSync(p, text),
};

/** 2 for configuration errors, else 1. */
export function startupExitCode(e: unknown): number {
  return e instanceof KvrError && CONFIG_CODES.has(e.code) ? EXIT_CONFIG : EXIT_STARTUP_FAILED;
}

/** The parts of `process` runMain uses (injected by tests). */
export interface MainProcess {
  on(signal: 'SIGINT' | 'SIGTERM', listener: () => void): unknown;
  exit(code: number): void;
  stdout: { write(s: string): unknown };
  stderr: { write(s: string): unknown };
}

export interface MainSpec<S> {
  start(): Promise<S>;
  /** Clean shutdown (deregister, drain, close). */
  stop(service: S): Promise<void>;
  /** One line on stdout once started (a string as is, anything else as JSON); absent: none. */
  ready?(service: S): unknown;
  /**
   * Runs after the ready line. A number it returns ends the process: the service is stopped and the
   * process exits with that code (e.g. an interactive session that ended).
   */
  run?(service: S): Promise<number | void> | number | void;
  /** Told on the first signal, before `stop` (a log line). */
  onSignal?(signal: string): void;
  /** A failed `stop`; default `shutdown failed: <message>` on stderr. */
  onStopError?(e: unknown): void;
  /** Startup error -> exit code; default `startupExitCode`. */
  exitCode?(e: unknown): number;
  /** Startup error -> the line on stderr; default `error: <message>`. */
  errorText?(e: unknown): string;
  process?: MainProcess;
}

const message = (e: unknown): string => (e instanceof Error ? e.message : String(e));

/**
 * Starts the service and installs the signal handlers. Resolves with the service once it runs, or
 * null when startup failed (the exit code is already set through `process.exit`).
 */
export async function runMain<S>(spec: MainSpec<S>): Promise<S | null> {
  const proc: MainProcess = spec.process ?? process;
  let service: S;
  try {
    service = await spec.start();
  } catch (e) {
    proc.stderr.write(`${spec.errorText ? spec.errorText(e) : `error: ${message(e)}`}\n`);
    proc.exit((spec.exitCode ?? startupExitCode)(e));
    return null;
  }
  const s = service;
  let stopping: Promise<void> | null = null;
  const shutdown = (code: number): Promise<void> =>
    (stopping ??= spec.stop(s).then(
      () => proc.exit(code),
      (e: unknown) => {
        if (spec.onStopError) spec.onStopError(e);
        else proc.stderr.write(`shutdown failed: ${message(e)}\n`);
        proc.exit(EXIT_STARTUP_FAILED);
      },
    ));
  let signals = 0;
  const onSignal = (sig: string): void => {
    if (++signals > 1) {
      proc.exit(EXIT_SECOND_SIGNAL);
      return;
    }
    spec.onSignal?.(sig);
    void shutdown(EXIT_OK);
  };
  proc.on('SIGINT', () => onSignal('SIGINT'));
  proc.on('SIGTERM', () => onSignal('SIGTERM'));
  if (spec.ready) {
    const line = spec.ready(s);
    if (line !== undefined && line !== null)
      proc.stdout.write(`${typeof line === 'string' ? line : JSON.stringify(line)}\n`);
  }
  if (spec.run) {
    const code = await spec.run(s);
    if (typeof code === 'number') await shutdown(code);
  }
  return s;
}
