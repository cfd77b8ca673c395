/**
 * The SSE responses in progress, so that graceful shutdown can end the ones still running when its
 * grace period is over with an error event (`data: {"error": …}` then `data: [DONE]`) instead of
 * a bare connection reset (issue 17); and every other in-flight request, which then gets a 503
 * `shutting_down` JSON error in its API's shape instead of a silent close.
 */
import type { ServerResponse } from 'node:http';
import { KvrError } from '@kvrouter/protocols';
import { toOpenAiError } from '../errors.js';

interface OpenStream {
  res: ServerResponse;
  /** Stops the request's generation (its handler then ends quietly). */
  abort: () => void;
  /** The stream's last bytes for an error (default: OpenAI's error event and `[DONE]`). */
  errorFrame?: ErrorFrame;
}

/** A status and JSON body for `err` in an API's error shape (what a non-streaming answer cut at shutdown carries). */
export type PlainError = (err: unknown) => { status: number; text: string };

/** OpenAI's error body (every route but Anthropic's, whose shape anthropic/errors.ts makes). */
export const openAiPlainError: PlainError = (err) => {
  const { status, body } = toOpenAiError(err);
  return { status, text: JSON.stringify(body) };
};

/** An API's error event for `err` (e.g. Anthropic's `event: error`). */
export type ErrorFrame = (err: unknown) => string;

/** Longest wait for the error events to reach the sockets before the connections are closed. */
const FLUSH_MAX_MS = 1000;

/** Where a handler registers its SSE response (and how to stop its generation). */
export interface StreamRegistry {
  /** Returns the unregister, called when the response ends. */
  add(res: ServerResponse, abort: () => void, errorFrame?: ErrorFrame): () => void;
  /**
   * Every in-flight request (streaming or not): one still unanswered when the grace period ends gets
   * a 503 `shutting_down` error response in its API's shape instead of a silent close. Unregisters
   * itself when the response closes.
   */
  track?(res: ServerResponse, plain?: PlainError): void;
}

export class OpenStreams implements StreamRegistry {
  private readonly open = new Set<OpenStream>();
  /** Every in-flight response and its API's error shape (streams are also in `open`). */
  private readonly requests = new Map<ServerResponse, PlainError>();

  track(res: ServerResponse, plain: PlainError = openAiPlainError): void {
    this.requests.set(res, plain);
    res.once('close', () => this.requests.delete(res));
  }

  /**
   * Registers a stream whose headers are (about to be) sent; returns its unregister. With `max` > 0
   * (`--http-max-streams`) and that many streams open, throws 503 `too_many_streams` (before any
   * byte of the stream is written, so the handler answers it as a plain error).
   */
  add(res: ServerResponse, abort: () => void, errorFrame?: ErrorFrame, max = 0): () => void {
    if (max > 0 && this.open.size >= max)
      throw new KvrError(
        'too_many_streams',
        `stream: ${this.open.size} streaming responses are open, the limit is ${max} (--http-max-streams); retry later`,
        503,
        { field: 'stream', limit: max },
      );
    const s: OpenStream = { res, abort, ...(errorFrame ? { errorFrame } : {}) };
    this.open.add(s);
    return () => void this.open.delete(s);
  }

  /** Open streams. */
  get size(): number {
    return this.open.size;
  }

  /** In-flight requests tracked (streams included). */
  get requestCount(): number {
    return this.requests.size;
  }

  /**
   * Ends every open stream with `err` as an SSE error event and `[DONE]`, stops their generation,
   * answers every other unanswered request with `err` as a JSON error (non-streaming requests; their
   * generation stops when the frontend releases its clients right after), and resolves once those
   * bytes are handed to the sockets (at most `FLUSH_MAX_MS`).
   */
  cut(
    err: unknown = new KvrError(
      'shutting_down',
      'the server is shutting down: the request was cut at the end of the graceful shutdown period',
      503,
    ),
  ): Promise<void> {
    const { status, body } = toOpenAiError(err);
    const event = `data: ${JSON.stringify(body)}\n\ndata: [DONE]\n\n`;
    const flushed: Promise<void>[] = [];
    for (const s of [...this.open]) {
      this.open.delete(s);
      const res = s.res;
      if (res.destroyed || res.writableEnded) continue;
      // No chunk yet: no stream started either, so a plain error response.
      const plain = !res.headersSent;
      if (plain) res.writeHead(status, { 'content-type': 'application/json' });
      flushed.push(
        new Promise<void>((r) => {
          res.once('finish', r);
          res.once('close', r);
        }),
      );
      res.end(plain ? JSON.stringify(body) : s.errorFrame ? s.errorFrame(err) : event);
      s.abort();
    }
    for (const [res, plain] of [...this.requests]) {
      this.requests.delete(res);
      if (res.destroyed || res.writableEnded) continue;
      flushed.push(
        new Promise<void>((r) => {
          res.once('finish', r);
          res.once('close', r);
        }),
      );
      // A response whose head went out already (a body being written) can only be ended.
      if (res.headersSent) {
        res.end();
        continue;
      }
      const e = plain(err);
      res.writeHead(e.status, {
        'content-type': 'application/json; charset=utf-8',
        'content-length': Buffer.byteLength(e.text),
        'retry-after': '1',
        connection: 'close',
      });
      res.end(e.text);
    }
    if (flushed.length === 0) return Promise.resolve();
    let timer: NodeJS.Timeout | undefined;
    return Promise.race([
      Promise.all(flushed).then(() => undefined),
      new Promise<void>((r) => (timer = setTimeout(r, FLUSH_MAX_MS))),
    ]).finally(() => clearTimeout(timer));
  }
}
