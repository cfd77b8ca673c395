/**
 * Migration across processes: two simulated workers in their own processes (file discovery, tcp
 * request plane); the one serving a stream is killed with SIGKILL mid-stream. The client's stream
 * continues on the other worker and completes with every token; the migration metric counts it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { bodyReader, eventually, startFrontend } from '../test-helpers.js';

const script = fileURLToPath(new URL('../test-worker-process.ts', import.meta.url));
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

async function startWorker(root: string): Promise<{ child: ChildProcess; id: bigint }> {
  const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', script], {
    env: { ...process.env, DYN_FILE_KV: root, SPEEDUP: '1' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', resolve);
    child.once('exit', (c) => reject(new Error(`worker exited with ${c}`)));
  });
  return { child, id: BigInt((JSON.parse(line) as { id: string }).id) };
}

describe('migration with worker processes', () => {
  it('kill -9 of the serving worker mid-stream: the stream completes on the other one', async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'kvr-fkv-'));
    const workers = await Promise.all([startWorker(root), startWorker(root)]);
    const fe = await startFrontend(['--discovery-backend', 'file', '--migration-limit', '3'], {
      env: { DYN_FILE_KV: root },
    });
    try {
      await eventually(
        () => fe.registry.allSets().some((s) => s.readyCount === 2),
        15_000,
        'both workers discovered',
      );
      const r = await fetch(`${fe.url}/v1/chat/completions`, {
        method: 'POST',
        body: JSON.stringify({
          model: 'mock-model',
          messages: [{ role: 'user', content: 'a long answer please' }],
          // Long enough to still be running when a slow (loaded) test process gets to the kill.
          max_tokens: 400,
          stream: true,
          stream_options: { include_usage: true },
        }),
      });
      const reader = bodyReader(r);
      let text = '';
      while ((text.match(/"content":/g) ?? []).length < 10) text += (await reader.read()) ?? '';
      const set = fe.registry.allSets()[0]!;
      const serving = workers.find((w) => set.router.inflight(w.id) === 1)!;
      expect(serving).toBeDefined();
      serving.child.kill('SIGKILL');
      for (let piece = await reader.read(); piece !== null; piece = await reader.read()) text += piece;
      expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
      expect(text).not.toContain('"error"');
      const usage = text
        .split('\n\n')
        .filter((e) => e.startsWith('data: {'))
        .map((e) => JSON.parse(e.slice(6)) as { usage?: { completion_tokens: number } | null })
        .find((c) => c.usage)!;
      expect(usage.usage!.completion_tokens).toBe(400);
      const m = await (await fetch(`${fe.url}/metrics`)).text();
      expect(m).toMatch(
        /dynamo_frontend_model_migration_total\{model="mock-model",migration_type="ongoing_request"\} 1/,
      );
    } finally {
      await fe.close(0);
    }
  });
});
