/**
 * `--model-path` on the worker adapter: the engine's tokenizer files travel with the card. The
 * worker (in front of a minimal OpenAI-compatible engine that only answers /v1/models and /health)
 * registers a card naming tokenizer.json and tokenizer_config.json by SHA-256, and the bytes are in
 * the discovery backend's blob store (mem here), equal to the files on disk.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { resolveConfig } from '@kvrouter/config';
import { mdcPrefix } from '@kvrouter/protocols';
import { cardModelFiles, defaultMemHub, memBlobStore, parseModelCard } from '@kvrouter/runtime';
import { tokenizerPackageDir } from '@kvrouter/testkit/parity';
import { startWorker, type RunningWorker } from './worker.js';

let engine: http.Server;
let worker: RunningWorker;
/** mem discovery: the process-wide hub the worker registers in. */
const hub = defaultMemHub();
const dir = tokenizerPackageDir('llama3_1');
const sha = (f: string) =>
  `sha256:${createHash('sha256')
    .update(fs.readFileSync(path.join(dir, f)))
    .digest('hex')}`;

beforeAll(async () => {
  engine = http.createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(
      req.url === '/v1/models' ? JSON.stringify({ data: [{ id: 'llama', max_model_len: 4096 }] }) : '{}',
    );
  });
  await new Promise<void>((r) => engine.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(engine.address() as AddressInfo).port}`;
  const { config } = resolveConfig(
    'worker',
    [
      '--engine-url',
      url,
      '--model-path',
      dir,
      '--discovery-backend',
      'mem',
      '--endpoint',
      'dyn://wmf.backend.generate',
    ],
    {},
  );
  worker = await startWorker(config, { log: () => undefined }, { engineWaitMs: 5000, healthPeriodMs: 200 });
});
afterAll(async () => {
  await worker?.stop();
  await new Promise<void>((r) => engine?.close(() => r()));
});

it('the card names the tokenizer files by checksum; the blob store holds exactly those bytes', async () => {
  const d = hub.connect();
  const [kv] = await d.list(mdcPrefix('wmf', 'backend', 'generate'));
  const files = cardModelFiles(parseModelCard(kv!.value))!;
  expect(files).toEqual({
    tokenizer: { hf_tokenizer_json: { path: 'tokenizer.json', checksum: sha('tokenizer.json') } },
    prompt_formatter: {
      hf_tokenizer_config_json: { path: 'tokenizer_config.json', checksum: sha('tokenizer_config.json') },
    },
  });
  const blob = await memBlobStore(hub).get(sha('tokenizer.json'));
  expect(Buffer.from(blob).equals(fs.readFileSync(path.join(dir, 'tokenizer.json')))).toBe(true);
  await d.close();
});
