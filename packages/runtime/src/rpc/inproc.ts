/**
 * In-process request plane: the same interface with no serialisation and no sockets, for workers
 * that live in the caller's process (the frontend's embedded simulated workers). Payloads and items
 * are passed by reference, so neither side may mutate them after handing them over.
 */
import { invalidArgument } from '@kvrouter/protocols';
import { RpcCode, remoteError, rpcError } from '../errors.js';
import { PendingStream, cancelledError, checkSignal, failedStream, unaryOverStream } from './client-core.js';
import { ServerCore, type ServerCoreOptions } from './server-core.js';
import {
  checkEndpoint,
  targetOf,
  type CloseOptions,
  type Handler,
  type RequestClient,
  type RequestServer,
  type StreamOptions,
  type Transport,
  type UnaryOptions,
} from './types.js';

/** Items an in-process stream may buffer before its generator waits for the consumer. */
const INPROC_BUFFER = 64;

/** The registry in-process clients find servers in (one per process is typical; tests make their own). */
export class InprocHub {
  private readonly servers = new Map<string, InprocRequestServer>();
  private seq = 0;

  /** Starts a server registered as `name` (default a fresh one). */
  listen(opts: ServerCoreOptions & { name?: string } = {}): InprocRequestServer {
    const name = opts.name ?? `inproc-${++this.seq}`;
    if (typeof name !== 'string' || name.length === 0)
      throw invalidArgument('name', 'must be a non-empty string');
    if (this.servers.has(name))
      throw invalidArgument('name', `an in-process server named "${name}" already runs`);
    const s = new InprocRequestServer(this, name, new ServerCore(opts));
    this.servers.set(name, s);
    return s;
  }

  /** @internal */
  lookup(name: string): InprocRequestServer | undefined {
    return this.servers.get(name);
  }

  /** @internal */
  remove(s: InprocRequestServer): void {
    if (this.servers.get(s.name) === s) this.servers.delete(s.name);
  }
}

let defaultHub: InprocHub | null = null;
export function defaultInprocHub(): InprocHub {
  return (defaultHub ??= new InprocHub());
}

export class InprocRequestServer implements RequestServer {
  readonly transport: { inproc: string };

  constructor(
    private readonly hub: InprocHub,
    readonly name: string,
    /** @internal */ readonly core: ServerCore,
  ) {
    this.transport = { inproc: name };
  }

  get activeStreams(): number {
    return this.core.activeStreams;
  }

  serve<P = unknown, I = unknown>(endpoint: string, handler: Handler<P, I>): void {
    this.core.serve(endpoint, handler as Handler);
  }

  unserve(endpoint: string): boolean {
    return this.core.unserve(endpoint);
  }

  async close(opts: CloseOptions = {}): Promise<void> {
    await this.core.shutdown(opts.graceMs ?? 0);
    this.hub.remove(this);
  }

  abort(): void {
    this.hub.remove(this);
    this.core.abortAll(rpcError(RpcCode.Disconnected, `in-process server ${this.name} died mid-stream`));
  }
}

export class InprocRequestClient implements RequestClient {
  private closed = false;
  constructor(private readonly hub: InprocHub = defaultInprocHub()) {}

  stream<T = unknown>(
    target: Transport,
    endpoint: string,
    payload: unknown,
    opts: StreamOptions = {},
  ): AsyncIterableIterator<T> {
    const name = targetOf(target, 'inproc');
    checkEndpoint(endpoint);
    const signal = checkSignal(opts.signal);
    if (this.closed) return failedStream(rpcError(RpcCode.CannotConnect, 'in-process client is closed'));
    if (signal?.aborted) return failedStream(cancelledError());
    const server = this.hub.lookup(name);
    if (!server)
      return failedStream(
        rpcError(RpcCode.CannotConnect, `no in-process server named "${name}"`, { target: name }),
      );
    let active: { cancel(): void } | null = null;
    const p = new PendingStream(
      0,
      () => undefined,
      () => active?.cancel(),
      signal,
      0,
    );
    active = server.core.start(endpoint, payload, {
      data: (item) => {
        p.data(item, 0);
        // A generator in the same process must not run arbitrarily far ahead of its consumer.
        return p.ch.whenBelow(INPROC_BUFFER);
      },
      end: () => p.end(),
      // Rebuilt like a remote error, so callers see the same error shape on every transport.
      error: (e) => p.fail(remoteError(e.code, e.message, e.status)),
    });
    return p.ch as AsyncIterableIterator<T>;
  }

  unary<T = unknown>(target: Transport, endpoint: string, payload: unknown, opts?: UnaryOptions): Promise<T> {
    return unaryOverStream<T>(this, target, endpoint, payload, opts);
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}
