/**
 * Online replay: the trace sent to a running frontend over HTTP in real time. Each row becomes a
 * streaming chat completion carrying the synthesized prompt as `nvext.token_data` and
 * `max_tokens = output_length` with EOS ignored; TTFT, ITL and end-to-end latency are measured on
 * the client. Session turns start when the previous turn has ended plus its `delay` (§18).
 * The end-to-end test against a live frontend belongs to the frontend issue.
 */
import { KvrError } from '@kvrouter/protocols';
import { TokenSynth, type RequestColumns, type RunData, type TraceRow } from '@kvrouter/sim';

export interface OnlineOptions {
  /** Frontend base URL, e.g. http://127.0.0.1:8000. */
  url: string;
  /** Model name; default: the first model of GET /v1/models. */
  model?: string;
  traceBlockSize: number;
  vocabSize?: number;
  arrivalSpeedupRatio: number;
  /** Injected for tests; default the global fetch. */
  fetchImpl?: typeof fetch;
  now?: () => number;
  onProgress?: (done: number, total: number, elapsedMs: number) => void;
}

export interface StreamStats {
  /** ms from request start to the first chunk carrying output. */
  firstTokenMs: number;
  endMs: number;
  /** Output tokens: usage.completion_tokens when sent, else the number of output chunks. */
  tokens: number;
  cachedTokens: number | null;
}

interface Chunk {
  choices?: {
    delta?: { content?: string | null; token_ids?: number[] };
    text?: string;
    finish_reason?: string | null;
  }[];
  usage?: { completion_tokens?: number; prompt_tokens_details?: { cached_tokens?: number } | null } | null;
  error?: { message?: string };
}

/**
 * Reads an OpenAI-style SSE stream (`data: {...}` events, `data: [DONE]` at the end).
 * Times are taken with `now` when each event is parsed.
 */
export async function readStream(
  body: AsyncIterable<Uint8Array>,
  now: () => number,
  start: number,
): Promise<StreamStats> {
  const dec = new TextDecoder();
  let buf = '';
  let first = NaN;
  let chunks = 0;
  let usageTokens: number | undefined;
  let cached: number | null = null;
  let done = false;
  const onData = (data: string): void => {
    if (data === '[DONE]') {
      done = true;
      return;
    }
    const c = JSON.parse(data) as Chunk;
    if (c.error)
      throw new KvrError(
        'stream_error',
        `server error in stream: ${c.error.message ?? JSON.stringify(c.error)}`,
        502,
      );
    const ch = c.choices?.[0];
    const out =
      ch &&
      ((ch.delta?.content ?? '') !== '' || (ch.delta?.token_ids?.length ?? 0) > 0 || (ch.text ?? '') !== '');
    if (out) {
      if (Number.isNaN(first)) first = now() - start;
      chunks++;
    }
    if (c.usage) {
      if (typeof c.usage.completion_tokens === 'number') usageTokens = c.usage.completion_tokens;
      const ct = c.usage.prompt_tokens_details?.cached_tokens;
      if (typeof ct === 'number') cached = ct;
    }
  };
  for await (const piece of body) {
    buf += dec.decode(piece, { stream: true });
    let i: number;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const event = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const data = event
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).trimStart())
        .join('\n');
      if (data !== '') onData(data);
    }
  }
  if (buf.trim().startsWith('data:')) onData(buf.trim().slice(5).trimStart());
  if (!done && chunks === 0) throw new KvrError('stream_error', 'stream ended without output', 502);
  return { firstTokenMs: first, endMs: now() - start, tokens: usageTokens ?? chunks, cachedTokens: cached };
}

async function firstModel(url: string, f: typeof fetch): Promise<string> {
  const res = await f(`${url}/v1/models`);
  if (!res.ok) throw new KvrError('online_error', `GET /v1/models: HTTP ${res.status}`, 502);
  const body = (await res.json()) as { data?: { id?: string }[] };
  const id = body.data?.[0]?.id;
  if (typeof id !== 'string')
    throw new KvrError('online_error', 'GET /v1/models returned no model; pass --model', 502);
  return id;
}

/** Replays `rows` against the frontend; resolves when every request has ended. */
export async function runOnline(rows: readonly TraceRow[], opts: OnlineOptions): Promise<RunData> {
  const f = opts.fetchImpl ?? fetch;
  const now = opts.now ?? (() => performance.now());
  const base = opts.url.replace(/\/+$/, '');
  const model = opts.model ?? (await firstModel(base, f));
  const synth = new TokenSynth({ traceBlockSize: opts.traceBlockSize, vocabSize: opts.vocabSize });
  const n = rows.length;
  const cols: RequestColumns = {
    arrival: new Float64Array(n).fill(NaN),
    routed: new Float64Array(n).fill(NaN),
    firstToken: new Float64Array(n).fill(NaN),
    finish: new Float64Array(n).fill(NaN),
    isl: new Int32Array(n),
    tokens: new Int32Array(n),
    cachedTokens: new Int32Array(n),
    routerOverlapBlocks: new Int32Array(n),
    unit: new Int32Array(n).fill(-1),
    status: new Uint8Array(n),
  };
  const rejections: RunData['rejections'] = {};
  const ratio = opts.arrivalSpeedupRatio;
  const nextTurn = new Int32Array(n).fill(-1);
  const first = new Uint8Array(n).fill(1);
  const last = new Map<string, number>();
  let t0 = Infinity;
  for (let k = 0; k < n; k++) {
    const r = rows[k]!;
    t0 = Math.min(t0, r.timestamp);
    if (r.session_id === undefined) continue;
    const p = last.get(r.session_id);
    if (p !== undefined) {
      nextTurn[p] = k;
      first[k] = 0;
    }
    last.set(r.session_id, k);
  }
  const start = now();
  let done = 0;
  let finishAll!: () => void;
  const allDone = new Promise<void>((res) => (finishAll = res));
  if (n === 0) finishAll();

  const send = async (k: number): Promise<void> => {
    const row = rows[k]!;
    const t = now();
    cols.arrival[k] = t - start;
    cols.isl[k] = row.input_length;
    const tokens = synth.promptTokens(row);
    try {
      const res = await f(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model,
          messages: [{ role: 'user', content: '' }],
          stream: true,
          stream_options: { include_usage: true },
          max_tokens: row.output_length,
          min_tokens: row.output_length,
          ignore_eos: true,
          nvext: { token_data: Array.from(tokens), ignore_eos: true },
        }),
      });
      if (!res.ok || !res.body) {
        const text = await res.text().catch(() => '');
        throw new KvrError('http_error', `HTTP ${res.status}: ${text.slice(0, 200)}`, res.status);
      }
      const s = await readStream(res.body as unknown as AsyncIterable<Uint8Array>, now, t);
      cols.firstToken[k] = cols.arrival[k]! + s.firstTokenMs;
      cols.finish[k] = cols.arrival[k]! + s.endMs;
      cols.tokens[k] = s.tokens;
      cols.cachedTokens[k] = s.cachedTokens ?? 0;
      cols.status[k] = 1;
    } catch (e) {
      const code = e instanceof KvrError ? e.code : 'network_error';
      (rejections[code] ??= { count: 0, example: e instanceof Error ? e.message : String(e) }).count++;
      cols.status[k] = 2;
      cols.finish[k] = now() - start;
    }
    done++;
    opts.onProgress?.(done, n, now() - start);
    const nk = nextTurn[k]!;
    if (nk >= 0) {
      const due = Math.max(
        (rows[nk]!.timestamp - t0) / ratio,
        now() - start + (rows[nk]!.delay ?? 0) / ratio,
      );
      schedule(nk, due);
    }
    if (done === n) finishAll();
  };

  const schedule = (k: number, dueMs: number): void => {
    const wait = Math.max(0, dueMs - (now() - start));
    setTimeout(() => void send(k), wait);
  };

  // First turns: one timer walks the arrival order so a long trace does not hold thousands of timers.
  const firsts = [...Array(n).keys()]
    .filter((k) => first[k])
    .sort((a, b) => rows[a]!.timestamp - rows[b]!.timestamp || a - b);
  let cursor = 0;
  const pump = (): void => {
    const elapsed = now() - start;
    while (cursor < firsts.length && (rows[firsts[cursor]!]!.timestamp - t0) / ratio <= elapsed)
      void send(firsts[cursor++]!);
    if (cursor < firsts.length) {
      setTimeout(pump, Math.max(0, (rows[firsts[cursor]!]!.timestamp - t0) / ratio - (now() - start)));
    }
  };
  pump();
  await allDone;
  const anyCached = cols.cachedTokens.some((x) => x > 0);
  return {
    policy: 'online',
    config: {
      url: base,
      model,
      traceBlockSize: opts.traceBlockSize,
      arrivalSpeedupRatio: ratio,
      cachedTokensReported: anyCached,
    },
    requests: cols,
    blockSize: 0,
    rejections,
    units: null,
  };
}
