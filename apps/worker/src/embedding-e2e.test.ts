/**
 * An embedding model on the deployment path, every piece its own process: a vLLM-compatible mocker
 * engine with `--model-type embedding` (`POST /v1/embeddings`), the worker adapter with
 * `--model-type embedding` in front of it, and the frontend, meeting through file discovery. The
 * frontend's `/v1/embeddings` reaches the engine through the request plane's `embed` endpoint.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killAll, line, listening, start, until, type Models } from './test-procs.js';

const DIM = 24;

describe('frontend → worker adapter → embedding engine (separate processes)', () => {
  let url = '';

  beforeAll(async () => {
    const env = { DYN_FILE_KV: mkdtempSync(join(tmpdir(), 'kvr-fkv-')) };
    const fe = start(
      'frontend/src/main.ts',
      ['--discovery-backend', 'file', '--http-host', '127.0.0.1', '--http-port', '0'],
      env,
    );
    const feUrl = listening(fe);
    const engine = start(
      'mocker/src/main.ts',
      [
        ...['--model-path', 'mock-embed', '--http-host', '127.0.0.1', '--http-ports', '0'],
        ...['--model-type', 'embedding', '--embedding-dim', String(DIM)],
      ],
      {},
    );
    const e = (
      JSON.parse(await line(engine, /^\{"engines"/, 'mocker')) as { engines: Array<{ http: string }> }
    ).engines[0]!;
    const w = start(
      'worker/src/main.ts',
      ['--engine-url', e.http, '--model-type', 'embedding', '--discovery-backend', 'file'],
      env,
    );
    await line(w, /^\{"instance_id"/, 'worker');
    url = await feUrl;
    await until<Models>(
      `${url}/v1/models`,
      (b) => b.data.some((m) => m.id === 'mock-embed'),
      'listed mock-embed',
    );
  }, 120_000);

  afterAll(() => {
    killAll();
  });

  it('embeddings of token ids: unit vectors of the engine dimension, equal inputs equal vectors, usage', async () => {
    const r = await fetch(`${url}/v1/embeddings`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'mock-embed',
        input: [
          [1, 2, 3],
          [7, 8],
          [1, 2, 3],
        ],
      }),
    });
    expect(r.status).toBe(200);
    const b = (await r.json()) as {
      data: { index: number; embedding: number[] }[];
      usage: { prompt_tokens: number };
    };
    expect(b.data.map((d) => d.index)).toEqual([0, 1, 2]);
    for (const d of b.data) {
      expect(d.embedding).toHaveLength(DIM);
      expect(Math.abs(Math.hypot(...d.embedding) - 1)).toBeLessThan(1e-9);
    }
    expect(b.data[2]!.embedding).toEqual(b.data[0]!.embedding);
    expect(b.data[1]!.embedding).not.toEqual(b.data[0]!.embedding);
    expect(b.usage.prompt_tokens).toBe(3 + 2 + 3);
    // The model does not chat.
    const chat = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'mock-embed', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(chat.status).toBe(400);
  });
});
