/**
 * Launchers for real nats-server (with JetStream) and etcd on free loopback ports.
 * Each returns a handle whose `stop()` kills the process by PID and removes its data directory.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

async function waitForPort(port: number, timeoutMs: number, proc: ChildProcess, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (proc.exitCode !== null) throw new EarlyExit(`${what} exited early with code ${proc.exitCode}`);
    const ok = await new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`${what} did not listen on ${port} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The service process exited before it listened: most often a port that `freePort` handed out was taken in between. */
class EarlyExit extends Error {}

/**
 * Starts a service on ports picked by `pick`; if the process exits before it listens (another process took one of
 * the free ports between `freePort` and the bind, which happens when many suites start services at once), it picks
 * new ports and tries again, up to `attempts` times. The last error carries the process's stderr tail.
 */
async function startWithRetry<P>(
  what: string,
  attempts: number,
  pick: () => Promise<P>,
  launch: (ports: P) => { proc: ChildProcess; port: number },
  timeoutMs: number,
): Promise<{ proc: ChildProcess; ports: P }> {
  for (let attempt = 1; ; attempt++) {
    const ports = await pick();
    const { proc, port } = launch(ports);
    let stderr = '';
    proc.stderr?.on('data', (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-2000);
    });
    try {
      await waitForPort(port, timeoutMs, proc, what);
      proc.stderr?.removeAllListeners('data');
      proc.stderr?.resume();
      return { proc, ports };
    } catch (e) {
      if (!(e instanceof EarlyExit) || attempt >= attempts) {
        if (proc.exitCode === null) proc.kill('SIGKILL');
        throw new Error(`${(e as Error).message} (attempt ${attempt}); stderr tail: ${stderr.slice(-600)}`, {
          cause: e,
        });
      }
    }
  }
}

function findBin(name: string): string {
  for (const dir of ['/usr/sbin', '/usr/bin', '/usr/local/bin']) {
    const p = join(dir, name);
    if (existsSync(p)) return p;
  }
  return name;
}

export interface ServiceHandle {
  url: string;
  port: number;
  proc: ChildProcess;
  dataDir: string;
  stop(): Promise<void>;
  /** SIGSTOP / SIGCONT for fault tests. */
  pause(): void;
  resume(): void;
}

function handle(proc: ChildProcess, url: string, port: number, dataDir: string): ServiceHandle {
  return {
    url,
    port,
    proc,
    dataDir,
    pause: () => proc.kill('SIGSTOP'),
    resume: () => proc.kill('SIGCONT'),
    stop: async () => {
      if (proc.exitCode === null && proc.signalCode === null) {
        const exited = new Promise<void>((r) => proc.once('exit', () => r()));
        proc.kill('SIGCONT');
        proc.kill('SIGKILL');
        await exited;
      }
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export async function startNats(opts: { jetstream?: boolean; port?: number } = {}): Promise<ServiceHandle> {
  const dataDir = mkdtempSync(join(tmpdir(), 'kvr-nats-'));
  const { proc, ports: port } = await startWithRetry(
    'nats-server',
    opts.port === undefined ? 5 : 1,
    async () => opts.port ?? (await freePort()),
    (p) => {
      const args = ['-a', '127.0.0.1', '-p', String(p)];
      if (opts.jetstream !== false) args.push('-js', '-sd', dataDir);
      return { proc: spawn(findBin('nats-server'), args, { stdio: ['ignore', 'ignore', 'pipe'] }), port: p };
    },
    10_000,
  );
  return handle(proc, `nats://127.0.0.1:${port}`, port, dataDir);
}

/**
 * `restartOf` starts etcd again after its process was killed (`proc.kill('SIGKILL')`, data kept):
 * same client and peer ports, same data directory, so the same keys and leases (fault tests).
 */
export async function startEtcd(opts: { restartOf?: ServiceHandle } = {}): Promise<ServiceHandle> {
  const old = opts.restartOf;
  const oldPeer = old?.proc.spawnargs[old.proc.spawnargs.indexOf('--listen-peer-urls') + 1];
  const dataDir = old?.dataDir ?? mkdtempSync(join(tmpdir(), 'kvr-etcd-'));
  const { proc, ports } = await startWithRetry(
    'etcd',
    old ? 1 : 5,
    async () => ({
      client: old?.port ?? (await freePort()),
      peer: oldPeer ? Number(new URL(oldPeer).port) : await freePort(),
    }),
    ({ client, peer }) => {
      const url = `http://127.0.0.1:${client}`;
      // A failed attempt may have left a half-initialised member in a fresh data directory.
      if (!old) rmSync(join(dataDir, 'member'), { recursive: true, force: true });
      const proc = spawn(
        findBin('etcd'),
        [
          '--data-dir',
          dataDir,
          '--listen-client-urls',
          url,
          '--advertise-client-urls',
          url,
          '--listen-peer-urls',
          `http://127.0.0.1:${peer}`,
          '--initial-advertise-peer-urls',
          `http://127.0.0.1:${peer}`,
          '--initial-cluster',
          `default=http://127.0.0.1:${peer}`,
        ],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      );
      return { proc, port: client };
    },
    15_000,
  );
  return handle(proc, `http://127.0.0.1:${ports.client}`, ports.client, dataDir);
}
