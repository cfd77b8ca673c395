/**
 * Errors of the Anthropic API in Anthropic's shape, `{type: "error", error: {type, message}}`, with
 * the status every other route answers with (`toOpenAiError` decides status and message once;
 * only the body differs). 4xx answers are logged with the field they name.
 */
import type { ServerResponse } from 'node:http';
import { toOpenAiError } from '../errors.js';
import { reportInternal } from '../http/internal-errors.js';
import type { PlainError } from '../http/streams.js';
import { sendJson } from '../http/util.js';
import type { Logger } from '../models.js';

export interface AnthropicErrorBody {
  type: 'error';
  error: { type: string; message: string };
}

/** Anthropic's error type per status (busy answers keep kvrouter's 503 + Retry-After; Anthropic's own is 529). */
function typeOf(status: number): string {
  if (status === 400 || status === 422) return 'invalid_request_error';
  if (status === 401) return 'authentication_error';
  if (status === 402) return 'billing_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 413) return 'request_too_large';
  if (status === 429) return 'rate_limit_error';
  if (status === 503 || status === 529) return 'overloaded_error';
  if (status === 504) return 'timeout_error';
  return status >= 500 ? 'api_error' : 'invalid_request_error';
}

function toAnthropicError(err: unknown): {
  status: number;
  body: AnthropicErrorBody;
  field: string | null;
} {
  const { status, body } = toOpenAiError(err);
  return {
    status,
    body: { type: 'error', error: { type: typeOf(status), message: body.error.message } },
    field: body.error.param ?? null,
  };
}

/** The JSON error response in Anthropic's shape (a request still unanswered when shutdown's grace period ends). */
export const anthropicPlainError: PlainError = (err) => {
  const { status, body } = toAnthropicError(err);
  return { status, text: JSON.stringify(body) };
};

/** The SSE error event that ends a stream. */
export function errorEvent(err: unknown): string {
  return `event: error\ndata: ${JSON.stringify(toAnthropicError(err).body)}\n\n`;
}

/** Answers `err` (or ends a started response); client errors get one log line naming the field. */
export function sendAnthropicError(res: ServerResponse, err: unknown, log: Logger, route: string): void {
  const { status, body, field } = toAnthropicError(err);
  if (status >= 400 && status < 499)
    log.warn(
      `${route}: ${status} ${body.error.type}${field !== null ? ` (field ${field})` : ''}: ${body.error.message}`,
    );
  const requestId = reportInternal(res, err);
  if (res.headersSent) {
    res.end();
    return;
  }
  const headers: Record<string, string> = {};
  if (status === 503) headers['retry-after'] = '1';
  if (requestId !== null) headers['request-id'] = headers['x-request-id'] = requestId;
  sendJson(res, status, JSON.stringify(body), headers);
}
