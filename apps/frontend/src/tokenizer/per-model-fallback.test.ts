/**
 * ModelTokenizers over mem discovery: a card with a tokenizer gets its own (files from the hub's
 * blob store), a card without one falls back to --model-path (info) or cl100k (a warning that the
 * ids will not be a real engine's), a card with a bad checksum falls back with a warning naming it.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  MemDiscoveryHub,
  memBlobStore,
  publishModelFiles,
  readModelDir,
  registerModelCard,
  type Discovery,
} from '@kvrouter/runtime';
import { tokenizerPackageDir } from '@kvrouter/testkit/parity';
import { PromptEncoder } from './encoder.js';
import { loadTokenizer } from './load.js';
import { ModelTokenizers } from './per-model.js';

const hub = new MemDiscoveryHub();
let d: Discovery;
let t: ModelTokenizers;
const lines: string[] = [];

async function card(name: string, extra: Record<string, unknown>): Promise<void> {
  await registerModelCard(d, {
    namespace: 'ns',
    component: name,
    endpoint: 'generate',
    card: { display_name: name, kv_cache_block_size: 16, context_length: 4096, ...extra },
  });
}

beforeAll(async () => {
  d = hub.connect();
  const fields = await publishModelFiles(memBlobStore(hub), await readModelDir(tokenizerPackageDir('qwen3')));
  await card('with-files', fields as unknown as Record<string, unknown>);
  await card('without', {});
  await card('bad', {
    tokenizer: { hf_tokenizer_json: { path: 'tokenizer.json', checksum: `sha256:${'ab'.repeat(32)}` } },
  });
  const loaded = loadTokenizer({ kind: 'tiktoken', encoding: 'cl100k_base' });
  t = new ModelTokenizers({
    discovery: d,
    namespace: null,
    namespacePrefix: null,
    modelName: null,
    blobs: memBlobStore(hub),
    fallback: {
      loaded,
      encoder: new PromptEncoder({ tokenizer: loaded.tokenizer, mode: 'default' }),
      fromFlag: false,
      source: 'cl100k_base',
    },
    mode: 'default',
    threads: 0,
    log: { info: (m) => lines.push(`info ${m}`), warn: (m) => lines.push(`warn ${m}`) },
  });
  await t.start();
});
afterAll(async () => {
  await t?.close();
  await d?.close();
});

it('each model: its card’s tokenizer, or the fallback with the right message', async () => {
  const own = await t.for('with-files');
  // Qwen3's "你好" is one token (id 108386) in its vocabulary; cl100k needs more.
  expect(Array.from(own.tokenizer.encode('你好'))).toEqual([108386]);
  expect(own.source).toMatch(
    /^the card's tokenizer\.json [0-9a-f]{12} \+ tokenizer_config\.json [0-9a-f]{12}$/,
  );
  const none = await t.for('without');
  expect(none.source).toBe('cl100k_base');
  expect(lines).toContainEqual(expect.stringMatching(/^warn model without has no tokenizer of its own/));
  const bad = await t.for('bad');
  expect(bad.source).toBe('cl100k_base');
  expect(lines).toContainEqual(
    expect.stringMatching(
      /^warn model bad: cannot load the tokenizer its card names \(model file sha256:(ab){32} is not in the mem blob store\)/,
    ),
  );
  // Unknown models get the fallback too.
  expect((await t.for('nobody')).source).toBe('cl100k_base');
});
