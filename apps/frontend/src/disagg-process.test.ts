/**
 * The topology contract end to end with real processes: mocker processes in
 * `--disaggregation-mode prefill|decode` read their zone from `DYN_TOPOLOGY_*` files, publish it in
 * their cards (file discovery, tcp request plane, zmq event plane), and the frontend keeps every
 * decode leg in the prefill worker's zone.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { eventually, startFrontend } from './test-helpers.js';

const root = fileURLToPath(new URL('../../..', import.meta.url));
const children: ChildProcess[] = [];
const tmp: string[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const d of tmp) fs.rmSync(d, { recursive: true, force: true });
});

function zoneDir(zone: string): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'kvr-topo-'));
  tmp.push(d);
  fs.writeFileSync(path.join(d, 'zone'), `${zone}\n`);
  fs.writeFileSync(path.join(d, 'rack'), 'r1\n');
  return d;
}

/** Starts a mocker process and resolves with its worker's instance id (from the ready line). */
async function mocker(kv: string, mode: 'prefill' | 'decode', topologyDir: string): Promise<bigint> {
  const child = spawn(
    process.execPath,
    [
      '--conditions=source',
      '--import',
      'tsx',
      'apps/mocker/src/main.ts',
      ...['--model-path', 'mock-model', '--discovery-backend', 'file', '--event-plane', 'zmq'],
      ...[
        '--endpoint',
        `dyn://dynamo.${mode === 'prefill' ? 'prefill' : 'backend'}.generate`,
        '--disaggregation-mode',
        mode,
      ],
      ...[
        '--speedup-ratio',
        '50',
        '--block-size',
        '16',
        '--num-gpu-blocks-override',
        '1024',
        '--kv-bytes-per-token',
        '131072',
      ],
    ],
    {
      cwd: root,
      env: {
        ...process.env,
        DYN_FILE_KV: kv,
        DYN_TCP_RPC_PORT: '',
        DYN_TOPOLOGY_ENABLED: 'true',
        DYN_TOPOLOGY_MOUNT_PATH: topologyDir,
        DYN_KV_TRANSFER_DOMAIN: 'zone',
        DYN_KV_TRANSFER_ENFORCEMENT: 'required',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  children.push(child);
  let err = '';
  return new Promise<bigint>((resolve, reject) => {
    createInterface({ input: child.stderr! }).on('line', (l) => {
      err += `${l}\n`;
      const m = /mocker ready: .* instances ([0-9a-f]+)/.exec(l);
      if (m) resolve(BigInt(`0x${m[1]}`));
    });
    child.once('exit', (c) => reject(new Error(`mocker ${mode} exited with ${c}: ${err}`)));
  });
}

describe('disaggregated mocker processes with topology files', () => {
  it('required: the decode leg stays in the prefill worker zone read from DYN_TOPOLOGY_MOUNT_PATH', async () => {
    const kv = fs.mkdtempSync(path.join(os.tmpdir(), 'kvr-fkv-'));
    tmp.push(kv);
    const z1 = zoneDir('z1');
    const z2 = zoneDir('z2');
    const [prefill, decode1, decode2] = await Promise.all([
      mocker(kv, 'prefill', z1),
      mocker(kv, 'decode', z1),
      mocker(kv, 'decode', z2),
    ]);
    const fe = await startFrontend(
      ['--discovery-backend', 'file', '--event-plane', 'zmq', '--router-mode', 'kv'],
      { env: { DYN_FILE_KV: kv } },
    );
    try {
      await eventually(
        () => {
          const m = fe.registry.models.get('mock-model');
          return !!m && m.disagg.readyCount === 1 && m.sets.reduce((a, s) => a + s.readyCount, 0) === 2;
        },
        20_000,
        'prefill and decode workers discovered',
      );
      const pset = fe.registry.models.get('mock-model')!.disagg.sets[0]!;
      const rc = pset.workers.get(prefill)!.card!.runtime_config;
      expect(rc.topology_domains).toEqual({ rack: 'r1', zone: 'z1' });
      expect(rc.kv_transfer_domain).toBe('zone');
      expect(rc.kv_transfer_enforcement).toBe('required');
      const decodes: bigint[] = [];
      for (let i = 0; i < 20; i++) {
        const r = await fetch(`${fe.url}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            model: 'mock-model',
            prompt: Array.from({ length: 48 }, (_, k) => 1 + ((i * 131 + k * 7) % 30_000)),
            max_tokens: 3,
            nvext: { extra_fields: ['worker_id'] },
          }),
        });
        const text = await r.text();
        expect(r.status, text).toBe(200);
        expect(text).toContain(`"prefill_worker_id":${prefill}`);
        decodes.push(BigInt(/"decode_worker_id":(\d+)/.exec(text)![1]!));
      }
      expect(new Set(decodes)).toEqual(new Set([decode1]));
      expect(decodes).not.toContain(decode2);
      const metrics = await (await fetch(`${fe.url}/metrics`)).text();
      expect(metrics).toMatch(
        /dynamo_component_router_topology_decode_placements_total\{[^}]*placement="in_domain"\} 20/,
      );
    } finally {
      await fe.close(0);
    }
  }, 90_000);
});
