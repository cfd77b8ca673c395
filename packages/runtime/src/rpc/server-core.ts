/**
 * What every request-plane server does regardless of transport: the endpoint table, admission
 * (unknown endpoint, shutdown, capacity), running a handler and pumping its items into a sink,
 * cancellation, and graceful shutdown. Transports only move bytes.
 */
import { KvrError, invalidArgument } from '@kvrouter/protocols';
import { RpcCode, rpcError, toKvrError } from '../errors.js';
import { checkEndpoint, type Handler, type HandlerContext } from './types.js';

/** Where a stream's output goes. `data` may return a promise to apply transport backpressure. */
export interface Sink {
  data(item: unknown): void | Promise<void>;
  end(): void;
  error(e: KvrError): void;
}

export interface ServerCoreOptions {
  /** Further requests get `resource_exhausted` while this many streams run; default unlimited. */
  maxConcurrentStreams?: number;
}

export class ActiveStream {
  readonly ac = new AbortController();
  done: Promise<void> = Promise.resolve();
  constructor(readonly sink: Sink) {}

  /** Stops the handler; nothing more reaches the sink. */
  cancel(): void {
    this.ac.abort();
  }

  /** Stops the handler and tells the caller why. */
  kill(e: KvrError): void {
    if (this.ac.signal.aborted) return;
    this.ac.abort();
    this.sink.error(e);
  }
}

export class ServerCore {
  private readonly handlers = new Map<string, Handler>();
  private readonly streams = new Set<ActiveStream>();
  private readonly maxStreams: number;
  private closing = false;
  private drained: (() => void) | null = null;

  constructor(opts: ServerCoreOptions = {}) {
    const m = opts.maxConcurrentStreams ?? Infinity;
    if (m !== Infinity && (!Number.isInteger(m) || m < 1))
      throw invalidArgument('maxConcurrentStreams', `must be a positive integer, got ${m}`);
    this.maxStreams = m;
  }

  get activeStreams(): number {
    return this.streams.size;
  }

  get isClosing(): boolean {
    return this.closing;
  }

  serve(endpoint: string, handler: Handler): void {
    checkEndpoint(endpoint);
    if (typeof handler !== 'function') throw invalidArgument('handler', 'must be a function');
    if (this.handlers.has(endpoint)) throw invalidArgument('endpoint', `"${endpoint}" is already served`);
    this.handlers.set(endpoint, handler);
  }

  unserve(endpoint: string): boolean {
    return this.handlers.delete(endpoint);
  }

  /** Starts a stream, or answers the sink with the refusal and returns null. */
  start(endpoint: string, payload: unknown, sink: Sink): ActiveStream | null {
    if (this.closing) {
      sink.error(rpcError(RpcCode.EngineShutdown, 'server is shutting down'));
      return null;
    }
    const h = this.handlers.get(endpoint);
    if (!h) {
      sink.error(rpcError(RpcCode.UnknownEndpoint, `no handler for endpoint "${endpoint}"`, { endpoint }));
      return null;
    }
    if (this.streams.size >= this.maxStreams) {
      sink.error(
        rpcError(
          RpcCode.ResourceExhausted,
          `server is at its limit of ${this.maxStreams} concurrent streams`,
        ),
      );
      return null;
    }
    const s = new ActiveStream(sink);
    this.streams.add(s);
    s.done = pump(h, payload, { signal: s.ac.signal, endpoint }, sink).finally(() => {
      this.streams.delete(s);
      if (this.streams.size === 0) this.drained?.();
    });
    return s;
  }

  /** Refuses new streams, waits up to `graceMs` for running ones, then ends the rest with `engine_shutdown`. */
  async shutdown(graceMs = 0): Promise<void> {
    this.closing = true;
    if (this.streams.size > 0 && graceMs > 0) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      await new Promise<void>((resolve) => {
        this.drained = resolve;
        timer = setTimeout(resolve, graceMs);
      });
      clearTimeout(timer);
      this.drained = null;
    }
    const left = [...this.streams];
    for (const s of left)
      s.kill(rpcError(RpcCode.EngineShutdown, 'server shut down before the stream finished'));
    await Promise.all(left.map((s) => s.done));
  }

  /** Stops every stream; `e` (if given) is sent to each sink first. */
  abortAll(e?: KvrError): void {
    this.closing = true;
    for (const s of this.streams) {
      if (e) s.kill(e);
      else s.cancel();
    }
  }
}

async function pump(h: Handler, payload: unknown, ctx: HandlerContext, sink: Sink): Promise<void> {
  const signal = ctx.signal;
  let result: AsyncIterable<unknown> | Promise<unknown>;
  try {
    result = h(payload, ctx);
  } catch (e) {
    if (!signal.aborted) sink.error(toKvrError(e));
    return;
  }
  if (result !== null && typeof result === 'object' && Symbol.asyncIterator in result) {
    const it = result[Symbol.asyncIterator]();
    let finished = false;
    try {
      for (;;) {
        const r = await it.next();
        if (signal.aborted) break;
        if (r.done) {
          finished = true;
          sink.end();
          return;
        }
        const w = sink.data(r.value);
        if (w) await w;
        if (signal.aborted) break;
      }
    } catch (e) {
      if (!signal.aborted) sink.error(toKvrError(e));
    } finally {
      // Cancelled, shut down, or the sink refused an item: stop the generator so its finally blocks
      // run (on a generator that threw, return() is a no-op).
      if (!finished) await Promise.resolve(it.return?.()).catch(() => undefined);
    }
    return;
  }
  try {
    const v = await result;
    if (signal.aborted) return;
    const w = sink.data(v);
    if (w) await w;
    if (!signal.aborted) sink.end();
  } catch (e) {
    if (!signal.aborted) sink.error(toKvrError(e));
  }
}
