import { RpcCode, rpcError } from '../errors.js';
import { failedStream } from './client-core.js';
import {
  transportKind,
  type RequestClient,
  type StreamOptions,
  type Transport,
  type UnaryOptions,
} from './types.js';

/**
 * Dispatches by the target's transport kind, so a router can call any instance straight from its
 * discovery record. A kind without a client fails the stream with `cannot_connect`.
 */
export class MultiTransportClient implements RequestClient {
  constructor(
    private readonly clients: { tcp?: RequestClient; nats_tcp?: RequestClient; inproc?: RequestClient },
  ) {}

  private pick(target: Transport): RequestClient | null {
    const k = transportKind(target);
    return k === 'http' ? null : (this.clients[k] ?? null);
  }

  stream<T = unknown>(
    target: Transport,
    endpoint: string,
    payload: unknown,
    opts?: StreamOptions,
  ): AsyncIterableIterator<T> {
    const c = this.pick(target);
    if (!c)
      return failedStream(
        rpcError(RpcCode.CannotConnect, `no request-plane client for ${transportKind(target)} targets`),
      );
    return c.stream<T>(target, endpoint, payload, opts);
  }

  unary<T = unknown>(target: Transport, endpoint: string, payload: unknown, opts?: UnaryOptions): Promise<T> {
    const c = this.pick(target);
    if (!c)
      return Promise.reject(
        rpcError(RpcCode.CannotConnect, `no request-plane client for ${transportKind(target)} targets`),
      );
    return c.unary<T>(target, endpoint, payload, opts);
  }

  async close(): Promise<void> {
    await Promise.all(Object.values(this.clients).map((c) => c?.close()));
  }
}
