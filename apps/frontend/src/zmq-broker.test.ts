/**
 * ZMQ broker mode (`DYN_ZMQ_BROKER_URL`, PROTOCOL §5.2) through the frontend: a mocker process publishes
 * its KV events to the broker's XSUB side only (it binds no PUB socket of its own), so the frontend's
 * index fills only if the frontend's event plane subscribes at the broker's XPUB side too.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { ZmqBroker } from '@kvrouter/kv-events';
import { afterAll, describe, expect, it } from 'vitest';
import { eventually, startFrontend } from './test-helpers.js';

const root = fileURLToPath(new URL('../../..', import.meta.url));
const children: ChildProcess[] = [];
const tmp: string[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const d of tmp) fs.rmSync(d, { recursive: true, force: true });
});

function mocker(kv: string, brokerUrl: string): Promise<void> {
  const child = spawn(
    process.execPath,
    [
      '--conditions=source',
      '--import',
      'tsx',
      'apps/mocker/src/main.ts',
      ...['--model-path', 'mock-model', '--discovery-backend', 'file', '--event-plane', 'zmq'],
      ...['--speedup-ratio', '50', '--block-size', '16', '--num-gpu-blocks-override', '1024'],
    ],
    {
      cwd: root,
      env: { ...process.env, DYN_FILE_KV: kv, DYN_TCP_RPC_PORT: '', DYN_ZMQ_BROKER_URL: brokerUrl },
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  children.push(child);
  let err = '';
  return new Promise<void>((resolve, reject) => {
    createInterface({ input: child.stderr! }).on('line', (l) => {
      err += `${l}\n`;
      if (/mocker ready/.test(l)) resolve();
    });
    child.once('exit', (c) => reject(new Error(`mocker exited with ${c}: ${err}`)));
  });
}

function storedOk(metrics: string): number {
  const m =
    /dynamo_component_kv_cache_events_applied\{[^}]*status="ok"[^}]*event_type="stored"[^}]*\} (\d+)/.exec(
      metrics,
    ) ??
    /dynamo_component_kv_cache_events_applied\{[^}]*event_type="stored"[^}]*status="ok"[^}]*\} (\d+)/.exec(
      metrics,
    );
  return m ? Number(m[1]) : 0;
}

describe('frontend event plane over a ZMQ broker', () => {
  it('KV events published only to the broker reach the frontend index', async () => {
    const broker = await ZmqBroker.start();
    const url = `xsub=${broker.endpoints.xsub.join(';')} , xpub=${broker.endpoints.xpub.join(';')}`;
    const kv = fs.mkdtempSync(path.join(os.tmpdir(), 'kvr-fkv-'));
    tmp.push(kv);
    await mocker(kv, url);
    const fe = await startFrontend(
      ['--discovery-backend', 'file', '--event-plane', 'zmq', '--router-mode', 'kv'],
      {
        env: { DYN_FILE_KV: kv, DYN_ZMQ_BROKER_URL: url },
      },
    );
    try {
      await eventually(
        () => (fe.registry.models.get('mock-model')?.sets.reduce((a, s) => a + s.readyCount, 0) ?? 0) === 1,
        20_000,
        'mocker worker discovered',
      );
      // Each distinct 64-token prompt (block size 16 = 4 full blocks) makes the engine store new blocks,
      // so the applied Stored-event count must grow after every request. The worker's discovery dump can
      // race the first request, so three requests are checked: only live events explain the later ones.
      const metrics = async (): Promise<number> => storedOk(await (await fetch(`${fe.url}/metrics`)).text());
      for (let i = 0; i < 3; i++) {
        const before = await metrics();
        const r = await fetch(`${fe.url}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            model: 'mock-model',
            prompt: Array.from({ length: 64 }, (_, k) => 100 + i * 1000 + k),
            max_tokens: 2,
          }),
        });
        expect(r.status, await r.text()).toBe(200);
        let now = before;
        const end = Date.now() + 10_000;
        while (now <= before && Date.now() < end) {
          await new Promise((res) => setTimeout(res, 50));
          now = await metrics();
        }
        expect(now, `request ${i}: Stored events applied before ${before}, after ${now}`).toBeGreaterThan(
          before,
        );
      }
    } finally {
      await fe.close(0);
      await broker.close();
    }
  }, 90_000);
});
