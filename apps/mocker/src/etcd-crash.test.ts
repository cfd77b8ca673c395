/**
 * A mocker child process registered in etcd vanishes from discovery within the lease TTL (10 s,
 * docs/protocol.md §6.2) after `kill -9`: nothing deregisters it, only the lease expiry does. The same
 * child also serves a generate stream over tcp to a client in this process.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EtcdDiscovery, TcpRequestClient, watchInstances, type Instance } from '@kvrouter/runtime';
import { startEtcd, type ServiceHandle } from '@kvrouter/testkit';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const TTL_MS = 10_000;

let etcd: ServiceHandle;
let child: ChildProcess | null = null;
let stderr = '';

beforeAll(async () => {
  etcd = await startEtcd();
});

afterAll(async () => {
  if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await etcd?.stop();
});

describe('mocker child process on etcd', () => {
  it('serves generate, and its instance disappears within the lease TTL after kill -9', async () => {
    const observer = await EtcdDiscovery.connect({ endpoints: etcd.url });
    const watch = watchInstances(observer, {
      namespace: 'crashtest',
      component: 'backend',
      endpoint: 'generate',
    });
    try {
      const c = spawn(
        process.execPath,
        [
          '--conditions=source',
          '--import',
          'tsx',
          'apps/mocker/src/main.ts',
          '--model-path',
          'mock-model',
          '--discovery-backend',
          'etcd',
          '--event-plane',
          'zmq',
          '--endpoint',
          'dyn://crashtest.backend.generate',
          '--speedup-ratio',
          '10',
          '--block-size',
          '16',
          '--num-gpu-blocks-override',
          '1024',
        ],
        {
          cwd: root,
          env: { ...process.env, ETCD_ENDPOINTS: etcd.url, DYN_TCP_RPC_PORT: '' },
          stdio: ['ignore', 'ignore', 'pipe'],
        },
      );
      child = c;
      c.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));

      // Plain next() calls: breaking out of a for-await would close the watch.
      let inst: Instance | null = null;
      while (inst === null && c.exitCode === null) {
        const r = await watch.next();
        if (r.done) break;
        if (r.value.type === 'put') inst = r.value.value;
      }
      expect(inst, stderr).not.toBeNull();

      const client = new TcpRequestClient();
      const tokens: number[] = [];
      let finish: string | undefined;
      for await (const item of client.stream<{ token_ids: number[]; finish_reason?: string }>(
        inst!.transport,
        'generate',
        {
          request_id: 'x1',
          model: 'mock-model',
          token_ids: Array.from({ length: 40 }, (_, i) => i + 1),
          stop_conditions: { max_tokens: 5 },
        },
      )) {
        tokens.push(...item.token_ids);
        finish = item.finish_reason ?? finish;
      }
      await client.close();
      expect(tokens).toHaveLength(5);
      expect(finish).toBe('length');

      c.kill('SIGKILL');
      const killedAt = performance.now();
      let goneAfter = -1;
      while (goneAfter < 0) {
        const r = await watch.next();
        if (r.done) break;
        if (r.value.type === 'delete' && r.value.parts.instance_id === inst!.instance_id)
          goneAfter = performance.now() - killedAt;
      }
      // etcd expires a lease at most TTL after its last keep-alive, and checks expiry every ~500 ms.
      expect(goneAfter).toBeGreaterThanOrEqual(0);
      expect(goneAfter).toBeLessThan(TTL_MS + 1000);
    } finally {
      watch.close();
      await observer.close();
    }
  }, 40_000);
});
