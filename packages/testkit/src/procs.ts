/**
 * The mocker and the standalone router (apps/standalone-router) as child processes, as a user runs
 * them, on the etcd + NATS of a test (started by path: apps never import each other). The router's
 * first stdout line says where it listens. Shared by the frontend's and the standalone router's tests.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { freePort } from './services.js';

export const REPO = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

export interface Proc {
  child: ChildProcess;
  stderr: () => string;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

export interface Infra {
  etcd: string;
  nats: string;
}

const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of live) c.kill('SIGKILL');
});

/** tsx's loader by absolute URL, so a child may run in any working directory. */
const TSX = import.meta.resolve('tsx');

function start(
  script: string,
  args: string[],
  infra: Infra,
  env: Record<string, string> = {},
  cwd: string = REPO,
): Proc {
  const child = spawn(
    process.execPath,
    ['--conditions=source', '--import', TSX, join(REPO, script), ...args],
    {
      cwd,
      env: {
        ...process.env,
        ETCD_ENDPOINTS: infra.etcd,
        NATS_SERVER: infra.nats,
        DYN_TCP_RPC_PORT: '',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  live.add(child);
  let err = '';
  child.stderr!.on('data', (b: Buffer) => {
    err += b.toString();
    if (err.length > 200_000) err = err.slice(-100_000);
  });
  return {
    child,
    stderr: () => err,
    kill: async (signal = 'SIGKILL') => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((r) => child.once('exit', () => r()));
      child.kill(signal);
      await exited;
      live.delete(child);
    },
  };
}

export interface MockerProcOptions {
  /** Working directory of the process (default the repository). */
  cwd?: string;
  /** `--model-path` (default `mock-model`, the simulated model). */
  modelPath?: string;
}

/** `--num-workers` simulated engines registered in etcd, KV events on NATS, generate over tcp. */
export function startMocker(
  infra: Infra,
  ns: string,
  numWorkers: number,
  extra: string[] = [],
  opts: MockerProcOptions = {},
): Proc {
  return start(
    'apps/mocker/src/main.ts',
    [
      '--model-path',
      opts.modelPath ?? 'mock-model',
      '--discovery-backend',
      'etcd',
      '--event-plane',
      'nats',
      '--endpoint',
      `dyn://${ns}.backend.generate`,
      '--num-workers',
      String(numWorkers),
      '--speedup-ratio',
      '10',
      '--block-size',
      '16',
      '--num-gpu-blocks-override',
      '1024',
      ...extra,
    ],
    infra,
    {},
    opts.cwd,
  );
}

export interface RouterProc extends Proc {
  routerId: bigint;
  systemUrl: string;
  transport: { tcp: string };
}

/** The standalone router in kv mode with its system port on a free port. */
export async function startRouterProcess(
  infra: Infra,
  ns: string,
  extra: string[] = [],
): Promise<RouterProc> {
  const p = start(
    'apps/standalone-router/src/main.ts',
    [
      '--endpoint',
      `dyn://${ns}.backend.generate`,
      '--router-mode',
      'kv',
      '--discovery-backend',
      'etcd',
      '--event-plane',
      'nats',
      '--router-event-threads',
      '1',
      ...extra,
    ],
    infra,
    { DYN_SYSTEM_PORT: '0' },
  );
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: p.child.stdout! }).once('line', resolve);
    p.child.once('exit', (c) => reject(new Error(`router exited with ${c}: ${p.stderr()}`)));
  });
  const info = JSON.parse(line) as { router_id: string; system_url: string; transport: { tcp: string } };
  return { ...p, routerId: BigInt(info.router_id), systemUrl: info.system_url, transport: info.transport };
}

export interface FrontendProc extends Proc {
  url: string;
}

/** The frontend (apps/frontend) as a process on a free port, kv discovery over etcd, events over NATS. */
export async function startFrontendProcess(
  infra: Infra,
  ns: string,
  extra: string[] = [],
): Promise<FrontendProc> {
  const port = await freePort();
  const p = start(
    'apps/frontend/src/main.ts',
    [
      ...['--http-host', '127.0.0.1', '--http-port', String(port), '--namespace', ns],
      ...['--discovery-backend', 'etcd', '--event-plane', 'nats', '--router-event-threads', '1'],
      ...extra,
    ],
    infra,
  );
  const url = `http://127.0.0.1:${port}`;
  await eventually(
    async () => {
      if (p.child.exitCode !== null)
        throw new Error(`frontend exited with ${p.child.exitCode}: ${p.stderr()}`);
      return (await fetch(`${url}/live`)).ok;
    },
    60_000,
    'the frontend to serve /live',
  );
  return { ...p, url };
}

export async function eventually<T>(
  probe: () => Promise<T | null | undefined | false>,
  ms: number,
  what: string,
): Promise<T> {
  const end = Date.now() + ms;
  let last: unknown = null;
  for (;;) {
    try {
      const v = await probe();
      if (v !== null && v !== undefined && v !== false) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end)
      throw new Error(
        `timed out waiting for ${what}${last ? ` (last error: ${last instanceof Error ? last.message : JSON.stringify(last)})` : ''}`,
      );
    await new Promise((r) => setTimeout(r, 50));
  }
}
