/**
 * `POST /v1/embeddings` (OpenAI shape): `input` as a string, an array of strings, token ids, or an
 * array of token-id arrays (at most 2048 inputs); text is tokenized with the model's tokenizer and
 * every input goes to one embedding worker in one `embed` call. `encoding_format` `float` (default)
 * or `base64` (little-endian float32, as OpenAI); `dimensions` keeps the first `dimensions`
 * components and divides them by their norm (Matryoshka-style truncation, done here so every worker
 * supports it; more than the card's `embedding_dim` is a 400). `usage.prompt_tokens` counts the
 * tokens embedded.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { EMBED_ENDPOINT, KvrError, type EmbedItem, type EmbedRequest } from '@kvrouter/protocols';
import { badRequest } from '../errors.js';
import type { AppDeps } from '../http/deps.js';
import { abortOnClose, parseBody, sendError, sendJson } from '../http/util.js';
import { isObj } from '../openai/validate.js';
import { MediaRequest, type MediaPicker } from './pick.js';

const MAX_INPUTS = 2048;
const U32_MAX = 0xffffffff;

function tokenIds(v: unknown[], field: string): number[] {
  if (v.length === 0) throw badRequest(field, `${field}: must not be empty`);
  return v.map((x, i) => {
    const n = typeof x === 'bigint' && x >= 0n && x <= BigInt(U32_MAX) ? Number(x) : x;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 0 || n > U32_MAX)
      throw badRequest(`${field}[${i}]`, `${field}[${i}]: expected a token id (integer in [0, ${U32_MAX}])`);
    return n;
  });
}

/** The inputs as text or token ids, each with the field name errors use. */
function inputsOf(v: unknown): { text: string | null; ids: number[] | null; field: string }[] {
  const one = (x: unknown, field: string) => {
    if (typeof x === 'string') {
      if (x.length === 0) throw badRequest(field, `${field}: must not be empty`);
      return { text: x, ids: null, field };
    }
    if (Array.isArray(x)) return { text: null, ids: tokenIds(x, field), field };
    throw badRequest(field, `${field}: expected a string or an array of token ids`);
  };
  if (v === undefined || v === null) throw badRequest('input', 'input: required');
  if (typeof v === 'string') return [one(v, 'input')];
  if (!Array.isArray(v))
    throw badRequest(
      'input',
      'input: expected a string, an array of strings, token ids or arrays of token ids',
    );
  if (v.length === 0) throw badRequest('input', 'input: must not be empty');
  // [1, 2, 3] is one input of token ids; ["a", "b"] and [[1], [2]] are batches.
  if (typeof v[0] === 'number' || typeof v[0] === 'bigint') return [one(v, 'input')];
  if (v.length > MAX_INPUTS)
    throw badRequest('input', `input: at most ${MAX_INPUTS} inputs, got ${v.length}`);
  return v.map((x, i) => one(x, `input[${i}]`));
}

/** The first `d` components divided by their Euclidean norm. */
function truncateNormalized(v: readonly number[], d: number): number[] {
  const out = v.slice(0, d);
  let sq = 0;
  for (const x of out) sq += x * x;
  const n = Math.sqrt(sq);
  return n > 0 ? out.map((x) => x / n) : out;
}

/** Little-endian float32 bytes, base64 (what OpenAI returns for `encoding_format: base64`). */
function float32Base64(v: readonly number[]): string {
  const f = Float32Array.from(v);
  const b = Buffer.from(f.buffer, f.byteOffset, f.byteLength);
  if (new Uint8Array(new Uint16Array([1]).buffer)[0] !== 1) b.swap32();
  return b.toString('base64');
}

export function embeddingsHandler(d: AppDeps, picker: MediaPicker) {
  const svc = d.service;
  return async (req: IncomingMessage, res: ServerResponse, bodyText: unknown): Promise<void> => {
    const ac = abortOnClose(res);
    const mr = new MediaRequest(svc, 'embeddings', false);
    let named: unknown;
    try {
      const b = parseBody(bodyText);
      if (!isObj(b)) throw badRequest('body', 'request body: expected a JSON object');
      named = b.model;
      if (typeof b.model !== 'string' || b.model.length === 0)
        throw badRequest('model', 'model: required (a non-empty string)');
      const model = b.model;
      const inputs = inputsOf(b.input);
      const format = b.encoding_format ?? 'float';
      if (format !== 'float' && format !== 'base64')
        throw badRequest(
          'encoding_format',
          `encoding_format: expected float or base64, got ${JSON.stringify(format)}`,
        );
      let dims: number | null = null;
      if (b.dimensions !== undefined && b.dimensions !== null) {
        const x = b.dimensions;
        if (typeof x !== 'number' || !Number.isInteger(x) || x < 1)
          throw badRequest('dimensions', `dimensions: expected a positive integer, got ${JSON.stringify(x)}`);
        dims = x;
      }
      if (b.user !== undefined && b.user !== null && typeof b.user !== 'string')
        throw badRequest('user', 'user: expected a string');
      const t = picker.pick(model, 'embedding');
      mr.started(t, model);
      const cardDim = t.card.embedding_dim ?? null;
      if (dims !== null && cardDim !== null && dims > cardDim)
        throw badRequest('dimensions', `dimensions: ${dims} is more than the model's ${cardDim}`);
      const encoder = svc.o.tokenizers ? (await svc.o.tokenizers.for(model)).encoder : svc.o.encoder;
      const ids: number[][] = [];
      for (const x of inputs) {
        const seq = x.ids ?? Array.from(await encoder.encode(x.text!));
        if (seq.length === 0) throw badRequest(x.field, `${x.field}: empty after tokenization`);
        if (seq.length > t.set.contextLength)
          throw badRequest(
            x.field,
            `${x.field}: ${seq.length} tokens is more than the model's maximum context length of ${t.set.contextLength}`,
          );
        ids.push(seq);
      }
      const payload: EmbedRequest = { request_id: randomUUID(), model, inputs: ids };
      const item = await svc.o.client.unary<EmbedItem>(t.transport, EMBED_ENDPOINT, payload, {
        signal: ac.signal,
      });
      if (!Array.isArray(item?.embeddings) || item.embeddings.length !== ids.length)
        throw new KvrError(
          'engine_error',
          `embedding worker returned ${Array.isArray(item?.embeddings) ? item.embeddings.length : 'no'} vectors for ${ids.length} inputs`,
          502,
        );
      if (dims !== null && cardDim === null && item.embeddings.some((v) => dims > v.length))
        throw badRequest(
          'dimensions',
          `dimensions: ${dims} is more than the model's ${item.embeddings[0]!.length}`,
        );
      const data = item.embeddings.map((v, index) => {
        const vec = dims !== null ? truncateNormalized(v, dims) : v;
        return { object: 'embedding', index, embedding: format === 'base64' ? float32Base64(vec) : vec };
      });
      const prompt = ids.reduce((n, s) => n + s.length, 0);
      sendJson(
        res,
        200,
        JSON.stringify({
          object: 'list',
          data,
          model,
          usage: { prompt_tokens: prompt, total_tokens: prompt },
        }),
      );
      mr.ok();
    } catch (e) {
      mr.failed(named, e, ac.signal.aborted);
      if (ac.signal.aborted) return;
      sendError(res, e);
    }
  };
}
