/**
 * Tokenizer per model from the model card, over real etcd + NATS (JetStream object store): two
 * mocker processes, each in its own working directory with its own model directory given as a
 * relative `--model-path` (Llama 3.1's and Qwen3's tokenizer files), register cards naming their
 * files by checksum; the frontend (this process, the repository as working directory, no
 * `--model-path`) fetches the files from NATS after the workers' directories are deleted, serves
 * both models with each its own tokenizer and template, and says so in its log. A third mocker
 * without a model directory is the simulated mock-model, cl100k by its card's explicit default.
 * Checked through `nvext.token_data` (query-only) against the parity fixtures.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as cl100k from 'gpt-tokenizer/encoding/cl100k_base';
import {
  eventually,
  startEtcd,
  startMocker,
  startNats,
  type Proc,
  type ServiceHandle,
} from '@kvrouter/testkit';
import { parityConversations, parityFixture, tokenizerPackageDir } from '@kvrouter/testkit/parity';
import type { Frontend } from '../frontend.js';
import type { Logger } from '../models.js';
import { startFrontend } from '../test-helpers.js';

const NS = 'fetokcard';
let etcd: ServiceHandle;
let nats: ServiceHandle;
const mockers: Proc[] = [];
const dirs: string[] = [];
let fe: Frontend;
const lines: string[] = [];
const log: Logger = {
  info: (m) => lines.push(`info ${m}`),
  warn: (m) => lines.push(`warn ${m}`),
  error: (m) => lines.push(`error ${m}`),
};

/** A working directory holding `model/` with the tokenizer's files (copied from the npm package). */
function workdir(name: 'llama3_1' | 'qwen3'): string {
  const wd = fs.mkdtempSync(path.join(os.tmpdir(), `kvr-worker-${name}-`));
  dirs.push(wd);
  fs.mkdirSync(path.join(wd, 'model'));
  for (const f of ['tokenizer.json', 'tokenizer_config.json'])
    fs.copyFileSync(path.join(tokenizerPackageDir(name), f), path.join(wd, 'model', f));
  return wd;
}

async function queryIds(model: string, body: Record<string, unknown>): Promise<number[]> {
  const res = await fetch(`${fe.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, max_tokens: 1, ...body, nvext: { annotations: ['query_instance_id:'] } }),
  });
  const j = (await res.json()) as { nvext?: { token_data?: number[] }; error?: { message: string } };
  if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${j.error?.message}`);
  return j.nvext!.token_data!;
}

beforeAll(async () => {
  [etcd, nats] = await Promise.all([startEtcd(), startNats({ jetstream: true })]);
  const infra = { etcd: etcd.url, nats: nats.url };
  const wdLlama = workdir('llama3_1');
  const wdQwen = workdir('qwen3');
  mockers.push(
    startMocker(infra, NS, 1, ['--model-name', 'llama'], { cwd: wdLlama, modelPath: 'model' }),
    startMocker(infra, `${NS}q`, 1, ['--model-name', 'qwen'], { cwd: wdQwen, modelPath: 'model' }),
    startMocker(infra, `${NS}m`, 1, ['--model-name', 'mock-model']),
  );
  // Published once each mocker is ready; then the workers' own copies go away.
  for (const m of mockers)
    await eventually(async () => m.stderr().includes('mocker ready') || null, 60_000, 'mocker ready');
  for (const wd of [wdLlama, wdQwen]) fs.rmSync(path.join(wd, 'model'), { recursive: true });
  fe = await startFrontend(
    [
      '--discovery-backend',
      'etcd',
      '--event-plane',
      'nats',
      '--namespace-prefix',
      NS,
      '--router-mode',
      'round-robin',
    ],
    { env: { ETCD_ENDPOINTS: etcd.url, NATS_SERVER: nats.url }, log },
  );
  await eventually(async () => fe.registry.list().length === 3 || null, 30_000, 'three models');
}, 120_000);

afterAll(async () => {
  await fe?.close(0);
  await Promise.all(mockers.map((m) => m.kill()));
  await Promise.all([etcd?.stop(), nats?.stop()]);
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

describe('tokenizer per model from the card (etcd + NATS object store)', () => {
  it('each model tokenizes with its worker’s tokenizer and template, fetched from NATS', async () => {
    const convs = new Map(parityConversations().map((c) => [c.id, c]));
    for (const [model, name] of [
      ['llama', 'llama3_1'],
      ['qwen', 'qwen3'],
    ] as const) {
      const fixture = parityFixture(name);
      for (const id of ['zh', 'toolcall-history', 'emoji', 'lookalike-chatml']) {
        const conv = convs.get(id)!;
        const ids = await queryIds(model, {
          messages: conv.messages,
          ...(conv.tools ? { tools: conv.tools } : {}),
          add_generation_prompt: conv.add_generation_prompt ?? false,
        });
        expect(ids, `${model} ${id}`).toEqual(fixture.cases.find((c) => c.id === id)!.ids);
      }
    }
    // The log names each model's tokenizer source: the card's files, by checksum.
    expect(
      lines.some((l) =>
        /^info model llama: tokenizer .* from the card's tokenizer\.json [0-9a-f]{12}/.test(l),
      ),
    ).toBe(true);
    expect(
      lines.some((l) =>
        /^info model qwen: tokenizer .* from the card's tokenizer\.json [0-9a-f]{12}/.test(l),
      ),
    ).toBe(true);
  });

  it('the simulated mock-model uses cl100k by its card, with ChatML and no warning', async () => {
    const ids = await queryIds('mock-model', {
      messages: [{ role: 'user', content: 'Hi 👋' }],
      add_generation_prompt: true,
    });
    // <|im_start|>=100264, <|im_end|>=100265 in cl100k_base.
    expect(ids).toEqual([
      100264,
      ...cl100k.encode('user\nHi 👋'),
      100265,
      ...cl100k.encode('\n'),
      100264,
      ...cl100k.encode('assistant\n'),
    ]);
    expect(
      lines.some((l) => l.includes("model mock-model: tokenizer cl100k_base (the card's explicit default)")),
    ).toBe(true);
    expect(lines.filter((l) => l.startsWith('warn') && l.includes('no tokenizer of its own'))).toEqual([]);
  });
});
