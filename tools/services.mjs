#!/usr/bin/env node
// Installs the services integration tests need (Debian nats-server and etcd) when they are missing.
// Tests start their own instances on free loopback ports through @kvrouter/testkit; nothing is left running.
import { spawnSync } from 'node:child_process';

const NEEDED = [
  { bin: 'nats-server', pkg: 'nats-server' },
  { bin: 'etcd', pkg: 'etcd-server' },
  { bin: 'promtool', pkg: 'prometheus' },
  // Page tests drive Debian's Chromium through playwright-core (no browser download).
  { bin: 'chromium', pkg: 'chromium' },
];

function has(bin) {
  return (
    spawnSync('sh', ['-c', `command -v ${bin} || test -x /usr/sbin/${bin} || test -x /usr/bin/${bin}`])
      .status === 0
  );
}

const cmd = process.argv[2] ?? 'install';
if (cmd !== 'install' && cmd !== 'check') {
  console.error(`services: unknown command '${cmd}' (use install or check)`);
  process.exit(2);
}
const missing = NEEDED.filter((n) => !has(n.bin));
if (missing.length === 0) process.exit(0);
if (cmd === 'check') {
  console.error(`services: missing ${missing.map((m) => m.bin).join(', ')}`);
  process.exit(1);
}
const asRoot = !process.getuid || process.getuid() === 0;
const pkgs = missing.map((m) => m.pkg);
console.log(`services: installing ${pkgs.join(' ')} with apt-get`);
const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
const apt = (args) =>
  spawnSync(asRoot ? 'apt-get' : 'sudo', asRoot ? args : ['apt-get', ...args], { stdio: 'inherit', env });
apt(['update']);
const r = apt(['install', '-y', ...pkgs]);
if (r.status !== 0) {
  console.error(`services: apt-get install ${pkgs.join(' ')} failed (exit ${r.status})`);
  process.exit(1);
}
