import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { KvrError, parseJson } from '@kvrouter/protocols';
import { toOpenAiError } from '../errors.js';
import { BODY_THREAD_BYTES, BodyBytes, bodyOf, invalidJson, ParsedBody } from './body-thread.js';
import { reportInternal } from './internal-errors.js';
import type { StringCache } from './json-bytes.js';

/**
 * The raw text body parsed losslessly (u64 ids in nvext stay exact); a large body comes as its bytes
 * (parsed here, without a whole-body string) or parsed already by the body thread.
 */
export function parseBody(text: unknown): unknown {
  if (text instanceof BodyBytes) return text.parse();
  if (text instanceof ParsedBody) return text.value;
  if (typeof text !== 'string' || text.length === 0)
    throw new KvrError('invalid_request', 'request body: expected a JSON object, got an empty body', 400, {
      field: 'body',
    });
  try {
    return parseJson(text);
  } catch (e) {
    throw invalidJson((e as Error).message);
  }
}

export function payloadTooLarge(limitMb: number): KvrError {
  return new KvrError(
    'payload_too_large',
    `request body exceeds the limit of ${limitMb} MB (DYN_HTTP_BODY_LIMIT_MB)`,
    413,
    { field: 'body' },
  );
}

/**
 * Whether `readUtf8Body` can read this request: an unencoded body in UTF-8 (or no charset). Bodies
 * with a content-encoding or another charset go through express's body parser, which decodes them.
 */
export function plainUtf8Body(req: IncomingMessage): boolean {
  const enc = req.headers['content-encoding'];
  if (enc !== undefined && enc.toLowerCase() !== 'identity') return false;
  const ct = req.headers['content-type'];
  if (ct === undefined) return true;
  const m = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(ct);
  return m === null || /^utf-?8$/i.test(m[1]!);
}

/**
 * The whole body as UTF-8 text, failing with 413 past `limitBytes` (before reading when the length
 * says so); a body of `threadBytes` or more (`--http-body-thread-bytes`, 0 = none) comes back
 * parsed by the body thread, else one of `BYTES_PARSE_MIN` (64 KiB; 2 KiB with a string cache,
 * `strings`) or more comes back as its bytes, which `parseBody` parses without decoding them into
 * one string (long strings an earlier body sent come from the cache).
 */
export function readUtf8Body(
  req: IncomingMessage,
  limitBytes: number,
  limitMb: number,
  threadBytes = BODY_THREAD_BYTES,
  strings: StringCache | null = null,
): Promise<string | ParsedBody | BodyBytes> {
  const declared = Number(req.headers['content-length']);
  if (declared > limitBytes) return Promise.reject(payloadTooLarge(limitMb));
  return new Promise<string | ParsedBody | BodyBytes>((resolve, reject) => {
    let parts: Buffer[] = [];
    let size = 0;
    const onData = (b: Buffer) => {
      size += b.length;
      if (size > limitBytes) {
        // The rest is discarded by the server once the response ends.
        req.off('data', onData);
        reject(payloadTooLarge(limitMb));
        return;
      }
      parts.push(b);
    };
    // A client that goes away mid-body: nothing to answer (a settled promise ignores this).
    const onClose = () => {
      if (!req.complete) reject(new KvrError('cancelled', 'client disconnected while sending the body', 499));
    };
    req.on('data', onData);
    req.once('end', () => {
      // These listeners hold the body's buffers (this closure) and `reject` (the promise, hence the
      // text) for as long as the request lives: a streamed response lives long enough for the young
      // generation to promote ~80 kB per 8k-token request. Nothing may pin them past here.
      req.off('data', onData);
      req.off('error', reject);
      req.off('close', onClose);
      const body = parts;
      parts = [];
      // Refused with 413 already.
      if (size > limitBytes) return;
      resolve(bodyOf(body, size, threadBytes, strings));
    });
    req.once('error', reject);
    req.once('close', onClose);
  });
}

/** One JSON response (what express's `res.status(s).type('application/json').send(text)` sends). */
export function sendJson(
  res: ServerResponse,
  status: number,
  text: string,
  headers?: Record<string, string>,
): void {
  // Answered already (cut with a shutting_down error at the end of the shutdown grace period).
  if (res.writableEnded) return;
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

/**
 * An abort controller the client's going away aborts (`close` before the response finished),
 * aborted at once when it went away already: a body parsed on the body thread reaches its handler
 * a few ms after the body ended, and a client may have closed in between (no `close` follows).
 */
export function abortOnClose(res: ServerResponse): AbortController {
  const ac = new AbortController();
  if (res.destroyed && !res.writableFinished) ac.abort();
  res.on('close', () => {
    if (!res.writableFinished) ac.abort();
  });
  return ac;
}

/**
 * Ends a failed OpenAI-style response: before its headers, the error response; mid-stream, the
 * error as one more SSE data event and then `[DONE]` (what OpenAI clients expect), the error
 * logged as internal when it is one.
 */
export function endWithError(res: ServerResponse, e: unknown): void {
  if (!res.headersSent) {
    sendError(res, e);
    return;
  }
  reportInternal(res, e);
  const { body } = toOpenAiError(e);
  if (!res.destroyed && !res.writableEnded) res.end(`data: ${JSON.stringify(body)}\n\ndata: [DONE]\n\n`);
}

export function sendError(res: ServerResponse, err: unknown): void {
  const { status, body } = toOpenAiError(err);
  const requestId = reportInternal(res, err);
  if (res.headersSent) {
    res.end();
    return;
  }
  // Busy / no worker: clients may retry (docs/configuration.md "busy -> 503 with Retry-After").
  sendJson(
    res,
    status,
    JSON.stringify(body),
    status === 503 ? { 'retry-after': '1' } : requestId !== null ? { 'x-request-id': requestId } : undefined,
  );
}

/**
 * TLS settings of the HTTPS listener: TLS 1.2 and 1.3 only, and for TLS 1.2 only forward-secret
 * AEAD suites (Mozilla's "intermediate" profile: ECDHE/DHE with AES-GCM or ChaCha20-Poly1305; no
 * RSA key exchange, CBC, 3DES, RC4 or SHA-1 MACs). TLS 1.3's suites are all strong (OpenSSL's own).
 */
export const TLS_PROFILE = {
  minVersion: 'TLSv1.2',
  ciphers: [
    'ECDHE-ECDSA-AES128-GCM-SHA256',
    'ECDHE-RSA-AES128-GCM-SHA256',
    'ECDHE-ECDSA-AES256-GCM-SHA384',
    'ECDHE-RSA-AES256-GCM-SHA384',
    'ECDHE-ECDSA-CHACHA20-POLY1305',
    'ECDHE-RSA-CHACHA20-POLY1305',
    'DHE-RSA-AES128-GCM-SHA256',
    'DHE-RSA-AES256-GCM-SHA384',
  ].join(':'),
  honorCipherOrder: true,
} as const;

/**
 * Refuses a request with more than `max` header fields with 431 `headers_too_large` (the head's
 * byte size is bounded by the server's `maxHeaderSize`, which answers 431 itself). The server must
 * keep at least `max + 1` fields (`maxHeadersCount`) so that the excess is visible here.
 */
export function limitHeaderCount(max: number, next: RequestListener): RequestListener {
  return (req, res) => {
    const n = req.rawHeaders.length / 2;
    if (n <= max) {
      next(req, res);
      return;
    }
    res.shouldKeepAlive = false;
    sendError(
      res,
      new KvrError(
        'headers_too_large',
        `headers: ${n} header fields, the limit is ${max} (--http-max-headers)`,
        431,
        {
          field: 'headers',
          limit: max,
        },
      ),
    );
    // The body (if any) is not read.
    req.resume();
  };
}
