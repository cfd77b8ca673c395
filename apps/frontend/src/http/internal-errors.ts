/**
 * No silent 500s: every request that fails with an internal error (HTTP status 500: an unexpected
 * exception, or a `KvrError` whose status is 500) is logged once, as ERROR, with its request id,
 * route and stack, and counted in `dynamo_frontend_internal_errors_total{route}`. The response
 * carries the same id in `x-request-id` so a user can quote it.
 *
 * The app registers each response with its route (`watchResponse`); `sendError` and the
 * mid-stream error path call `reportInternal`. Errors that are deliberate answers (4xx, 503 busy,
 * 502 engine error, 499 cancelled) are not internal and are not logged here.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { toOpenAiError } from '../errors.js';

export interface InternalErrorSink {
  error(msg: string): void;
  /** Counts one internal error on `route`. */
  count(route: string): void;
}

interface Watched {
  route: string;
  requestId: string | null;
  sink: InternalErrorSink;
  /** Reported already (a request's error reaching two layers is logged once). */
  done: boolean;
}

const watched = new WeakMap<ServerResponse, Watched>();

/** Registers a response: its route label (a configured path or `other`) and the client's `x-request-id`. */
export function watchResponse(
  req: IncomingMessage,
  res: ServerResponse,
  route: string,
  sink: InternalErrorSink,
): void {
  const h = req.headers['x-request-id'];
  watched.set(res, {
    route,
    requestId: typeof h === 'string' && h.length > 0 ? h.slice(0, 128) : null,
    sink,
    done: false,
  });
}

/** Whether `err` answers with 500 (what the client sees as "internal server error"). */
function isInternal(err: unknown): boolean {
  return toOpenAiError(err).status === 500;
}

/**
 * Logs and counts `err` when it is internal and not reported yet; returns the request id it was
 * logged with (null: not internal, or the response is not watched).
 */
export function reportInternal(res: ServerResponse, err: unknown): string | null {
  const w = watched.get(res);
  if (!w || !isInternal(err)) return null;
  const id = (w.requestId ??= randomUUID());
  if (w.done) return id;
  w.done = true;
  const stack = err instanceof Error ? (err.stack ?? `${err.name}: ${err.message}`) : String(err);
  w.sink.count(w.route);
  w.sink.error(`internal error: request ${id} on ${w.route}: ${stack}`);
  return id;
}
