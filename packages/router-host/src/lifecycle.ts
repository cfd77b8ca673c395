/**
 * Start/stop helpers shared by the hosts: a stack of closers undone in reverse order, and the
 * clock a production router runs on (the kernel's real clock, unref'd timers).
 */
import type { Clock, Logger } from '@kvrouter/protocols';
import { consoleLogger, realClock } from '@kvrouter/protocols/node';

/** Services whose stdout carries data (a ready line, decisions) log on stderr. */
export const stderrLogger: Logger = consoleLogger({ stderrOnly: true });

/** The wall clock (or an injected `now`) with unref'd timers: a router's timers never keep a process alive. */
export function routerClock(now?: () => number): Clock {
  const c = realClock();
  return now ? { ...c, now } : c;
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
