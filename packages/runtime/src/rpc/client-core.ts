/** Client-side pieces every transport shares: one open stream's state, and unary on top of streams. */
import { invalidArgument } from '@kvrouter/protocols';
import type { KvrError } from '@kvrouter/protocols';
import { Channel } from '../channel.js';
import { RpcCode, rpcError } from '../errors.js';
import { UNARY_TIMEOUT_MS, type RequestClient, type Transport, type UnaryOptions } from './types.js';

export const cancelledError = (): KvrError => rpcError(RpcCode.Cancelled, 'the caller cancelled the stream');

/**
 * One stream as the client sees it. The transport feeds `data`/`end`/`fail`; the consumer's early
 * return or abort signal calls `sendCancel` once and detaches the stream from its connection.
 */
export class PendingStream {
  readonly ch = new Channel<unknown>();
  /** Whether anything (item or heartbeat) arrived yet: tells `connection_timeout` from `disconnected`. */
  heard = false;
  lastHeard: number;
  private readonly signal: AbortSignal | undefined;
  private readonly onAbort: (() => void) | null = null;

  constructor(
    readonly id: number,
    private readonly detach: (p: PendingStream) => void,
    sendCancel: (p: PendingStream) => void,
    signal: AbortSignal | undefined,
    now: number,
  ) {
    this.lastHeard = now;
    this.signal = signal;
    this.ch.onReturn = () => {
      this.cleanup();
      sendCancel(this);
    };
    if (signal) {
      this.onAbort = () => {
        if (this.ch.closed) return;
        this.cleanup();
        sendCancel(this);
        this.ch.abort(cancelledError());
      };
      signal.addEventListener('abort', this.onAbort, { once: true });
    }
  }

  private cleanup(): void {
    this.detach(this);
    if (this.onAbort) this.signal!.removeEventListener('abort', this.onAbort);
  }

  get closed(): boolean {
    return this.ch.closed;
  }

  data(v: unknown, now: number): void {
    this.heard = true;
    this.lastHeard = now;
    this.ch.push(v);
  }

  touch(now: number): void {
    this.heard = true;
    this.lastHeard = now;
  }

  end(): void {
    if (this.ch.closed) return;
    this.cleanup();
    this.ch.end();
  }

  fail(e: KvrError): void {
    if (this.ch.closed) return;
    this.cleanup();
    this.ch.fail(e);
  }
}

/** A stream that fails on its first pull: for errors found after arguments were accepted. */
export function failedStream<T>(e: KvrError): AsyncIterableIterator<T> {
  const ch = new Channel<T>();
  ch.fail(e);
  return ch;
}

export function checkSignal(signal: unknown): AbortSignal | undefined {
  if (signal === undefined) return undefined;
  if (!(signal instanceof AbortSignal)) throw invalidArgument('signal', 'must be an AbortSignal');
  return signal;
}

/** unary = the first item of a stream, under a timeout; further items are cancelled. */
export async function unaryOverStream<T>(
  client: Pick<RequestClient, 'stream'>,
  target: Transport,
  endpoint: string,
  payload: unknown,
  opts: UnaryOptions = {},
): Promise<T> {
  const timeoutMs = opts.timeoutMs ?? UNARY_TIMEOUT_MS;
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0)
    throw invalidArgument('timeoutMs', `must be > 0, got ${timeoutMs}`);
  const user = checkSignal(opts.signal);
  const ac = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    ac.abort();
  }, timeoutMs);
  const onUser = (): void => ac.abort();
  user?.addEventListener('abort', onUser, { once: true });
  if (user?.aborted) ac.abort();
  const it = client.stream<T>(target, endpoint, payload, { signal: ac.signal });
  try {
    const first = await it.next();
    if (first.done)
      throw rpcError(RpcCode.EmptyResponse, `unary call to "${endpoint}" ended without an item`);
    // The end marker of a one-item stream follows at once; anything else is cut short.
    await it.return?.();
    return first.value;
  } catch (e) {
    if (timedOut && (e as KvrError).code === RpcCode.Cancelled)
      throw rpcError(
        RpcCode.RequestTimeout,
        `unary call to "${endpoint}" got no reply within ${timeoutMs} ms`,
      );
    throw e;
  } finally {
    clearTimeout(timer);
    user?.removeEventListener('abort', onUser);
  }
}
