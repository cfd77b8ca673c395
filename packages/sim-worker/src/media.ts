/**
 * The simulated worker's non-generative modes (the mocker's `--model-type embedding|images|videos`):
 * deterministic payloads served on the media endpoints of `@kvrouter/protocols` (`embed`, `images`,
 * `videos`) beside `generate`.
 *
 * - Embeddings: per input, a unit vector of `embeddingDim` floats drawn from a generator seeded
 *   with the FNV-1a hash of the input's token ids (same ids → same vector, whatever the batch).
 * - Images: `n` valid PNG files of the asked size (8-bit RGB, one colour from the prompt's hash and
 *   the image index): signature, IHDR, one zlib IDAT, IEND, each chunk with its CRC-32.
 * - Videos: an MP4-like file (an `ftyp` box, brand `isom`, then an `mdat` box holding one 16-byte
 *   record per frame), after progress items at 0, 25, 50 and 75 %.
 */
import { crc32, deflateSync } from 'node:zlib';
import {
  EMBED_ENDPOINT,
  IMAGES_ENDPOINT,
  KvrError,
  VIDEOS_ENDPOINT,
  parseSize,
  type EmbedItem,
  type EmbedRequest,
  type ImagesItem,
  type ImagesRequest,
  type VideosItem,
  type VideosRequest,
} from '@kvrouter/protocols';
import type { HandlerContext, RequestServer } from '@kvrouter/runtime';

export type MediaKind = 'embedding' | 'images' | 'videos';

export interface SimMediaOptions {
  /** What the worker does besides (or instead of) text generation; it is also the card's `model_type`. */
  kinds: readonly MediaKind[];
  /** Length of every embedding vector (card `embedding_dim`); default 384. */
  embeddingDim?: number;
}

export const DEFAULT_EMBEDDING_DIM = 384;
/** Largest image or video side the simulated worker draws, pixels. */
const MAX_SIDE = 4096;

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/** FNV-1a (32 bit) over the little-endian bytes of each u32. */
function fnv1a(ids: ArrayLike<number>): number {
  let h = FNV_OFFSET;
  for (let i = 0; i < ids.length; i++) {
    let x = ids[i]! >>> 0;
    for (let b = 0; b < 4; b++) {
      h = Math.imul(h ^ (x & 0xff), FNV_PRIME) >>> 0;
      x >>>= 8;
    }
  }
  return h;
}

const utf8 = new TextEncoder();
const textHash = (s: string): number => fnv1a(utf8.encode(s));

/** mulberry32: a small seeded generator of floats in [0, 1). */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The unit vector of one input: components uniform in [-1, 1), then divided by the Euclidean norm. */
export function embedVector(ids: ArrayLike<number>, dim: number): number[] {
  const next = mulberry32(fnv1a(ids));
  const v = new Array<number>(dim);
  let sq = 0;
  for (let i = 0; i < dim; i++) {
    const x = next() * 2 - 1;
    v[i] = x;
    sq += x * x;
  }
  const norm = Math.sqrt(sq) || 1;
  for (let i = 0; i < dim; i++) v[i]! /= norm;
  return v;
}

function chunk(type: string, data: Uint8Array): Buffer {
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write(type, 4, 'latin1');
  out.set(data, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + data.length)), 8 + data.length);
  return out;
}

export const PNG_SIGNATURE = Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** A PNG of `w`×`h` pixels, 8-bit RGB, every pixel `rgb`. */
function solidPng(w: number, h: number, rgb: readonly [number, number, number]): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // colour type RGB
  // compression 0, filter 0, interlace 0
  const row = Buffer.alloc(1 + 3 * w); // filter byte 0 (None), then the pixels
  for (let x = 0; x < w; x++) row.set(rgb, 1 + 3 * x);
  const raw = Buffer.alloc(row.length * h);
  for (let y = 0; y < h; y++) row.copy(raw, y * row.length);
  return Buffer.concat([
    PNG_SIGNATURE,
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(raw)),
    chunk('IEND', new Uint8Array(0)),
  ]);
}

function box(type: string, body: Uint8Array): Buffer {
  const out = Buffer.alloc(8 + body.length);
  out.writeUInt32BE(out.length, 0);
  out.write(type, 4, 'latin1');
  out.set(body, 8);
  return out;
}

/** An MP4-like file: `ftyp` (major brand isom, minor 0x200, compatible isom iso2 mp41), then `mdat`. */
function mp4Like(frames: number, seed: number): Buffer {
  const ftyp = Buffer.alloc(20);
  ftyp.write('isom', 0, 'latin1');
  ftyp.writeUInt32BE(0x200, 4);
  ftyp.write('isomiso2mp41', 8, 'latin1');
  const next = mulberry32(seed);
  const mdat = Buffer.alloc(16 * frames);
  for (let i = 0; i < mdat.length; i++) mdat[i] = Math.floor(next() * 256);
  return Buffer.concat([box('ftyp', ftyp), box('mdat', mdat)]);
}

const bad = (field: string, reason: string): KvrError =>
  new KvrError('invalid_request', `${field}: ${reason}`, 400, { field });

function sizeOf(s: unknown, field: string): [number, number] {
  const wh = typeof s === 'string' ? parseSize(s, MAX_SIDE) : null;
  if (!wh) throw bad(field, `expected WxH with sides 1..${MAX_SIDE}, got ${JSON.stringify(s)}`);
  return wh;
}

/** Serves the endpoints of `o.kinds` on `server`. */
export function serveMedia(server: RequestServer, o: SimMediaOptions): void {
  const dim = o.embeddingDim ?? DEFAULT_EMBEDDING_DIM;
  if (o.kinds.includes('embedding'))
    server.serve<EmbedRequest, EmbedItem>(EMBED_ENDPOINT, (p) => {
      if (!Array.isArray(p?.inputs) || p.inputs.length === 0)
        return Promise.reject(bad('inputs', 'expected a non-empty array of token-id arrays'));
      let tokens = 0;
      const embeddings = p.inputs.map((ids, i) => {
        if (!Array.isArray(ids) && !ArrayBuffer.isView(ids))
          throw bad(`inputs[${i}]`, 'expected an array of token ids');
        tokens += ids.length;
        return embedVector(ids, dim);
      });
      return Promise.resolve({ embeddings, prompt_tokens: tokens });
    });
  if (o.kinds.includes('images'))
    server.serve<ImagesRequest, ImagesItem>(IMAGES_ENDPOINT, (p) => {
      const [w, h] = sizeOf(p?.size, 'size');
      const n = typeof p.n === 'number' && Number.isInteger(p.n) && p.n >= 1 && p.n <= 16 ? p.n : 1;
      const base = textHash(String(p.prompt ?? '')) ^ ((p.seed ?? 0) >>> 0);
      const data = Array.from({ length: n }, (_, i) => {
        const c = mulberry32(base + i);
        const rgb = [0, 0, 0].map(() => Math.floor(c() * 256)) as [number, number, number];
        return { b64_json: solidPng(w, h, rgb).toString('base64') };
      });
      return Promise.resolve({ data });
    });
  if (o.kinds.includes('videos'))
    server.serve<VideosRequest, VideosItem>(VIDEOS_ENDPOINT, (p, ctx) => videoStream(p, ctx));
}

async function* videoStream(p: VideosRequest, ctx: HandlerContext): AsyncGenerator<VideosItem> {
  sizeOf(p?.size, 'size');
  const seconds = typeof p.seconds === 'number' && p.seconds > 0 && p.seconds <= 60 ? p.seconds : 4;
  const fps = typeof p.fps === 'number' && Number.isInteger(p.fps) && p.fps > 0 && p.fps <= 120 ? p.fps : 16;
  for (const progress of [0, 25, 50, 75]) {
    if (ctx.signal.aborted) return;
    yield { progress };
    await new Promise((r) => setImmediate(r));
  }
  const frames = Math.round(seconds * fps);
  const file = mp4Like(frames, textHash(String(p.prompt ?? '')) ^ ((p.seed ?? 0) >>> 0));
  yield { progress: 100, video: { b64_json: file.toString('base64'), output_format: 'mp4', fps, frames } };
}
