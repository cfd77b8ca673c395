/**
 * The request-plane interface (docs/protocol.md §5.7), one for every transport: a server serves named
 * endpoints with handlers that return one item or stream many; a client opens streams to a target.
 */
import { invalidArgument } from '@kvrouter/protocols';
import type { KvrError } from '@kvrouter/protocols';

/**
 * Where a server listens, as published in the instance JSON (§6.3). `inproc` is kvrouter's
 * extension for servers in the same process (the frontend's embedded simulated workers).
 */
export type Transport = { tcp: string } | { nats_tcp: string } | { http: string } | { inproc: string };

export interface HandlerContext {
  /** Aborted when the caller cancels, the caller's connection drops, or the server shuts down. */
  signal: AbortSignal;
  endpoint: string;
}

/**
 * A handler returns one item (a promise) or a stream of items (an async iterable, e.g. an async
 * generator). Throwing a `KvrError` sends its code to the caller; anything else arrives as `internal`.
 * Long waits inside a generator must watch `ctx.signal`: the stream stops at the next `yield`.
 */
export type Handler<P = unknown, I = unknown> = (
  payload: P,
  ctx: HandlerContext,
) => AsyncIterable<I> | Promise<I>;

export interface CloseOptions {
  /** How long in-flight streams may finish before they end with `engine_shutdown`; default 0. */
  graceMs?: number;
}

export interface RequestServer {
  readonly transport: Transport;
  /** Streams currently running. */
  readonly activeStreams: number;
  serve<P = unknown, I = unknown>(endpoint: string, handler: Handler<P, I>): void;
  unserve(endpoint: string): boolean;
  /** Stops taking requests (new ones get `engine_shutdown`), lets streams finish for `graceMs`, then ends the rest. */
  close(opts?: CloseOptions): Promise<void>;
  /** Drops every connection and stream without a word, as a crashed process would. */
  abort(): void;
}

export interface StreamOptions {
  signal?: AbortSignal | undefined;
}

export interface UnaryOptions extends StreamOptions {
  /** Default 10 000 ms (§5.7); the call then fails with `request_timeout`. */
  timeoutMs?: number;
}

export interface RequestClient {
  /**
   * Opens a stream. Argument errors (and a payload over the frame limit) throw at once; transport
   * errors (`cannot_connect`, `disconnected`, …) and the server's errors come out of the iterator
   * after the items that preceded them. Breaking out of the loop cancels the stream on the server.
   * Typed arrays in `payload` may be sent from their own memory (tcp: 4 kB and more at its top
   * level; inproc: by reference): do not modify them until the stream ends.
   */
  stream<T = unknown>(
    target: Transport,
    endpoint: string,
    payload: unknown,
    opts?: StreamOptions,
  ): AsyncIterableIterator<T>;
  /** The first item of the stream (the rest, if any, is cancelled). */
  unary<T = unknown>(target: Transport, endpoint: string, payload: unknown, opts?: UnaryOptions): Promise<T>;
  close(): Promise<void>;
}

export const UNARY_TIMEOUT_MS = 10_000;

export function checkEndpoint(endpoint: unknown): string {
  if (typeof endpoint !== 'string' || endpoint.length === 0 || endpoint.length > 256)
    throw invalidArgument('endpoint', 'must be a non-empty string of at most 256 characters');
  return endpoint;
}

export function transportKind(t: Transport): 'tcp' | 'nats_tcp' | 'http' | 'inproc' {
  if (t && typeof t === 'object') {
    const keys = Object.keys(t);
    if (keys.length === 1) {
      const k = keys[0]!;
      if (
        (k === 'tcp' || k === 'nats_tcp' || k === 'http' || k === 'inproc') &&
        typeof (t as Record<string, unknown>)[k] === 'string'
      )
        return k;
    }
  }
  throw invalidArgument(
    'target',
    `must be one of {tcp}, {nats_tcp}, {http}, {inproc} with a string, got ${describe(t)}`,
  );
}

/** The address inside a transport of the expected kind. */
export function targetOf(t: Transport, kind: 'tcp' | 'nats_tcp' | 'inproc'): string {
  const k = transportKind(t);
  if (k !== kind) throw invalidArgument('target', `this client speaks ${kind}, got a ${k} transport`);
  const v = (t as Record<string, string>)[k]!;
  if (v.length === 0) throw invalidArgument('target', `${kind} address is empty`);
  return v;
}

function describe(v: unknown): string {
  try {
    return JSON.stringify(v) ?? String(v);
  } catch {
    return String(v);
  }
}

/** Errors a client surfaces; re-exported for callers that only want the type. */
export type RpcError = KvrError;
