import { Channel } from '@kvrouter/runtime';
import { DecodeError, decodeEnvelope, type EventEnvelope } from '@kvrouter/protocols';
import type { EventSubscription, SubscribeOptions } from './types.js';

/**
 * The subscription every transport hands out: a queue of decoded envelopes. Transports push raw
 * bytes (or already-checked envelopes); anything malformed is counted, reported and dropped here,
 * so one bad message never ends the stream.
 */
export class EnvelopeQueue implements EventSubscription {
  private readonly ch = new Channel<EventEnvelope>();
  private failures = 0;
  private release: (() => void) | null;

  constructor(
    private readonly opts: SubscribeOptions,
    release: () => void,
  ) {
    this.release = release;
    this.ch.onReturn = () => this.close();
  }

  get decodeFailures(): number {
    return this.failures;
  }

  get closed(): boolean {
    return this.ch.closed;
  }

  /** Decodes `bytes` as an envelope; a `DecodeError` is counted and dropped. */
  pushBytes(bytes: Uint8Array): void {
    let env: EventEnvelope;
    try {
      env = decodeEnvelope(bytes);
    } catch (e) {
      this.fail(e);
      return;
    }
    this.ch.push(env);
  }

  push(env: EventEnvelope): void {
    this.ch.push(env);
  }

  fail(e: unknown): void {
    this.failures++;
    const err =
      e instanceof DecodeError
        ? e
        : new DecodeError(e instanceof Error ? e.message : String(e), { field: 'envelope' });
    try {
      this.opts.onDecodeFailure?.(err);
    } catch {
      // A failing hook must not take the subscription down with it.
    }
  }

  close(): void {
    const r = this.release;
    this.release = null;
    this.ch.end();
    r?.();
  }

  next(): Promise<IteratorResult<EventEnvelope>> {
    return this.ch.next();
  }

  return(): Promise<IteratorResult<EventEnvelope>> {
    this.close();
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): this {
    return this;
  }
}
