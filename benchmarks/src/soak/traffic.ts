/**
 * Soak clients: chat completions against the frontends, one request at a time per call, each
 * ending in exactly one outcome. Streaming and unary; a stream may be dropped by its client after
 * the first chunk (`disconnected`) or a request cancelled at a random moment (`cancelled`), both on
 * purpose; anything else that is not a full answer is a failure by cause (`http 503
 * service_unavailable`, `net ECONNRESET`, `stream error ...`). A request with no outcome when its
 * deadline passes is `lost`: the one outcome that must never happen.
 */
import http from 'node:http';

export type Outcome = 'ok' | 'disconnected' | 'cancelled' | 'lost' | `failed: ${string}`;

export interface Answer {
  outcome: Outcome;
  /** Prompt tokens and the engine's cached tokens (usage), when the response carried usage. */
  promptTokens: number;
  cachedTokens: number;
  ms: number;
}

export interface Send {
  url: string;
  model: string;
  messages: unknown;
  stream: boolean;
  maxTokens: number;
  /** Stream only: drop the connection after the first chunk. */
  disconnect: boolean;
  /** Abort the request this many ms after sending (null: never). */
  cancelAfterMs: number | null;
  /** No outcome by then: `lost` (the request is aborted). */
  deadlineMs: number;
  /** Stream only: read the body at most this many bytes per second (a slow client). */
  slowBytesPerSec?: number;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 512 });

/** The OpenAI error type (or code) of an error body, else the start of the text. */
function cause(text: string): string {
  try {
    const e = (JSON.parse(text) as { error?: { type?: string; code?: string } }).error;
    if (e) return e.type ?? e.code ?? 'error';
  } catch {
    /* not JSON */
  }
  return text.slice(0, 60).replace(/\s+/g, ' ');
}

/** Usage and a stream's error event, from an SSE body or a JSON body. */
function readBody(text: string, stream: boolean): { usage: Usage | null; error: string | null } {
  if (!stream) {
    const u = (JSON.parse(text) as { usage?: Usage }).usage ?? null;
    return { usage: u, error: null };
  }
  let usage: Usage | null = null;
  let error: string | null = null;
  for (const ev of text.split('\n\n')) {
    const data = ev.split('\n').find((l) => l.startsWith('data: '));
    if (!data || data === 'data: [DONE]') continue;
    const c = JSON.parse(data.slice(6)) as {
      usage?: Usage | null;
      error?: { type?: string; message?: string };
    };
    if (c.error) error = c.error.type ?? c.error.message ?? 'error';
    if (c.usage) usage = c.usage;
  }
  return { usage, error };
}

interface Usage {
  prompt_tokens: number;
  prompt_tokens_details?: { cached_tokens?: number } | null;
}

export function send(o: Send): Promise<Answer> {
  const t0 = performance.now();
  const body = JSON.stringify({
    model: o.model,
    messages: o.messages,
    max_tokens: o.maxTokens,
    stream: o.stream,
    ...(o.stream ? { stream_options: { include_usage: true } } : {}),
  });
  return new Promise<Answer>((resolve) => {
    let done = false;
    const timers: NodeJS.Timeout[] = [];
    const finish = (outcome: Outcome, usage: Usage | null = null) => {
      if (done) return;
      done = true;
      for (const t of timers) clearTimeout(t);
      resolve({
        outcome,
        promptTokens: usage?.prompt_tokens ?? 0,
        cachedTokens: usage?.prompt_tokens_details?.cached_tokens ?? 0,
        ms: performance.now() - t0,
      });
    };
    const req = http.request(`${o.url}/v1/chat/completions`, {
      method: 'POST',
      agent,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    });
    timers.push(
      setTimeout(() => {
        finish('lost');
        req.destroy();
      }, o.deadlineMs),
    );
    if (o.cancelAfterMs !== null)
      timers.push(
        setTimeout(() => {
          finish('cancelled');
          req.destroy();
        }, o.cancelAfterMs),
      );
    req.on('error', (e: NodeJS.ErrnoException) => finish(`failed: net ${e.code ?? e.message}`));
    req.on('response', (res) => {
      const parts: Buffer[] = [];
      let first = true;
      res.on('data', (d: Buffer) => {
        parts.push(d);
        if (first && o.disconnect && res.statusCode === 200) {
          finish('disconnected');
          req.destroy();
        }
        first = false;
        if (o.slowBytesPerSec) {
          res.pause();
          timers.push(setTimeout(() => res.resume(), (1000 * d.length) / o.slowBytesPerSec));
        }
      });
      res.on('error', (e: NodeJS.ErrnoException) => finish(`failed: net ${e.code ?? e.message}`));
      res.on('end', () => {
        const text = Buffer.concat(parts).toString('utf8');
        if (res.statusCode !== 200) return finish(`failed: http ${res.statusCode} ${cause(text)}`);
        try {
          const { usage, error } = readBody(text, o.stream);
          if (error) return finish(`failed: stream error ${error}`);
          finish('ok', usage);
        } catch {
          finish('failed: unparsable response');
        }
      });
    });
    req.end(body);
  });
}
