/**
 * The one error base class of kvrouter and its helpers. Match on `code` (a key of the table in
 * `error-codes.ts`, never message text). `status` is the HTTP status the HTTP layer answers with; it
 * defaults to the table's. `cause` is kept (standard `Error.cause`). Errors crossing postMessage or a
 * request plane travel as `{code, message, status}` (`toWire` / `fromWire`) and are rebuilt.
 */
import { ERROR_CODES, errorStatus, type ErrorCode } from './error-codes.js';

export {
  ERROR_CODES,
  errorStatus,
  isErrorCode,
  type ErrorCode,
  type ErrorGroup,
  type ErrorSpec,
} from './error-codes.js';

/**
 * A code received from a peer or an engine that this process did not produce (kept verbatim so the
 * caller still sees it). Only `KvrError.relay` makes one; literals in code must be table keys.
 */
export type RelayedCode = string & { readonly __relayed: true };

export class KvrError extends Error {
  readonly code: ErrorCode | RelayedCode;
  readonly status: number;
  /** Extra machine-readable detail (e.g. `field`: the offending field or flag). */
  readonly detail: Record<string, unknown> | undefined;

  constructor(
    code: ErrorCode | RelayedCode,
    message: string,
    status: number = errorStatus(code),
    detail?: Record<string, unknown>,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'KvrError';
    this.code = code;
    this.status = status;
    this.detail = detail;
  }

  toWire(): WireError {
    return { code: this.code, message: this.message, status: this.status };
  }

  static fromWire(w: WireError): KvrError {
    return KvrError.relay(w.code, w.message, w.status);
  }

  /**
   * Rebuilds an error whose code came from elsewhere (a peer's wire error, an engine's error type):
   * a table code keeps its meaning; an unknown one is kept verbatim. A missing or out-of-range status
   * falls back to the table's (500 for unknown codes).
   */
  static relay(code: string, message: string, status?: unknown, detail?: Record<string, unknown>): KvrError {
    const s =
      typeof status === 'number' && Number.isInteger(status) && status >= 100 && status <= 599
        ? status
        : errorStatus(code);
    return new KvrError(code as RelayedCode, message, s, detail);
  }
}

export interface WireError {
  code: string;
  message: string;
  status?: number;
}

/** Malformed input (a KV event, a wire message, a request body): status 400. */
export class DecodeError extends KvrError {
  constructor(message: string, detail?: Record<string, unknown>) {
    super('decode_error', message, ERROR_CODES.decode_error.status, detail);
    this.name = 'DecodeError';
  }
}

export function isKvrError(e: unknown): e is KvrError {
  return e instanceof KvrError;
}

/** The message of anything thrown (`Error.message`, else its string form). */
export function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** A value as error messages show it: strings quoted (long ones cut), bigints with `n`, containers by kind. */
export function describeValue(v: unknown): string {
  if (typeof v === 'bigint') return `${v}n`;
  if (typeof v === 'string') return JSON.stringify(v.length > 60 ? `${v.slice(0, 60)}…` : v);
  if (v === null || v === undefined || typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) return 'an array';
  if (ArrayBuffer.isView(v)) return `${v.constructor.name}(${v.byteLength} bytes)`;
  if (typeof v === 'function') return 'a function';
  return 'an object';
}

/**
 * THE `invalid_argument` factory (status 400): message `<field> <reason>` plus `, got <value>` when a
 * value is given (`describeValue`), `detail.field` = field; docs/configuration.md's flag messages have this shape
 * (`--router-temperature must be >= 0, got -1`). Callers throw it.
 */
export function invalidArgument(field: string, reason: string, ...value: [] | [unknown]): KvrError {
  const got = value.length === 0 ? '' : `, got ${describeValue(value[0])}`;
  return new KvrError('invalid_argument', `${field} ${reason}${got}`, ERROR_CODES.invalid_argument.status, {
    field,
  });
}

/**
 * THE `invalid_request` factory (status 400): a request body's field is bad. Message `<field>: <reason>`,
 * or `<context> <field>: <reason>` (`generate dp_rank: …`); `detail.field` = field, which the HTTP
 * layer returns as the OpenAI error's `param`.
 */
export function invalidRequest(field: string, reason: string, context?: string): KvrError {
  const where = context ? `${context} ${field}` : field;
  return new KvrError('invalid_request', `${where}: ${reason}`, ERROR_CODES.invalid_request.status, {
    field,
  });
}
