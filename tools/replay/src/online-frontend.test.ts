/**
 * `pnpm replay <trace> --replay-mode online --url …` exactly as a user runs it (a child process
 * through pnpm), against a real kvrouter frontend started as its own process on a loopback port
 * (`apps/frontend/src/main.ts`, embedded simulated engines, kv routing). The report must count
 * every request as finished with sane TTFT / ITL / E2E figures and the server's usage data.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

/** Starts the frontend the way `npm start` does, on a free port; resolves with its URL. */
async function startFrontend(): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(
    process.execPath,
    [
      '--conditions=source',
      '--import',
      'tsx',
      path.join(root, 'apps/frontend/src/main.ts'),
      '--http-host',
      '127.0.0.1',
      '--http-port',
      '0',
      '--router-mode',
      'kv',
      '--mocker-workers',
      '2',
    ],
    { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  children.push(child);
  const url = await new Promise<string>((resolve, reject) => {
    const rl = createInterface({ input: child.stdout! });
    rl.on('line', (line) => {
      const m = /listening on (https?:\/\/\S+)/.exec(line);
      if (m) resolve(m[1]!);
    });
    child.once('exit', (code) => reject(new Error(`frontend exited with ${code} before listening`)));
  });
  return { url, child };
}

function run(
  cmd: string,
  args: string[],
  cwd: string,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const c = spawn(cmd, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(c);
    let stdout = '';
    let stderr = '';
    c.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    c.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    c.once('error', reject);
    c.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

interface Dist {
  n: number;
  p50: number;
  max: number;
}

describe('pnpm replay --replay-mode online against a live frontend', () => {
  it(
    'replays a small multi-turn trace: every request finishes, timings and usage are sane',
    { timeout: 180_000 },
    async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvr-replay-online-'));
      // 3 sessions x 3 turns (each turn extends the previous prompt by one 512-token trace block,
      // 10 ms think time) and 2 single requests: 11 rows, 8..12 output tokens each.
      const rows: object[] = [];
      for (let s = 0; s < 3; s++)
        for (let t = 0; t < 3; t++)
          rows.push({
            timestamp: s * 40 + t,
            input_length: 512 * (t + 1) + 100,
            output_length: 8 + t,
            hash_ids: Array.from({ length: t + 2 }, (_, i) => s * 100 + i),
            session_id: `s${s}`,
            ...(t > 0 ? { delay: 10 } : {}),
          });
      rows.push({ timestamp: 150, input_length: 300, output_length: 12, hash_ids: [900] });
      rows.push({ timestamp: 160, input_length: 700, output_length: 10, hash_ids: [901, 902] });
      const trace = path.join(dir, 'trace.jsonl');
      fs.writeFileSync(trace, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
      const totalOut = (rows as { output_length: number }[]).reduce((a, r) => a + r.output_length, 0); // 3*(8+9+10) + 12 + 10 = 103
      const totalIn = (rows as { input_length: number }[]).reduce((a, r) => a + r.input_length, 0); // 3*(612+1124+1636) + 300 + 700 = 11116
      expect(totalOut).toBe(103);
      expect(totalIn).toBe(11116);

      const fe = await startFrontend();
      const reportPath = path.join(dir, 'report.json');
      try {
        const r = await run(
          'pnpm',
          [
            'replay',
            trace,
            '--replay-mode',
            'online',
            '--url',
            fe.url,
            '--report-json',
            reportPath,
            '--no-progress',
          ],
          root,
        );
        expect(r.stderr).not.toMatch(/error/i);
        expect(r.code).toBe(0);
        expect(r.stdout).toContain('11 requests (11 finished, 0 rejected, 0 unfinished)');
        const rep = JSON.parse(fs.readFileSync(reportPath, 'utf8')) as {
          requests: { total: number; finished: number; rejected: number; unfinished: number };
          ttft_ms: Dist;
          itl_ms: Dist;
          e2e_ms: Dist;
          throughput: { duration_s: number; requests_per_s: number; output_tokens_per_s: number };
          cache: { prompt_tokens: number; cached_tokens: number };
        };
        expect(rep.requests).toMatchObject({ total: 11, finished: 11, rejected: 0, unfinished: 0 });
        for (const d of [rep.ttft_ms, rep.itl_ms, rep.e2e_ms]) expect(d.n).toBe(11);
        // Real engines at §17 speed on a loopback port: positive, ordered, far below a stall.
        expect(rep.ttft_ms.p50).toBeGreaterThan(0);
        // Several tokens can arrive in one read (ITL 0 for that request), never a negative or a stall.
        expect(rep.itl_ms.p50).toBeGreaterThanOrEqual(0);
        expect(rep.itl_ms.max).toBeLessThan(1000);
        expect(rep.e2e_ms.p50).toBeGreaterThan(rep.ttft_ms.p50);
        expect(rep.e2e_ms.max).toBeGreaterThanOrEqual(rep.ttft_ms.max);
        expect(rep.e2e_ms.max).toBeLessThan(30_000);
        // Every output token reached the client: tokens/s x duration gives back the 103 requested.
        expect(
          Math.abs(rep.throughput.output_tokens_per_s * rep.throughput.duration_s - totalOut),
        ).toBeLessThan(1);
        // Usage came from the server: prompt tokens are the trace's input lengths, and later turns of
        // a session were served from the prefix cache their first turn left on the same worker.
        expect(rep.cache.prompt_tokens).toBe(totalIn);
        expect(rep.cache.cached_tokens).toBeGreaterThan(0);
        expect(rep.cache.cached_tokens).toBeLessThan(totalIn);
      } finally {
        fe.child.kill('SIGTERM');
        await new Promise((r) => fe.child.once('exit', r));
        fs.rmSync(dir, { recursive: true, force: true });
      }
    },
  );
});
