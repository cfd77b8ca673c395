/**
 * `POST /v1/images/generations` (OpenAI shape) and `POST /v1/videos/generations[/stream]` (Dynamo's
 * `NvCreateVideoRequest` / `NvVideosResponse`), forwarded to a worker whose card declares `images`
 * / `videos`. There is no object store: `response_format: url` (the default of both APIs) answers a
 * `data:` URL holding the file, `b64_json` the base64 file.
 *
 * Video streaming (`/stream`, or `stream: true`): SSE `data:` events, each an `NvVideosResponse`
 * chunk — `status: "in_progress"` with the worker's `progress` (0–100) and no data, then one
 * `status: "completed"`, `progress: 100` chunk with the video — and `data: [DONE]` last (Dynamo
 * streams `NvVideosResponse` items; its docs do not fix the SSE framing, so chat's is used).
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  IMAGES_ENDPOINT,
  KvrError,
  VIDEOS_ENDPOINT,
  parseSize,
  type ImagesItem,
  type ImagesRequest,
  type VideosItem,
  type VideosRequest,
} from '@kvrouter/protocols';
import { badRequest } from '../errors.js';
import type { AppDeps } from '../http/deps.js';
import { SseWriter } from '../http/sse.js';
import { abortOnClose, endWithError, parseBody, sendError, sendJson } from '../http/util.js';
import { isObj } from '../openai/validate.js';
import { MediaRequest, type MediaPicker } from './pick.js';

type Obj = Record<string, unknown>;
type Handler = (req: IncomingMessage, res: ServerResponse, bodyText: unknown) => Promise<void>;

const MAX_SIDE = 4096;

function common(
  bodyText: unknown,
  named: { model?: unknown },
): { b: Obj; model: string; prompt: string; format: 'url' | 'b64_json' } {
  const b = parseBody(bodyText);
  if (!isObj(b)) throw badRequest('body', 'request body: expected a JSON object');
  named.model = b.model;
  if (typeof b.model !== 'string' || b.model.length === 0)
    throw badRequest('model', 'model: required (a non-empty string)');
  if (typeof b.prompt !== 'string' || b.prompt.length === 0)
    throw badRequest('prompt', 'prompt: required (a non-empty string)');
  const format = b.response_format ?? 'url';
  if (format !== 'url' && format !== 'b64_json')
    throw badRequest(
      'response_format',
      `response_format: expected url or b64_json, got ${JSON.stringify(format)}`,
    );
  return { b, model: b.model, prompt: b.prompt, format };
}

function size(v: unknown, dflt: string): string {
  const s = v ?? dflt;
  if (typeof s !== 'string' || parseSize(s, MAX_SIDE) === null)
    throw badRequest(
      'size',
      `size: expected WxH with sides 1..${MAX_SIDE} (e.g. 1024x1024), got ${JSON.stringify(s)}`,
    );
  return s;
}

function intIn(v: unknown, field: string, lo: number, hi: number, dflt: number): number {
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < lo || v > hi)
    throw badRequest(
      field,
      `${field}: expected an integer between ${lo} and ${hi}, got ${JSON.stringify(v)}`,
    );
  return v;
}

export function imagesHandler(d: AppDeps, picker: MediaPicker): Handler {
  return async (_req, res, bodyText) => {
    const ac = abortOnClose(res);
    const mr = new MediaRequest(d.service, 'images', false);
    const named: { model?: unknown } = {};
    try {
      const { b, model, prompt, format } = common(bodyText, named);
      const n = intIn(b.n, 'n', 1, 10, 1);
      const sz = size(b.size, '1024x1024');
      if (b.output_format !== undefined && b.output_format !== null && b.output_format !== 'png')
        throw badRequest(
          'output_format',
          `output_format: only png is generated, got ${JSON.stringify(b.output_format)}`,
        );
      const t = picker.pick(model, 'images');
      mr.started(t, model);
      const payload: ImagesRequest = { request_id: randomUUID(), model, prompt, n, size: sz };
      const item = await d.service.o.client.unary<ImagesItem>(t.transport, IMAGES_ENDPOINT, payload, {
        signal: ac.signal,
        timeoutMs: 60_000,
      });
      if (!Array.isArray(item?.data))
        throw new KvrError('engine_error', 'image worker returned no data', 502);
      const data = item.data.map((x) =>
        format === 'b64_json' ? { b64_json: x.b64_json } : { url: `data:image/png;base64,${x.b64_json}` },
      );
      sendJson(res, 200, JSON.stringify({ created: Math.floor(Date.now() / 1000), data }));
      mr.ok();
    } catch (e) {
      mr.failed(named.model, e, ac.signal.aborted);
      if (!ac.signal.aborted) sendError(res, e);
    }
  };
}

/** `/v1/videos/generations` (`streamPath` false: unless `stream: true`) and its `/stream` twin. */
export function videosHandler(d: AppDeps, picker: MediaPicker, streamPath: boolean): Handler {
  return async (_req, res, bodyText) => {
    const ac = abortOnClose(res);
    let unregister: (() => void) | null = null;
    const mr = new MediaRequest(d.service, 'videos', streamPath);
    const named: { model?: unknown } = {};
    try {
      const { b, model, prompt, format } = common(bodyText, named);
      if (b.stream !== undefined && b.stream !== null && typeof b.stream !== 'boolean')
        throw badRequest('stream', 'stream: expected a boolean');
      const stream = streamPath || b.stream === true;
      const sz = size(b.size, '832x480');
      const seconds = intIn(b.seconds, 'seconds', 1, 60, 4);
      if (b.output_format !== undefined && b.output_format !== null && b.output_format !== 'mp4')
        throw badRequest(
          'output_format',
          `output_format: only mp4 is generated, got ${JSON.stringify(b.output_format)}`,
        );
      const nv = isObj(b.nvext) ? b.nvext : {};
      const fps = intIn(nv.fps, 'nvext.fps', 1, 120, 16);
      const t = picker.pick(model, 'videos');
      mr.started(t, model, stream);
      const payload: VideosRequest = { request_id: randomUUID(), model, prompt, size: sz, seconds, fps };
      const id = `video_${randomUUID().replace(/-/g, '')}`;
      const created = Math.floor(Date.now() / 1000);
      const t0 = performance.now();
      const chunk = (item: VideosItem): Obj => {
        const v = item.video;
        return {
          id,
          object: 'video',
          model,
          status: v ? 'completed' : 'in_progress',
          progress: item.progress,
          created,
          data: v
            ? [
                {
                  output_format: v.output_format,
                  fps: v.fps,
                  ...(format === 'b64_json'
                    ? { b64_json: v.b64_json }
                    : { url: `data:video/mp4;base64,${v.b64_json}` }),
                },
              ]
            : [],
          ...(v ? { inference_time_s: Math.round(performance.now() - t0) / 1000 } : {}),
        };
      };
      const items = d.service.o.client.stream<VideosItem>(t.transport, VIDEOS_ENDPOINT, payload, {
        signal: ac.signal,
      });
      // The first item before any byte is written: worker failures keep their HTTP status.
      let next = await items.next();
      const sse = stream ? new SseWriter(res) : null;
      if (sse) unregister = d.streams?.add(res, () => ac.abort()) ?? null;
      let last: Obj | null = null;
      for (; !next.done; next = await items.next()) {
        last = chunk(next.value);
        if (sse) await sse.send(JSON.stringify(last));
      }
      if (!last || last.status !== 'completed')
        throw new KvrError('engine_error', 'the video worker ended without a video', 502);
      if (sse) sse.done();
      else sendJson(res, 200, JSON.stringify(last));
      mr.ok();
    } catch (e) {
      mr.failed(named.model, e, ac.signal.aborted);
      if (ac.signal.aborted) return;
      endWithError(res, e);
    } finally {
      unregister?.();
    }
  };
}
