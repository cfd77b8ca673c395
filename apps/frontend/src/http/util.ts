import type { Request, Response } from 'express';
import { KvrError, parseJson } from '@kvrouter/protocols';
import { toOpenAiError } from '../errors.js';

/** The raw text body (express.text) parsed losslessly (u64 ids in nvext stay exact). */
export function parseBody(req: Request): unknown {
  const text: unknown = req.body;
  if (typeof text !== 'string' || text.length === 0)
    throw new KvrError('invalid_request', 'request body: expected a JSON object, got an empty body', 400, { field: 'body' });
  try {
    return parseJson(text);
  } catch (e) {
    throw new KvrError('invalid_json', `request body is not valid JSON: ${(e as Error).message}`, 400, { field: 'body' });
  }
}

export function sendError(res: Response, err: unknown): void {
  const { status, body } = toOpenAiError(err);
  if (res.headersSent) {
    res.end();
    return;
  }
  // Busy / no worker: clients may retry (FLAGS.md "busy -> 503 with Retry-After").
  if (status === 503) res.setHeader('retry-after', '1');
  res.status(status).type('application/json').send(JSON.stringify(body));
}
