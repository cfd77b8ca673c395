/**
 * The one error base class of kvrouter. Match on `code` (stable string), never on message text.
 * `status` is the HTTP status the HTTP layer answers with. Errors crossing postMessage travel as
 * `{code, message}` (see `toWire` / `fromWire`) and are rebuilt on the other side.
 */
export class KvrError extends Error {
  readonly code: string;
  readonly status: number;
  /** Extra machine-readable detail (e.g. the offending field or flag). */
  readonly detail: Record<string, unknown> | undefined;

  constructor(code: string, message: string, status = 500, detail?: Record<string, unknown>) {
    super(message);
    this.name = 'KvrError';
    this.code = code;
    this.status = status;
    this.detail = detail;
  }

  toWire(): WireError {
    return { code: this.code, message: this.message, status: this.status };
  }

  static fromWire(w: WireError): KvrError {
    return new KvrError(w.code, w.message, w.status ?? 500);
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
    super('decode_error', message, 400, detail);
    this.name = 'DecodeError';
  }
}

export function isKvrError(e: unknown): e is KvrError {
  return e instanceof KvrError;
}
