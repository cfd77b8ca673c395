/**
 * Model files carried by cards: each blob store (mem, file, the NATS object store on a real
 * JetStream server) stores bytes under their SHA-256, returns them verified, refuses unknown and
 * corrupted blobs naming the checksum; card fields are built and parsed back.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KvrError } from '@kvrouter/protocols';
import { startNats, type ServiceHandle } from '@kvrouter/testkit';
import { MemDiscoveryHub } from './discovery/mem.js';
import {
  FileBlobStore,
  NatsBlobStore,
  cardModelFiles,
  memBlobStore,
  publishModelFiles,
  readModelDir,
  type BlobStore,
} from './model-files.js';
import { connectNats, type NatsConnection } from './nats-connection.js';

const text = (s: string) => new TextEncoder().encode(s);
const hello = text('{"model": "tokenizer", "日本": "語"}');
// sha256 of the bytes above, computed independently of the code under test.
const HELLO_SUM = `sha256:${createHash('sha256').update(Buffer.from(hello)).digest('hex')}`;

let nats: ServiceHandle;
let nc: NatsConnection;
const dirs: string[] = [];
const tmp = () => {
  const d = mkdtempSync(join(tmpdir(), 'kvr-blobs-'));
  dirs.push(d);
  return d;
};

beforeAll(async () => {
  nats = await startNats({ jetstream: true });
  nc = await connectNats(nats.url);
});
afterAll(async () => {
  await nc?.close();
  await nats?.stop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const stores: [string, () => Promise<BlobStore>][] = [
  ['mem', () => Promise.resolve(memBlobStore(new MemDiscoveryHub()))],
  ['file', () => Promise.resolve(new FileBlobStore(tmp()))],
  ['nats', () => NatsBlobStore.open(nc)],
];

describe.each(stores)('%s blob store', (_kind, open) => {
  it('put returns the sha256 checksum; get returns the same bytes; put is idempotent', async () => {
    const s = await open();
    expect(await s.put(hello)).toBe(HELLO_SUM);
    expect(await s.put(hello)).toBe(HELLO_SUM);
    expect(Buffer.from(await s.get(HELLO_SUM)).equals(Buffer.from(hello))).toBe(true);
  });

  it('an unknown checksum is model_file_missing; a malformed one names the field', async () => {
    const s = await open();
    const missing = `sha256:${'0'.repeat(64)}`;
    await expect(s.get(missing)).rejects.toMatchObject({ code: 'model_file_missing', status: 503 });
    await expect(s.get('md5:abc')).rejects.toMatchObject({
      code: 'invalid_argument',
      detail: { field: 'checksum' },
    });
  });
});

it('a corrupted file blob is refused with model_file_corrupt', async () => {
  const root = tmp();
  const s = new FileBlobStore(root);
  const sum = await s.put(hello);
  const [name] = readdirSync(join(root, '_blobs'));
  writeFileSync(join(root, '_blobs', name!), 'tampered');
  const e = (await s.get(sum).catch((x: unknown) => x)) as KvrError;
  expect(e.code).toBe('model_file_corrupt');
});

it('publishModelFiles + cardModelFiles: a model directory becomes card fields and back', async () => {
  const dir = tmp();
  writeFileSync(join(dir, 'tokenizer.json'), hello);
  writeFileSync(join(dir, 'chat_template.jinja'), '{{ messages }}');
  const files = await readModelDir(dir);
  expect(files.tokenizerConfigJson).toBeNull();
  const store = memBlobStore(new MemDiscoveryHub());
  const fields = await publishModelFiles(store, files);
  expect(fields).toEqual({
    tokenizer: { hf_tokenizer_json: { path: 'tokenizer.json', checksum: HELLO_SUM } },
    chat_template_file: {
      hf_chat_template: {
        path: 'chat_template.jinja',
        checksum: `sha256:${createHash('sha256').update('{{ messages }}').digest('hex')}`,
      },
    },
  });
  // A card (as JSON through discovery) gives the same fields back.
  expect(
    cardModelFiles(JSON.parse(JSON.stringify({ display_name: 'm', ...fields })) as Record<string, unknown>),
  ).toEqual(fields);
  expect(cardModelFiles({ display_name: 'm' })).toBeNull();
  expect(cardModelFiles({ tokenizer: { tiktoken: 'cl100k_base' } })).toEqual({
    tokenizer: { tiktoken: 'cl100k_base' },
  });
  expect(() => cardModelFiles({ tokenizer: { hf_tokenizer_json: { path: 'x' } } })).toThrow(
    /tokenizer.hf_tokenizer_json: expected \{path, checksum\}/,
  );
  await expect(readModelDir(tmp())).rejects.toThrow(/no tokenizer.json/);
});
