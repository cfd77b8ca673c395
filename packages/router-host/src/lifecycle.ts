/**
 * Start/stop helpers shared by the hosts: the logger shape, a stack of closers undone in reverse
 * order, and the real clock a production router runs on.
 */
import type { Clock } from '@kvrouter/router';

export interface Logger {
  info(msg: string): void;
  warn(msg: string): void;
  error(msg: string): void;
}

/** `2026-12-01T10:00:00.000Z INFO  message` lines on stderr (stdout stays machine-readable). */
export const stderrLogger: Logger = {
  info: (m) => void process.stderr.write(`${new Date().toISOString()} INFO  ${m}\n`),
  warn: (m) => void process.stderr.write(`${new Date().toISOString()} WARN  ${m}\n`),
  error: (m) => void process.stderr.write(`${new Date().toISOString()} ERROR ${m}\n`),
};

/** The wall clock with unref'd timers (a router's timers never keep a process alive). */
export function realClock(now: () => number = Date.now): Clock {
  return {
    now,
    setTimeout: (f, ms) => setTimeout(f, ms).unref(),
    clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
  };
}

/**
 * What a start-up built, to be undone in reverse order on shutdown or on a failed start. A failing
 * closer does not stop the others (`onError` sees it).
 */
export class Closers {
  private readonly list: (() => unknown)[] = [];

  push(...fns: (() => unknown)[]): void {
    this.list.push(...fns);
  }

  get size(): number {
    return this.list.length;
  }

  /** Runs every closer once, last pushed first; closers pushed meanwhile run too. */
  async close(onError: (e: unknown) => void = () => undefined): Promise<void> {
    for (let c = this.list.pop(); c; c = this.list.pop()) {
      try {
        await c();
      } catch (e) {
        onError(e);
      }
    }
  }
}
