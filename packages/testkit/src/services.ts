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
    if (proc.exitCode !== null) throw new Error(`${what} exited early with code ${proc.exitCode}`);
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
  const port = opts.port ?? (await freePort());
  const dataDir = mkdtempSync(join(tmpdir(), 'kvr-nats-'));
  const args = ['-a', '127.0.0.1', '-p', String(port)];
  if (opts.jetstream !== false) args.push('-js', '-sd', dataDir);
  const proc = spawn(findBin('nats-server'), args, { stdio: 'ignore' });
  await waitForPort(port, 10_000, proc, 'nats-server');
  return handle(proc, `nats://127.0.0.1:${port}`, port, dataDir);
}

/**
 * `restartOf` starts etcd again after its process was killed (`proc.kill('SIGKILL')`, data kept):
 * same client and peer ports, same data directory, so the same keys and leases (fault tests).
 */
export async function startEtcd(opts: { restartOf?: ServiceHandle } = {}): Promise<ServiceHandle> {
  const old = opts.restartOf;
  const oldPeer = old?.proc.spawnargs[old.proc.spawnargs.indexOf('--listen-peer-urls') + 1];
  const port = old?.port ?? (await freePort());
  const peer = oldPeer ? Number(new URL(oldPeer).port) : await freePort();
  const dataDir = old?.dataDir ?? mkdtempSync(join(tmpdir(), 'kvr-etcd-'));
  const url = `http://127.0.0.1:${port}`;
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
    { stdio: 'ignore' },
  );
  await waitForPort(port, 15_000, proc, 'etcd');
  return handle(proc, url, port, dataDir);
}
