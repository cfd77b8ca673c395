/**
 * Every error leaves the HTTP layer through `toOpenAiError`, once, as the OpenAI body
 * `{error: {message, type, code}}` (docs/CONVENTIONS.md "Errors"). Domain errors are `KvrError`s whose
 * `status` is the HTTP status; anything else is an internal error whose text is not leaked.
 */
import { KvrError } from '@kvrouter/protocols';

export interface OpenAiErrorBody {
  error: { message: string; type: string; code: string | number | null; param?: string | null };
}

/** OpenAI's `type` per status class (what the official clients map to exception classes). */
function typeOf(status: number): string {
  if (status === 400 || status === 413 || status === 422) return 'invalid_request_error';
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 429) return 'rate_limit_error';
  if (status === 501) return 'not_implemented_error';
  if (status === 503) return 'service_unavailable';
  if (status === 499) return 'cancelled';
  return status >= 500 ? 'internal_server_error' : 'invalid_request_error';
}

export function badRequest(field: string, message: string): KvrError {
  return new KvrError('invalid_request', message, 400, { field });
}

/** Longest model name an error message echoes (a client can send a 100 MB one). */
const ECHO_MAX = 256;

export function modelNotFound(model: string): KvrError {
  const shown = model.length > ECHO_MAX ? `${model.slice(0, ECHO_MAX)}… (${model.length} characters)` : model;
  return new KvrError('model_not_found', `The model \`${shown}\` does not exist.`, 404, { field: 'model' });
}

/** Status and OpenAI body of any thrown value. */
export function toOpenAiError(err: unknown): { status: number; body: OpenAiErrorBody } {
  if (err instanceof KvrError) {
    const status = Number.isInteger(err.status) && err.status >= 400 && err.status <= 599 ? err.status : 500;
    const field = err.detail?.field;
    return {
      status,
      body: {
        error: {
          message: err.message,
          type: typeOf(status),
          code: err.code,
          ...(typeof field === 'string' ? { param: field } : {}),
        },
      },
    };
  }
  // body-parser style errors (`status`, `type`) from express middleware.
  const e = err as { status?: unknown; statusCode?: unknown; type?: unknown; message?: unknown } | null;
  const s = typeof e?.status === 'number' ? e.status : typeof e?.statusCode === 'number' ? e.statusCode : 500;
  if (s >= 400 && s < 500) {
    const msg = typeof e?.message === 'string' ? e.message : 'invalid request';
    // Named like every other 4xx: the router's param decoding fails on the path, anything else
    // here is the body reader (bad JSON, charset, a compressed body that does not inflate).
    const field = msg.startsWith('Failed to decode param') ? 'path' : 'body';
    return {
      status: s,
      body: {
        error: {
          message: `${field === 'body' ? 'request body' : 'path'}: ${msg}`,
          type: typeOf(s),
          code: typeof e?.type === 'string' ? e.type : null,
          param: field,
        },
      },
    };
  }
  return {
    status: 500,
    body: { error: { message: 'internal server error', type: typeOf(500), code: 'internal' } },
  };
}
