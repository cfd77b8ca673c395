/**
 * `@kvrouter/protocols/node`: the io half of the kernel (real timers, the wall or monotonic clock,
 * console output). Everything else in this package is pure; pure packages never import this entry.
 */
/* eslint-disable no-restricted-globals, no-restricted-properties -- the io subpath: real timers and clocks live here */
import type { Clock, TimerHandle } from '../kernel/clock.js';
import { formatLogLine, type Logger, type LogLevel } from '../kernel/log.js';

export interface RealClockOptions {
  /** `performance.now()` (sub-ms, immune to wall-clock steps) instead of `Date.now()` (ms since the Unix epoch, the default). */
  monotonic?: boolean;
  /** Keep timers ref'd (they hold the process open). Default false: timers are `unref()`ed. */
  ref?: boolean;
}

/** The real clock: `Date.now()` (or `performance.now()`) and Node timers, unref'd unless `ref`. */
export function realClock(o: RealClockOptions = {}): Clock {
  const ref = o.ref ?? false;
  return {
    now: o.monotonic ? () => performance.now() : Date.now,
    setTimeout: (fn: () => void, ms: number): TimerHandle => {
      const t = setTimeout(fn, ms);
      if (!ref) t.unref();
      return t;
    },
    clearTimeout: (h: TimerHandle) => clearTimeout(h as ReturnType<typeof setTimeout>),
  };
}

export interface ConsoleLoggerOptions {
  /** One JSON object a line instead of `time LEVEL msg`. */
  json?: boolean;
  /** Everything to stderr (services whose stdout carries data); default: info to stdout, warn/error to stderr. */
  stderrOnly?: boolean;
}

/** THE console logger: one line per message, ISO time and level first (or JSON lines). */
export function consoleLogger(o: ConsoleLoggerOptions = {}): Logger {
  const line = (level: LogLevel, m: string) =>
    formatLogLine(level, m, new Date().toISOString(), o.json) + '\n';
  const out = (level: LogLevel) =>
    level === 'info' && !o.stderrOnly
      ? (m: string) => void process.stdout.write(line(level, m))
      : (m: string) => void process.stderr.write(line(level, m));
  return { info: out('info'), warn: out('warn'), error: out('error') };
}
