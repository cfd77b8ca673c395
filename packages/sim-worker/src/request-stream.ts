/**
 * The item stream of one generate request: the driver pushes tokens as passes end, the request
 * plane pulls items. Written as a plain iterator rather than an async generator so an abort ends a
 * pending `next()` at once (a generator parked in `await` cannot be stopped from outside, and the
 * server's shutdown waits for it). Tokens that pile up while the consumer is slow leave as one item.
 */
import type { KvrError } from '@kvrouter/protocols';
import type { FinishReason, GenerateItem } from '@kvrouter/protocols';

type Waiter = {
  resolve: (r: IteratorResult<GenerateItem>) => void;
  reject: (e: KvrError) => void;
};

const DONE: IteratorResult<GenerateItem> = { value: undefined, done: true };

export class RequestStream implements AsyncIterableIterator<GenerateItem> {
  private tokens: number[] = [];
  private finish: FinishReason | null = null;
  private cached: number | undefined;
  private failure: KvrError | null = null;
  /** The consumer got the last item, or went away. */
  private closed = false;
  private waiter: Waiter | null = null;
  private readonly onAbort: (() => void) | null = null;

  /**
   * @param onClose called once when the consumer stops early (return() or abort) before the stream
   *   finished, so the driver can cancel the engine request.
   */
  constructor(
    readonly requestId: string,
    private readonly onClose: (s: RequestStream) => void,
    private readonly signal?: AbortSignal,
  ) {
    if (signal) {
      this.onAbort = () => this.close();
      signal.addEventListener('abort', this.onAbort, { once: true });
    }
  }

  /** Whether the engine side is finished (last token pushed, or failed). */
  get finished(): boolean {
    return this.finish !== null || this.failure !== null;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Driver side: tokens of one pass; `finish` marks the last push. */
  push(tokenIds: readonly number[], finish?: FinishReason, cachedTokens?: number): void {
    if (this.closed || this.finished) return;
    for (const t of tokenIds) this.tokens.push(t);
    if (cachedTokens !== undefined && this.cached === undefined) this.cached = cachedTokens;
    if (finish) this.finish = finish;
    this.wakeWaiter();
  }

  /** Driver side: ends the stream with an error after the tokens already pushed. */
  fail(e: KvrError): void {
    if (this.closed || this.finished) return;
    this.failure = e;
    this.wakeWaiter();
  }

  next(): Promise<IteratorResult<GenerateItem>> {
    if (this.waiter) return Promise.reject(new Error('RequestStream: next() while a next() is pending'));
    const r = this.take();
    if (r) return Promise.resolve(r);
    if (this.failure && !this.closed) return this.failNow();
    return new Promise((resolve, reject) => {
      this.waiter = { resolve, reject };
    });
  }

  return(): Promise<IteratorResult<GenerateItem>> {
    this.close();
    return Promise.resolve(DONE);
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  /** Consumer gone: ends a pending next() and tells the driver (unless already finished). */
  private close(): void {
    if (this.closed) return;
    this.closed = true;
    this.detach();
    const w = this.waiter;
    this.waiter = null;
    w?.resolve(DONE);
    if (!this.finished) this.onClose(this);
  }

  private detach(): void {
    if (this.signal && this.onAbort) this.signal.removeEventListener('abort', this.onAbort);
  }

  private wakeWaiter(): void {
    const w = this.waiter;
    if (!w) return;
    const r = this.take();
    if (r) {
      this.waiter = null;
      w.resolve(r);
    } else if (this.failure) {
      this.waiter = null;
      this.closed = true;
      this.detach();
      w.reject(this.failure);
    }
  }

  private failNow(): Promise<never> {
    this.closed = true;
    this.detach();
    return Promise.reject(this.failure!);
  }

  /** The next item, DONE after the last one, or null when the consumer has to wait. */
  private take(): IteratorResult<GenerateItem> | null {
    if (this.closed) return DONE;
    if (this.tokens.length > 0) {
      const item: GenerateItem = { token_ids: this.tokens };
      this.tokens = [];
      if (this.cached !== undefined) {
        item.cached_tokens = this.cached;
        this.cached = undefined;
      }
      if (this.finish && !this.failure) {
        item.finish_reason = this.finish;
        this.closed = true;
        this.detach();
      }
      return { value: item, done: false };
    }
    if (this.finish) {
      // Finished without a token in this item (e.g. stop after the tokens were taken): an empty
      // final item still carries the reason.
      this.closed = true;
      this.detach();
      return { value: { token_ids: [], finish_reason: this.finish }, done: false };
    }
    return null;
  }
}
