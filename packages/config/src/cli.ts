/**
 * The one place where config touches the process: `@kvrouter/config/cli`. Apps call
 * `parseAppConfig`; everything it decides comes from the pure `resolveConfig`. Filesystem access
 * is injected because this package is pure (no node:fs: docs/CONVENTIONS.md, "Pure and core code").
 */
import { buildProgram, type ProgramInfo } from './program.js';
import { dumpConfigJson } from './dump.js';
import { ConfigError, resolveConfig, type Resolution } from './resolve.js';
import type { App } from './table.js';

export { buildProgram, type ProgramInfo } from './program.js';

export interface CliOptions {
  /** Program name and description for `--help`. */
  info: ProgramInfo;
  /** e.g. `(p) => fs.statSync(p, { throwIfNoEntry: false })?.isDirectory() === true` */
  isDirectory: (path: string) => boolean;
  /** Writes `--dump-config-to`, e.g. `fs.writeFileSync`. */
  writeFile: (path: string, text: string) => void;
  /** Where warnings go; default `warning: <text>` on stderr. */
  onWarning?: (text: string) => void;
  /** Test seams; default process streams and process.exit. */
  stdout?: (text: string) => void;
  stderr?: (text: string) => void;
  exit?: (code: number) => never;
}

/** Exit code for invalid configuration (docs/configuration.md "Validation"). */
export const CONFIG_EXIT_CODE = 2;

/**
 * Resolve `app`'s configuration from argv and env. `-h/--help` prints the generated help and exits
 * 0; invalid configuration prints `error: <message>` to stderr and exits 2. Warnings are reported
 * through `onWarning`; `--dump-config-to` is written before returning.
 */
export function parseAppConfig<A extends App>(
  app: A,
  argv: readonly string[],
  env: Record<string, string | undefined>,
  opts: CliOptions,
): Resolution<A> {
  const out = opts.stdout ?? ((t: string) => void process.stdout.write(t));
  const err = opts.stderr ?? ((t: string) => void process.stderr.write(t));
  const exit = opts.exit ?? ((code: number) => process.exit(code));
  if (argv.includes('-h') || argv.includes('--help')) {
    out(buildProgram(app, opts.info).helpInformation());
    return exit(0);
  }
  let res: Resolution<A>;
  try {
    res = resolveConfig(app, argv, env, { isDirectory: opts.isDirectory });
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    err(`error: ${e.message}\n`);
    return exit(CONFIG_EXIT_CODE);
  }
  const warn = opts.onWarning ?? ((t: string) => err(`warning: ${t}\n`));
  for (const w of res.warnings) warn(w);
  const dumpTo = (res.config as { dumpConfigTo?: string | null }).dumpConfigTo;
  if (dumpTo) opts.writeFile(dumpTo, dumpConfigJson(res.config));
  return res;
}
