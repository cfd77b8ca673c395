/**
 * The deployment path with every piece its own process: two vLLM-compatible mocker engines, a worker
 * adapter in front of each, and the kvrouter frontend, all meeting through file discovery and the ZMQ
 * event plane. Chat requests sharing a long prompt all land on the engine that caches it (KV-aware
 * routing on events relayed by the adapters); killing that engine mid-stream makes its adapter fail
 * the stream with a migratable error, and the frontend finishes it on the other engine.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killAll, line, listening, sleep, start, until, type Models } from './test-procs.js';

interface Engine {
  child: ChildProcess;
  http: string;
}

async function blocks(e: Engine): Promise<number> {
  const r = (await (await fetch(`${e.http}/debug/kv_blocks`)).json()) as {
    ranks: Array<{ blocks: string[] }>;
  };
  return r.ranks[0].blocks.length;
}

// ~700 cl100k tokens, so ~44 blocks of 16: a clear cache win for the engine that holds them.
const PROMPT = Array.from(
  { length: 120 },
  (_, i) => `Paragraph ${i}: the quick brown fox jumps over the lazy dog.`,
).join(' ');

describe('frontend → worker adapters → vLLM-compatible engines (separate processes)', () => {
  const engines: Engine[] = [];
  let url = '';

  beforeAll(async () => {
    const env = { DYN_FILE_KV: mkdtempSync(join(tmpdir(), 'kvr-fkv-')) };
    // Started side by side: each process spends seconds loading its sources.
    const fe = start(
      'frontend/src/main.ts',
      [
        '--discovery-backend',
        'file',
        '--router-mode',
        'kv',
        '--http-host',
        '127.0.0.1',
        '--http-port',
        '0',
        '--migration-limit',
        '3',
      ],
      env,
    );
    const feUrl = listening(fe);
    await Promise.all(
      [0, 1].map(async () => {
        const child = start(
          'mocker/src/main.ts',
          [
            ...['--model-path', 'mock-vllm', '--http-host', '127.0.0.1', '--http-ports', '0'],
            ...[
              '--zmq-kv-events-ports',
              '0',
              '--zmq-replay-ports',
              '0',
              '--block-size',
              '16',
              '--num-gpu-blocks-override',
              '2048',
            ],
          ],
          {},
        );
        const e = (
          JSON.parse(await line(child, /^\{"engines"/, 'mocker')) as {
            engines: Array<{ http: string; kv_events: string[]; replay: string[] }>;
          }
        ).engines[0];
        engines.push({ child, http: e.http });
        const w = start(
          'worker/src/main.ts',
          [
            ...['--engine-url', e.http, '--block-size', '16', '--total-kv-blocks', '2048'],
            ...[
              '--kv-events-endpoint',
              e.kv_events[0],
              '--kv-events-replay-endpoint',
              e.replay[0],
              '--discovery-backend',
              'file',
            ],
          ],
          env,
        );
        await line(w, /^\{"instance_id"/, 'worker');
      }),
    );
    url = await feUrl;
    await until<Models>(
      `${url}/v1/models`,
      (b) => b.data.some((m) => m.id === 'mock-vllm'),
      'listed mock-vllm',
    );
    await sleep(1000); // both adapters' cards, instances and event channels
  }, 120_000);

  afterAll(() => {
    killAll();
  });

  const chat = (maxTokens: number, stream = false) =>
    fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'mock-vllm',
        messages: [{ role: 'user', content: PROMPT }],
        max_tokens: maxTokens,
        stream,
        ...(stream ? { stream_options: { include_usage: true } } : {}),
      }),
    });

  it('requests sharing a long prompt all go to the engine that caches it', async () => {
    const r = await chat(4);
    expect(r.status).toBe(200);
    const body = (await r.json()) as {
      choices: Array<{ message: { content: string } }>;
      usage: { completion_tokens: number };
    };
    expect(body.usage.completion_tokens).toBe(4);
    const first = await Promise.all(engines.map(blocks));
    expect(first.filter((n) => n > 0)).toHaveLength(1);
    const holder = first.findIndex((n) => n > 0);
    for (let i = 0; i < 4; i++) {
      await sleep(300); // the engine's events reach the frontend's index (engine → adapter → ZMQ plane)
      expect((await chat(4)).status).toBe(200);
    }
    const after = await Promise.all(engines.map(blocks));
    // Round-robin would have put two or three of the five on the other engine.
    expect(after[1 - holder]).toBe(0);
    expect(after[holder]).toBeGreaterThanOrEqual(first[holder]);
  }, 60_000);

  it('kill -9 of the serving engine mid-stream: the adapter reports a migratable error, the stream completes on the other engine', async () => {
    const holder = (await Promise.all(engines.map(blocks))).findIndex((n) => n > 0);
    const r = await chat(120, true);
    const reader = r.body!.getReader() as ReadableStreamDefaultReader<Uint8Array>;
    const dec = new TextDecoder();
    let text = '';
    while ((text.match(/"content":/g) ?? []).length < 5) {
      const { value, done } = await reader.read();
      if (done) break;
      text += dec.decode(value);
    }
    engines[holder].child.kill('SIGKILL');
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += dec.decode(value);
    }
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(text).not.toContain('"error"');
    const usage = text
      .split('\n\n')
      .filter((e) => e.startsWith('data: {'))
      .map((e) => JSON.parse(e.slice(6)) as { usage?: { completion_tokens: number } | null })
      .find((c) => c.usage)!.usage!;
    expect(usage.completion_tokens).toBe(120);
    // The survivor computed the migrated request: it holds the prompt's blocks now.
    expect(await blocks(engines[1 - holder])).toBeGreaterThan(0);
    const m = await (await fetch(`${url}/metrics`)).text();
    expect(m).toMatch(
      /dynamo_frontend_model_migration_total\{model="mock-vllm",migration_type="ongoing_request"\} 1/,
    );
  }, 60_000);
});
