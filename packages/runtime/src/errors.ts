/**
 * Error codes of the runtime. Request-plane failures carry the codes migration (docs/protocol.md §14)
 * matches on; everything is a `KvrError` so the HTTP layer can normalise it once.
 */
import { KvrError, type ErrorCode } from '@kvrouter/protocols';

export const RpcCode = {
  /** Nothing listens at the target (refused, no NATS responder, unknown in-process server). Migratable. */
  CannotConnect: 'cannot_connect',
  /** The peer did not answer in time: tcp connect timeout, or no first message on nats. Migratable. */
  ConnectionTimeout: 'connection_timeout',
  /** The stream closed without `end` (peer died, connection dropped). Migratable. */
  Disconnected: 'disconnected',
  /** The worker is shutting down and dropped or refused the stream. Migratable. */
  EngineShutdown: 'engine_shutdown',
  /** The caller cancelled (abort signal or early return). Not migratable. */
  Cancelled: 'cancelled',
  /** The worker refused for lack of capacity. Not migratable. */
  ResourceExhausted: 'resource_exhausted',
  UnknownEndpoint: 'unknown_endpoint',
  PayloadTooLarge: 'payload_too_large',
  /** Malformed frame or message from the peer. */
  ProtocolError: 'protocol_error',
  /** A unary call got no reply within its timeout. */
  RequestTimeout: 'request_timeout',
  /** A unary call's stream ended without an item. */
  EmptyResponse: 'empty_response',
  /** A handler threw something that is not a KvrError. */
  Internal: 'internal',
} as const;

/** Codes after which a request may be retried on another worker (§14). */
export const MIGRATABLE_CODES: ReadonlySet<string> = new Set([
  RpcCode.CannotConnect,
  RpcCode.ConnectionTimeout,
  RpcCode.Disconnected,
  RpcCode.EngineShutdown,
]);

export function isMigratable(e: unknown): boolean {
  return e instanceof KvrError && MIGRATABLE_CODES.has(e.code);
}

/** A request-plane error; the status comes from the error-code table. */
export function rpcError(code: ErrorCode, message: string, detail?: Record<string, unknown>): KvrError {
  return new KvrError(code, message, undefined, detail);
}

/** Rebuilds an error received from a peer; the code decides the status when the peer sent none. */
export function remoteError(code: unknown, message: unknown, status: unknown): KvrError {
  const c = typeof code === 'string' && code.length > 0 ? code : RpcCode.Internal;
  const m = typeof message === 'string' ? message : 'remote error';
  return KvrError.relay(c, m, status, { remote: true });
}

/** What a handler's failure looks like on the wire: KvrErrors keep their code, anything else is `internal`. */
export function toKvrError(e: unknown): KvrError {
  if (e instanceof KvrError) return e;
  const m = e instanceof Error ? e.message : String(e);
  return rpcError(RpcCode.Internal, m);
}
