/**
 * The broker process (`pnpm --filter @kvrouter/kv-events broker`) on file discovery: it prints its
 * URL, registers in the namespace, relays between planes that found it through discovery
 * (`DYN_ZMQ_BROKER_ENABLED=true`), and withdraws its record on SIGTERM.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { createDiscovery } from '@kvrouter/runtime';
import { kvEventsTopic } from './types.js';
import { ZmqEventPlane } from './zmq.js';
import { brokerChannelsPrefix, parseBrokerChannel, parseBrokerUrl } from './zmq-broker.js';

const MAIN = fileURLToPath(new URL('./zmq-broker-main.ts', import.meta.url));

describe('zmq broker process', () => {
  it('registers in file discovery, relays, and deregisters on SIGTERM', async () => {
    const root = mkdtempSync(join(tmpdir(), 'kvr-broker-'));
    const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', MAIN], {
      env: {
        ...process.env,
        DYN_DISCOVERY_BACKEND: 'file',
        DYN_FILE_KV: root,
        ZMQ_BROKER_NAMESPACE: 'bns',
        ZMQ_BROKER_XSUB_BIND: 'tcp://127.0.0.1:0',
        ZMQ_BROKER_XPUB_BIND: 'tcp://127.0.0.1:0',
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      const line = await new Promise<string>((resolve, reject) => {
        createInterface({ input: child.stdout! }).once('line', resolve);
        child.once('exit', (c) => reject(new Error(`broker exited with ${c}`)));
      });
      const url = (JSON.parse(line) as { url: string }).url;
      const d = await createDiscovery({ backend: 'file', fileRoot: root });
      const recs = await d.list(brokerChannelsPrefix('bns'));
      expect(recs.map((r) => parseBrokerChannel(r.value))).toEqual([parseBrokerUrl(url)]);

      const opts = { joinDelayMs: 100, broker: 'discovery' as const };
      const pub = new ZmqEventPlane({ publisherId: 1n, discovery: d, ...opts });
      const sub = new ZmqEventPlane({ publisherId: 2n, discovery: d, ...opts });
      const T = kvEventsTopic('bns', 'backend');
      const s = sub.subscribe(T);
      const first = s.next();
      // The file backend discovers by polling: keep publishing until the path is live.
      let got = false;
      void first.then(() => (got = true));
      for (let i = 0; i < 100 && !got; i++) {
        pub.publish(T, new Uint8Array([i]));
        await new Promise((r) => setTimeout(r, 50));
      }
      expect((await first).done).toBe(false);
      s.close();
      await pub.close();
      await sub.close();

      child.kill('SIGTERM');
      expect(await new Promise((r) => child.once('exit', r))).toBe(0);
      expect(await d.list(brokerChannelsPrefix('bns'))).toEqual([]);
      await d.close();
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  }, 30_000);
});
