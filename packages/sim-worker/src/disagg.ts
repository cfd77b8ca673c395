/**
 * Disaggregated prefill / decode workers (PROTOCOL §14, §17 `--disaggregation-mode`).
 *
 * - prefill: every request runs through the engine with `max_tokens = 1`; after its single token
 *   the worker waits the modelled KV transfer, `isl × kv_bytes_per_token / bandwidth` (divided by
 *   the engine's speedup ratio like every other simulated duration), and sends the token with
 *   `disaggregated_params` (who holds the KV, how big it is, how long the transfer took, the
 *   bootstrap endpoint and the worker's topology).
 * - decode: a request carrying `disagg` (those parameters) is enqueued with `kvTransferred`, so the
 *   engine allocates the prompt's blocks as received (Stored events as usual) and pays no prefill;
 *   a request without it is served aggregated (the frontend's `--decode-fallback`).
 * - agg: `disagg` is refused, as before.
 *
 * Bootstrap (simplification): a prefill worker advertises `--bootstrap-ports` as
 * `runtime_config.disaggregated_endpoint = {host, port}` and repeats it in the parameters; nothing
 * listens there. The decode worker "meets" its peer through the parameters the frontend forwards,
 * and the frontend always runs prefill to completion before dispatching decode.
 */
import { KvrError, u64ToHex, type Clock, type WorkerId } from '@kvrouter/protocols';
import { waitForPrefillPeer, type BootstrapServer, type RoomResult } from './bootstrap.js';
import { applyExtras } from './extras.js';
import type { EngineDriver } from './driver.js';
import {
  parseDisaggParams,
  parseGenerateRequest,
  type DisaggregatedParams,
  type GenerateItem,
} from '@kvrouter/protocols';

export type DisaggregationMode = 'agg' | 'prefill' | 'decode';

export interface SimDisaggOptions {
  mode: DisaggregationMode;
  /** KV bytes per prompt token (`layers · 2 · kv_heads · head_dim · dtype_bytes`, or `--kv-bytes-per-token`). */
  kvBytesPerToken: number;
  /** `--kv-transfer-bandwidth` in GB/s (1 GB = 1e9 bytes). Default 64. */
  bandwidthGBps?: number;
  /** Prefill workers: the advertised bootstrap endpoint (set per worker by `SimFleet` from `bootstrapPorts`). */
  bootstrap?: { host: string; port: number } | null;
  /** `--bootstrap-ports`: worker i of a fleet gets `ports[i]`, or `ports[0] + i` when one port is given. */
  bootstrapPorts?: readonly number[] | null;
  /** Host advertised with the bootstrap port; default `127.0.0.1`. */
  bootstrapHost?: string;
}

/** Worker `i`'s options: its bootstrap endpoint out of the fleet's port list. */
export function disaggForWorker(o: SimDisaggOptions, i: number): SimDisaggOptions {
  const ports = o.bootstrapPorts;
  if (o.mode !== 'prefill' || !ports || ports.length === 0) return o;
  // A single 0 = every worker gets an OS-assigned port (tests); else base + i.
  const port = ports.length === 1 ? (ports[0] === 0 ? 0 : ports[0]! + i) : ports[i];
  if (port === undefined || port > 65535)
    throw new KvrError(
      'invalid_argument',
      `bootstrapPorts: no port for worker ${i} (${ports.length} given)`,
      400,
      { field: 'bootstrapPorts' },
    );
  return { ...o, bootstrap: { host: o.bootstrapHost ?? '127.0.0.1', port } };
}

/** Default KV bytes per token when nothing else says: Qwen3-0.6B (28 layers · 2 · 8 KV heads · 128 head dim · 2 bytes). */
export const DEFAULT_KV_BYTES_PER_TOKEN = 28 * 2 * 8 * 128 * 2;

/** §17: `layers · 2 · kv_heads · head_dim · dtype_bytes`. */
export function kvBytesPerToken(m: {
  layers: number;
  kvHeads: number;
  headDim: number;
  dtypeBytes: number;
}): number {
  for (const [k, v] of Object.entries(m))
    if (!Number.isInteger(v) || v < 1)
      throw new KvrError(
        'invalid_argument',
        `kv bytes per token: ${k} must be an integer >= 1, got ${v}`,
        400,
        { field: k },
      );
  return m.layers * 2 * m.kvHeads * m.headDim * m.dtypeBytes;
}

/**
 * Bytes per KV element for `--kv-cache-dtype`: `auto` follows the model's dtype (`torch_dtype`,
 * 2 bytes unless float32); fp8 variants 1; fp16 / bf16 2; fp32 4.
 */
export function kvDtypeBytes(kvCacheDtype: string, modelDtype?: string | null): number {
  const d = kvCacheDtype.trim().toLowerCase();
  if (d === 'auto') return modelDtype === 'float32' ? 4 : 2;
  if (d.startsWith('fp8') || d === 'int8') return 1;
  if (d === 'fp16' || d === 'float16' || d === 'half' || d === 'bf16' || d === 'bfloat16') return 2;
  if (d === 'fp32' || d === 'float32' || d === 'float') return 4;
  throw new KvrError(
    'invalid_argument',
    `--kv-cache-dtype: unknown dtype "${kvCacheDtype}" (auto, fp8, fp8_e4m3, fp8_e5m2, fp16, bf16, fp32)`,
    400,
    {
      field: '--kv-cache-dtype',
    },
  );
}

/** `isl × bytes / bandwidth`, in ms of model time divided by the speedup ratio. */
export function kvTransferMs(
  isl: number,
  bytesPerToken: number,
  bandwidthGBps: number,
  speedupRatio = 1,
): number {
  return (((isl * bytesPerToken) / (bandwidthGBps * 1e9)) * 1000) / speedupRatio;
}

export interface DisaggHandlerInfo {
  workerId: WorkerId;
  clock: Clock;
  speedupRatio: number;
  /** Prefill workers with a bootstrap port: each request's room is completed there when its transfer is done. */
  bootstrap?: BootstrapServer | null;
  /** Decode workers: how long to wait for a bootstrap room (default 30 s). */
  bootstrapTimeoutMs?: number;
  topologyDomains?: Record<string, string>;
  kvTransferDomain?: string | null;
}

/** The `generate` handler of a worker in `opts.mode`. */
export function disaggGenerateHandler(
  driver: EngineDriver,
  opts: SimDisaggOptions | null,
  info: DisaggHandlerInfo,
): (payload: unknown, ctx: { signal: AbortSignal }) => AsyncIterableIterator<GenerateItem> {
  const mode = opts?.mode ?? 'agg';
  const bandwidth = opts?.bandwidthGBps ?? 64;
  if (opts && mode !== 'agg') {
    if (!(bandwidth > 0) || !Number.isFinite(bandwidth))
      throw new KvrError(
        'invalid_argument',
        `bandwidthGBps: must be a finite number > 0, got ${bandwidth}`,
        400,
        { field: 'bandwidthGBps' },
      );
    if (!(opts.kvBytesPerToken >= 1))
      throw new KvrError(
        'invalid_argument',
        `kvBytesPerToken: must be >= 1, got ${opts.kvBytesPerToken}`,
        400,
        { field: 'kvBytesPerToken' },
      );
  }
  return (payload, ctx) => {
    const p = payload as Record<string, unknown> | null;
    const raw = p && typeof p === 'object' ? p.disagg : undefined;
    if (mode === 'agg' || (mode === 'prefill' && raw != null)) {
      if (raw != null)
        throw new KvrError(
          'not_supported',
          `generate disagg: this worker is ${mode === 'agg' ? 'aggregated' : 'a prefill worker'}; transfer parameters go to decode workers`,
          400,
          { field: 'disagg' },
        );
      if (mode === 'agg') {
        const r = parseGenerateRequest(payload);
        return applyExtras(driver.submit(r, ctx.signal), r);
      }
    }
    const req = parseGenerateRequest(raw == null ? payload : { ...p, disagg: undefined });
    if (mode === 'decode') {
      if (raw == null) return driver.submit(req, ctx.signal);
      const dp = parseDisaggParams(raw);
      if (dp.bootstrap_room == null) return driver.submit({ ...req, kvTransferred: true }, ctx.signal);
      const ready = waitForPrefillPeer({
        host: dp.bootstrap_host!,
        port: dp.bootstrap_port!,
        room: dp.bootstrap_room,
        signal: ctx.signal,
        timeoutMs: info.bootstrapTimeoutMs,
      });
      return new DeferredStream(ready.then(() => driver.submit({ ...req, kvTransferred: true }, ctx.signal)));
    }
    // prefill
    const isl = req.tokenIds.length;
    const ms = kvTransferMs(isl, opts!.kvBytesPerToken, bandwidth, info.speedupRatio);
    const params: DisaggregatedParams = {
      prefill_worker_id: u64ToHex(info.workerId),
      prefill_dp_rank: req.dpRank,
      prompt_tokens: isl,
      kv_bytes: isl * opts!.kvBytesPerToken,
      transfer_ms: ms,
      // Where a decode worker could meet this worker; no room: the request is finished when this item arrives.
      ...(info.bootstrap ? { bootstrap_host: info.bootstrap.host, bootstrap_port: info.bootstrap.port } : {}),
      ...(info.topologyDomains ? { topology_domains: info.topologyDomains } : {}),
      ...(info.kvTransferDomain != null ? { kv_transfer_domain: info.kvTransferDomain } : {}),
    };
    const inner = driver.submit({ ...req, maxTokens: 1, stopTokenIds: null }, ctx.signal);
    const b = info.bootstrap;
    const room = b ? (r: RoomResult) => b.complete(req.requestId, r) : null;
    return new PrefillStream(inner, ms, params, info.clock, ctx.signal, room);
  };
}

/**
 * The prefill worker's stream: the engine's single item, held back for the transfer time, then
 * sent as the last item with `disaggregated_params`. Abort (client gone, shutdown) during the wait
 * ends it at once.
 */
class PrefillStream implements AsyncIterableIterator<GenerateItem> {
  private done = false;
  private timer: unknown = null;
  private wake: (() => void) | null = null;

  constructor(
    private readonly inner: AsyncIterableIterator<GenerateItem>,
    private readonly delayMs: number,
    private readonly params: DisaggregatedParams,
    private readonly clock: Clock,
    private readonly signal: AbortSignal,
    /** This request's bootstrap room: completed when the token goes out, failed when the stream ends without it. */
    private readonly room: ((r: RoomResult) => void) | null,
  ) {}

  async next(): Promise<IteratorResult<GenerateItem>> {
    if (this.done) return { value: undefined, done: true };
    let first: GenerateItem | null = null;
    const tokens: number[] = [];
    for (;;) {
      let r: IteratorResult<GenerateItem>;
      try {
        r = await this.inner.next();
      } catch (e) {
        this.room?.({ ok: false, error: e instanceof Error ? e.message : String(e) });
        throw e;
      }
      if (r.done) break;
      first ??= r.value;
      for (const t of r.value.token_ids) tokens.push(t);
      if (r.value.finish_reason !== undefined) break;
    }
    if (first === null || this.signal.aborted) return this.finish();
    if (this.delayMs > 0) {
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        this.timer = this.clock.setTimeout(resolve, this.delayMs);
        this.signal.addEventListener('abort', () => resolve(), { once: true });
      });
      this.timer = null;
      this.wake = null;
      if (this.signal.aborted || this.done) return this.finish();
    }
    this.done = true;
    this.room?.({ ok: true, transfer_ms: this.delayMs });
    const item: GenerateItem = {
      token_ids: tokens,
      finish_reason: 'length',
      disaggregated_params: this.params,
    };
    if (first.cached_tokens !== undefined) item.cached_tokens = first.cached_tokens;
    return { value: item, done: false };
  }

  return(): Promise<IteratorResult<GenerateItem>> {
    void this.inner.return?.();
    return Promise.resolve(this.finish());
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  private finish(): IteratorResult<GenerateItem> {
    if (!this.done)
      this.room?.({ ok: false, error: 'prefill ended without its token (cancelled or shut down)' });
    this.done = true;
    if (this.timer !== null) this.clock.clearTimeout(this.timer);
    this.timer = null;
    const w = this.wake;
    this.wake = null;
    w?.();
    return { value: undefined, done: true };
  }
}

/**
 * A decode stream that starts once its prefill peer is ready: items come from the driver's stream
 * after `ready` resolves; a failed wait fails the first `next()`; `return()` before that cancels
 * the wait's request as soon as it would start.
 */
class DeferredStream implements AsyncIterableIterator<GenerateItem> {
  private inner: AsyncIterableIterator<GenerateItem> | null = null;
  private closed = false;

  constructor(private readonly ready: Promise<AsyncIterableIterator<GenerateItem>>) {
    // A wait nobody pulls any more must not surface as an unhandled rejection.
    ready.catch(() => undefined);
  }

  async next(): Promise<IteratorResult<GenerateItem>> {
    if (this.closed) return { value: undefined, done: true };
    this.inner ??= await this.ready;
    if (this.closed) {
      void this.inner.return?.();
      return { value: undefined, done: true };
    }
    return this.inner.next();
  }

  return(): Promise<IteratorResult<GenerateItem>> {
    this.closed = true;
    if (this.inner) void this.inner.return?.();
    else
      void this.ready.then(
        (s) => s.return?.(),
        () => undefined,
      );
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): this {
    return this;
  }
}
