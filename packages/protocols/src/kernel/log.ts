/**
 * The one logger interface. Implementations: `silentLogger` here (tests, embedded runs),
 * `consoleLogger()` in the io subpath (`@kvrouter/protocols/node`: text or JSON lines).
 */
export interface Logger {
  info(msg: string): void;
  warn(msg: string): void;
  error(msg: string): void;
}

export type LogLevel = keyof Logger;

/** Drops everything. */
export const silentLogger: Logger = { info: () => {}, warn: () => {}, error: () => {} };

/** One log line: `2026-01-01T00:00:00.000Z INFO  msg`, or with `json` `{"time":…,"level":"info","msg":…}`. */
export function formatLogLine(level: LogLevel, msg: string, timeIso: string, json = false): string {
  if (json) return JSON.stringify({ time: timeIso, level, msg });
  return `${timeIso} ${level.toUpperCase().padEnd(5)} ${msg}`;
}
