/**
 * Test support for the end-to-end tests that run each app as its own process (as deployed): start
 * an app by path from sources, wait for a line of its stdout, kill what is left. State is per test
 * file (vitest loads this module once per file).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const APPS = fileURLToPath(new URL('../../', import.meta.url));
const children: ChildProcess[] = [];
/** Everything the started processes wrote to stderr (error messages quote its tail). */
const logs: string[] = [];

/** Starts `apps/<script>` under tsx with `env` added to this process's environment. */
export function start(script: string, args: string[], env: Record<string, string>): ChildProcess {
  const child = spawn(
    process.execPath,
    ['--conditions=source', '--import', 'tsx', join(APPS, script), ...args],
    {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  child.stderr!.on('data', (d: Buffer) => logs.push(d.toString()));
  children.push(child);
  return child;
}

/** First stdout line matching `re`; fails with the stderr tail if the process exits first. */
export function line(child: ChildProcess, re: RegExp, what: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const rl = createInterface({ input: child.stdout! });
    rl.on('line', (l) => {
      if (re.test(l)) {
        rl.close();
        resolve(l);
      }
    });
    child.once('exit', (c) => reject(new Error(`${what} exited with ${c}: ${logs.join('').slice(-3000)}`)));
  });
}

/** `GET /v1/models`'s body. */
export interface Models {
  data: Array<{ id: string }>;
}

/** The frontend's base URL from its `listening on http://…` line. */
export async function listening(fe: ChildProcess): Promise<string> {
  return /listening on (http:\/\/\S+)/.exec(await line(fe, /listening on http/, 'frontend'))![1]!;
}

/**
 * Polls `GET url` every 200 ms until `ok` holds for its JSON body; after `ms` fails naming `what`
 * with the stderr tail.
 */
export async function until<T>(
  url: string,
  ok: (body: T) => boolean,
  what: string,
  ms = 30_000,
): Promise<void> {
  const end = Date.now() + ms;
  for (;;) {
    const body = await fetch(url).then(
      (r) => r.json() as Promise<T>,
      () => null,
    );
    if (body !== null && ok(body)) return;
    if (Date.now() > end) throw new Error(`the frontend never ${what}: ${logs.join('').slice(-2000)}`);
    await sleep(200);
  }
}

/** SIGKILL to every started process still running. */
export function killAll(): void {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
