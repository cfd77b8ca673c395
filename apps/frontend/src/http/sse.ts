/** Server-sent events in OpenAI's framing: `data: <json>\n\n` per chunk, `data: [DONE]\n\n` last. */
import type { ServerResponse } from 'node:http';

export class SseWriter {
  private started = false;
  private corked = false;
  private readonly uncork = () => {
    this.corked = false;
    if (!this.res.destroyed) this.res.uncork();
  };

  constructor(private readonly res: ServerResponse) {}

  private start(): void {
    if (this.started || this.res.headersSent) return;
    this.started = true;
    this.res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
  }

  /**
   * Writes one event; resolves when the socket can take more (backpressure for slow clients).
   * Events written in one turn of the event loop (the role chunk and the first delta, the last
   * delta, usage and `[DONE]`, tokens that arrived together) leave in one socket write: the
   * response stays corked until the loop's check phase.
   */
  send(json: string, event?: string): Promise<void> | void {
    this.start();
    // Ended elsewhere (cut at shutdown): nothing more may be written.
    if (this.res.destroyed || this.res.writableEnded) return;
    if (!this.corked) {
      this.corked = true;
      this.res.cork();
      setImmediate(this.uncork);
    }
    // A named event (`event: <name>`) for APIs that type their events (Anthropic Messages).
    if (!this.res.write(event === undefined ? `data: ${json}\n\n` : `event: ${event}\ndata: ${json}\n\n`)) {
      return new Promise<void>((resolve) => {
        const done = () => {
          this.res.off('drain', done);
          this.res.off('close', done);
          resolve();
        };
        this.res.on('drain', done);
        this.res.on('close', done);
      });
    }
  }

  /** Ends the stream with `last` (OpenAI's `[DONE]` unless given; Anthropic streams end without one). */
  done(last = 'data: [DONE]\n\n'): void {
    this.start();
    // end() flushes a corked response.
    if (!this.res.destroyed && !this.res.writableEnded) this.res.end(last);
  }
}
