/**
 * Embeddings, images and videos against simulated workers in their media modes (sim-worker
 * `media`, the mocker's `--model-type`), registered beside the frontend's embedded chat workers:
 * the official openai client for embeddings (float, base64, the client's default) and images, fetch
 * for videos (unary and SSE). Expected values by hand: unit norms, dimensions, token counts from
 * the cl100k vocabulary package, PNG bytes (signature, IHDR fields, IEND's fixed CRC), MP4 box sizes.
 */
import { inflateSync } from 'node:zlib';
import * as cl100k from 'gpt-tokenizer/encoding/cl100k_base';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InprocHub, MemDiscoveryHub } from '@kvrouter/runtime';
import { SimWorker, type MediaKind } from '@kvrouter/sim-worker';
import type { Frontend } from '../frontend.js';
import { eventually, startFrontend } from '../test-helpers.js';

const memHub = new MemDiscoveryHub();
const inprocHub = new InprocHub();
let fe: Frontend;
let client: OpenAI;
const workers: SimWorker[] = [];
const DIM = 64;
const bpe = (t: string) => cl100k.encode(t).length;

async function mediaWorker(model: string, kind: MediaKind): Promise<void> {
  workers.push(
    await SimWorker.start({
      discovery: memHub.connect(),
      namespace: 'dynamo',
      component: `media-${kind}`,
      modelName: model,
      engine: { numGpuBlocks: 256, blockSize: 16 },
      requestPlane: { kind: 'inproc', hub: inprocHub },
      media: { kinds: [kind], embeddingDim: DIM },
      card: { extra: { tokenizer: { tiktoken: 'cl100k_base' } } },
    }),
  );
  await eventually(() => fe.registry.get(model) !== null, 5000, `model ${model}`);
}

const post = (path: string, body: unknown) =>
  fetch(`${fe.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

const norm = (v: readonly number[]) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

/** CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320) bit by bit: the oracle for PNG chunks. */
function crc32(bytes: Uint8Array): number {
  let c = 0xffffffff;
  for (const b of bytes) {
    c ^= b;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0xedb88320 : c >>> 1;
  }
  return (c ^ 0xffffffff) >>> 0;
}

beforeAll(async () => {
  fe = await startFrontend(['--router-mode', 'kv', '--router-event-threads', '1'], { memHub, inprocHub });
  client = new OpenAI({ baseURL: `${fe.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  await mediaWorker('mock-embed', 'embedding');
  await mediaWorker('mock-image', 'images');
});
afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
  await fe.close(0);
});

describe('embeddings (openai client)', () => {
  it('float: one unit vector of the card dimension per input, equal inputs equal vectors, usage in tokens', async () => {
    const r = await client.embeddings.create({
      model: 'mock-embed',
      input: ['hello world', 'hello world', 'something else'],
      encoding_format: 'float',
    });
    expect(r.object).toBe('list');
    expect(r.model).toBe('mock-embed');
    expect(r.data.map((d) => d.index)).toEqual([0, 1, 2]);
    for (const d of r.data) {
      expect(d.object).toBe('embedding');
      expect(d.embedding).toHaveLength(DIM);
      expect(Math.abs(norm(d.embedding) - 1)).toBeLessThan(1e-12);
    }
    expect(r.data[1]!.embedding).toEqual(r.data[0]!.embedding);
    expect(r.data[2]!.embedding).not.toEqual(r.data[0]!.embedding);
    const tokens = 2 * bpe('hello world') + bpe('something else');
    expect(r.usage).toEqual({ prompt_tokens: tokens, total_tokens: tokens });
    expect((await client.models.list()).data.map((m) => m.id)).toContain('mock-embed');
  });

  it('token-id inputs embed like the text they encode; batches of id arrays count their ids', async () => {
    const text = await client.embeddings.create({
      model: 'mock-embed',
      input: 'hello world',
      encoding_format: 'float',
    });
    const ids = await client.embeddings.create({
      model: 'mock-embed',
      input: cl100k.encode('hello world'),
      encoding_format: 'float',
    });
    expect(ids.data[0]!.embedding).toEqual(text.data[0]!.embedding);
    const batch = await client.embeddings.create({
      model: 'mock-embed',
      input: [
        [1, 2, 3],
        [4, 5],
      ],
      encoding_format: 'float',
    });
    expect(batch.data).toHaveLength(2);
    expect(batch.usage.prompt_tokens).toBe(5);
  });

  it('base64 is little-endian float32 of the float vector; the client default (base64, decoded) agrees', async () => {
    const f = await client.embeddings.create({ model: 'mock-embed', input: 'abc', encoding_format: 'float' });
    const b = await client.embeddings.create({
      model: 'mock-embed',
      input: 'abc',
      encoding_format: 'base64',
    });
    const s = b.data[0]!.embedding as unknown as string;
    expect(typeof s).toBe('string');
    const bytes = Buffer.from(s, 'base64');
    expect(bytes.length).toBe(4 * DIM);
    const decoded = Array.from({ length: DIM }, (_, i) => bytes.readFloatLE(4 * i));
    expect(decoded).toEqual(f.data[0]!.embedding.map((x) => Math.fround(x)));
    const dflt = await client.embeddings.create({ model: 'mock-embed', input: 'abc' });
    expect(dflt.data[0]!.embedding).toEqual(decoded);
  });

  it('dimensions: the first d components divided by their norm', async () => {
    const full = (
      await client.embeddings.create({ model: 'mock-embed', input: 'xyz', encoding_format: 'float' })
    ).data[0]!.embedding;
    const r = await client.embeddings.create({
      model: 'mock-embed',
      input: 'xyz',
      dimensions: 8,
      encoding_format: 'float',
    });
    const head = full.slice(0, 8);
    const n = norm(head);
    const got = r.data[0]!.embedding;
    expect(got).toHaveLength(8);
    got.forEach((x, i) => expect(x).toBeCloseTo(head[i]! / n, 12));
    expect(Math.abs(norm(got) - 1)).toBeLessThan(1e-12);
  });

  it('refusals: unknown model 404, chat model 400 on model, too many dimensions, empty input', async () => {
    const fail = (p: Promise<unknown>) =>
      p.then(
        () => null,
        (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
      );
    const unknown = await fail(client.embeddings.create({ model: 'nope', input: 'x' }));
    expect(unknown).toBeInstanceOf(OpenAI.NotFoundError);
    expect(unknown!.code).toBe('model_not_found');
    const chat = await fail(client.embeddings.create({ model: 'mock-model', input: 'x' }));
    expect(chat).toBeInstanceOf(OpenAI.BadRequestError);
    expect(chat!.param).toBe('model');
    expect(chat!.message).toMatch(/does not serve embeddings.*chat, completions/);
    const dims = await fail(
      client.embeddings.create({ model: 'mock-embed', input: 'x', dimensions: DIM + 1 }),
    );
    expect(dims!.param).toBe('dimensions');
    const empty = await fail(client.embeddings.create({ model: 'mock-embed', input: [] }));
    expect(empty!.param).toBe('input');
    const emptyItem = await fail(client.embeddings.create({ model: 'mock-embed', input: ['a', ''] }));
    expect(emptyItem!.param).toBe('input[1]');
  });
});

describe('media models and the rest of the frontend', () => {
  /** Sum of `dynamo_frontend_requests_total` samples whose labels include every `k="v"` given. */
  const requests = async (labels: Record<string, string>): Promise<number> => {
    const text = await (await fetch(`${fe.url}/metrics`)).text();
    let n = 0;
    for (const line of text.split('\n')) {
      if (!line.startsWith('dynamo_frontend_requests_total{')) continue;
      if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`)))
        n += Number(line.slice(line.lastIndexOf(' ') + 1));
    }
    return n;
  };

  it('an embeddings request counts once in dynamo_frontend_requests_total{endpoint="embeddings"}', async () => {
    const ok = { model: 'mock-embed', endpoint: 'embeddings', status: 'success' };
    const before = await requests(ok);
    await client.embeddings.create({ model: 'mock-embed', input: ['a', 'b'] });
    expect(await requests(ok)).toBe(before + 1);
  });

  it('chat on an embedding-only model: 400 naming model (it does not generate text)', async () => {
    const e = await client.chat.completions
      .create({ model: 'mock-embed', messages: [{ role: 'user', content: 'hi' }] })
      .then(
        () => null,
        (x: unknown) => x as InstanceType<typeof OpenAI.APIError>,
      );
    expect(e).toBeInstanceOf(OpenAI.BadRequestError);
    expect(e!.param).toBe('model');
    expect(e!.message).toMatch(/does not generate text.*embedding/);
  });
});

describe('images (openai client)', () => {
  it('b64_json: n valid PNGs of the asked size (signature, IHDR, IDAT rows, IEND with their CRCs)', async () => {
    const r = await client.images.generate({
      model: 'mock-image',
      prompt: 'a red square',
      n: 2,
      size: '4x3' as '256x256',
      response_format: 'b64_json',
    });
    expect(r.data).toHaveLength(2);
    for (const img of r.data!) {
      const png = Buffer.from(img.b64_json!, 'base64');
      expect([...png.subarray(0, 8)]).toEqual([137, 80, 78, 71, 13, 10, 26, 10]);
      // IHDR: length 13, width 4, height 3, bit depth 8, colour type 2 (RGB), compression, filter, interlace 0.
      expect(png.readUInt32BE(8)).toBe(13);
      expect(png.toString('latin1', 12, 16)).toBe('IHDR');
      expect([png.readUInt32BE(16), png.readUInt32BE(20), ...png.subarray(24, 29)]).toEqual([
        4, 3, 8, 2, 0, 0, 0,
      ]);
      expect(png.readUInt32BE(29)).toBe(crc32(png.subarray(12, 29)));
      const idatLen = png.readUInt32BE(33);
      expect(png.toString('latin1', 37, 41)).toBe('IDAT');
      const idat = png.subarray(41, 41 + idatLen);
      expect(png.readUInt32BE(41 + idatLen)).toBe(crc32(png.subarray(37, 41 + idatLen)));
      // 3 rows of (filter byte + 4 RGB pixels).
      const raw = inflateSync(idat);
      expect(raw.length).toBe(3 * (1 + 3 * 4));
      expect([raw[0], raw[13], raw[26]]).toEqual([0, 0, 0]);
      // IEND: empty, CRC-32("IEND") = 0xAE426082.
      expect([...png.subarray(png.length - 12)]).toEqual([
        0, 0, 0, 0, 73, 69, 78, 68, 0xae, 0x42, 0x60, 0x82,
      ]);
      expect(png.length).toBe(8 + 25 + 12 + idatLen + 12);
    }
  });

  it('url (the default): a data URL of the PNG; a model without images is 404', async () => {
    const r = await client.images.generate({ model: 'mock-image', prompt: 'x', size: '2x2' as '256x256' });
    expect(r.data![0]!.url!.startsWith('data:image/png;base64,iVBORw0KGgo')).toBe(true);
    await expect(client.images.generate({ model: 'mock-embed', prompt: 'x' })).rejects.toBeInstanceOf(
      OpenAI.NotFoundError,
    );
    const bad = await client.images
      .generate({ model: 'mock-image', prompt: 'x', size: '0x5' as '256x256' })
      .then(
        () => null,
        (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
      );
    expect(bad!.status).toBe(400);
    expect(bad!.param).toBe('size');
  });
});

describe('videos (fetch)', () => {
  it('501 while no worker of the fleet declares videos; 404 for a model without them once one does', async () => {
    const none = await post('/v1/videos/generations', { model: 'mock-video', prompt: 'x' });
    expect(none.status).toBe(501);
    expect(((await none.json()) as { error: { code: string } }).error.code).toBe('not_implemented');
    await mediaWorker('mock-video', 'videos');
    const wrong = await post('/v1/videos/generations', { model: 'mock-embed', prompt: 'x' });
    expect(wrong.status).toBe(404);
  });

  it('unary: an MP4-like file (ftyp isom, then mdat with one 16-byte record per frame)', async () => {
    const r = await post('/v1/videos/generations', {
      model: 'mock-video',
      prompt: 'a rocket',
      seconds: 2,
      size: '64x48',
      response_format: 'b64_json',
      nvext: { fps: 8 },
    });
    expect(r.status).toBe(200);
    const v = (await r.json()) as {
      object: string;
      status: string;
      progress: number;
      data: { output_format: string; b64_json: string; fps: number }[];
    };
    expect([v.object, v.status, v.progress]).toEqual(['video', 'completed', 100]);
    expect(v.data[0]!.output_format).toBe('mp4');
    expect(v.data[0]!.fps).toBe(8);
    const mp4 = Buffer.from(v.data[0]!.b64_json, 'base64');
    // ftyp: size 28 = 8 header + major brand + minor version + 3 compatible brands.
    expect(mp4.readUInt32BE(0)).toBe(28);
    expect(mp4.toString('latin1', 4, 12)).toBe('ftypisom');
    // mdat: 2 s × 8 fps = 16 frames × 16 bytes + 8 header.
    expect(mp4.readUInt32BE(28)).toBe(8 + 16 * 16);
    expect(mp4.toString('latin1', 32, 36)).toBe('mdat');
    expect(mp4.length).toBe(28 + 8 + 16 * 16);
  });

  it('stream: in_progress chunks with progress, one completed chunk with the video, then [DONE]', async () => {
    const r = await post('/v1/videos/generations/stream', {
      model: 'mock-video',
      prompt: 'waves',
      size: '8x8',
    });
    expect(r.headers.get('content-type')).toMatch(/text\/event-stream/);
    const lines = (await r.text())
      .split('\n\n')
      .filter((l) => l.startsWith('data: '))
      .map((l) => l.slice(6));
    expect(lines[lines.length - 1]).toBe('[DONE]');
    const chunks = lines
      .slice(0, -1)
      .map((l) => JSON.parse(l) as { status: string; progress: number; data: { url?: string }[] });
    expect(chunks.map((c) => c.progress)).toEqual([0, 25, 50, 75, 100]);
    expect(chunks.map((c) => c.status)).toEqual([
      'in_progress',
      'in_progress',
      'in_progress',
      'in_progress',
      'completed',
    ]);
    expect(chunks[4]!.data[0]!.url!.startsWith('data:video/mp4;base64,')).toBe(true);
    // Default 4 s at 16 fps: 64 frames.
    const mp4 = Buffer.from(chunks[4]!.data[0]!.url!.split(',')[1]!, 'base64');
    expect(mp4.length).toBe(28 + 8 + 64 * 16);
  });
});
