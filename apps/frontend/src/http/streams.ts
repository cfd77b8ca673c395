/**
 * The SSE responses in progress, so that graceful shutdown can end the ones still running when its
 * grace period is over with an error event (`data: {"error": …}` then `data: [DONE]`) instead of
 * a bare connection reset (issue 17).
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

/** An API's error event for `err` (e.g. Anthropic's `event: error`). */
export type ErrorFrame = (err: unknown) => string;

/** Longest wait for the error events to reach the sockets before the connections are closed. */
const FLUSH_MAX_MS = 1000;

/** Where a handler registers its SSE response (and how to stop its generation). */
export interface StreamRegistry {
  /** Returns the unregister, called when the response ends. */
  add(res: ServerResponse, abort: () => void, errorFrame?: ErrorFrame): () => void;
}

export class OpenStreams implements StreamRegistry {
  private readonly open = new Set<OpenStream>();

  /** Registers a stream whose headers are (about to be) sent; returns its unregister. */
  add(res: ServerResponse, abort: () => void, errorFrame?: ErrorFrame): () => void {
    const s: OpenStream = { res, abort, ...(errorFrame ? { errorFrame } : {}) };
    this.open.add(s);
    return () => void this.open.delete(s);
  }

  get size(): number {
    return this.open.size;
  }

  /**
   * Ends every open stream with `err` as an SSE error event and `[DONE]`, stops their generation,
   * and resolves once those bytes are handed to the sockets (at most `FLUSH_MAX_MS`).
   */
  cut(
    err: unknown = new KvrError(
      'shutting_down',
      'the server is shutting down: the stream was cut at the end of the graceful shutdown period',
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
    if (flushed.length === 0) return Promise.resolve();
    let timer: NodeJS.Timeout | undefined;
    return Promise.race([
      Promise.all(flushed).then(() => undefined),
      new Promise<void>((r) => (timer = setTimeout(r, FLUSH_MAX_MS))),
    ]).finally(() => clearTimeout(timer));
  }
}
