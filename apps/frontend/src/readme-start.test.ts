/**
 * The README's first command, run as a newcomer would (`npm start` from the repository root, which
 * checks pnpm and dependencies and then starts the frontend from sources), answers a chat request
 * within 30 s.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { freePort } from '@kvrouter/testkit';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../../', import.meta.url));

describe('README start command', () => {
  it('npm start answers a chat request within 30 s', async () => {
    const port = await freePort();
    const t0 = Date.now();
    // Its own process group, so the whole tree (npm → bootstrap → pnpm → node) is stopped by id.
    const child = spawn('npm', ['start', '--', '--http-port', String(port), '--http-host', '127.0.0.1'], {
      cwd: root,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, CI: 'true' },
    });
    let log = '';
    child.stdout!.on('data', (d: Buffer) => (log += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (log += d.toString()));
    try {
      let answer: { choices: { message: { content: string } }[] } | null = null;
      while (Date.now() - t0 < 30_000 && answer === null) {
        await new Promise((r) => setTimeout(r, 250));
        try {
          const r = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({
              model: 'mock-model',
              messages: [{ role: 'user', content: 'Hello!' }],
              max_tokens: 8,
            }),
          });
          if (r.status === 200) answer = (await r.json()) as typeof answer;
        } catch {
          // Not listening yet.
        }
      }
      expect(answer, log).not.toBeNull();
      expect(answer!.choices[0]!.message.content.length).toBeGreaterThan(0);
      // The banner printed the URL and a ready-to-paste curl example.
      expect(log).toContain(`http://127.0.0.1:${port}`);
      expect(log).toContain('curl -s');
      expect(log).toMatch(/started 4 embedded simulated workers/);
    } finally {
      if (child.pid) process.kill(-child.pid, 'SIGTERM');
    }
  });
});
