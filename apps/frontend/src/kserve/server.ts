/**
 * `--kserve-grpc-server`: the KServe v2 `GRPCInferenceService` (`@grpc/grpc-js`) beside the HTTP
 * frontend, over the same `InferenceService` (model lookup, tokenizer, router, request plane,
 * migration, request metrics), plus the `--grpc-metrics-port` HTTP listener (`/metrics` from the
 * same registry, `/health`, `/live`). Errors are gRPC status codes (`grpcStatusOf`).
 */
import { createRequire } from 'node:module';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { KvrError } from '@kvrouter/protocols';
import { modelNotFound } from '../errors.js';
import type { Logger, ModelRegistry } from '../models.js';
import type { InferenceService } from '../service.js';
import {
  FINISH_REASON_OUTPUT,
  MODEL_VERSION,
  STREAMING_INPUT,
  TEXT_INPUT,
  TEXT_OUTPUT,
  checkVersion,
  inferResponse,
  invalidArgument,
  parseInfer,
} from './infer.js';
import {
  loadInferenceService,
  type ModelConfig,
  type ModelInferRequest,
  type ModelInferResponse,
  type ModelMetadataResponse,
  type ModelStreamInferResponse,
} from './proto.js';

export interface KserveOptions {
  service: InferenceService;
  registry: ModelRegistry;
  /** `--http-host` (the gRPC and metrics listeners bind there too). */
  host: string;
  /** `--kserve-grpc-port` (0 = OS-assigned). */
  port: number;
  /** `--grpc-metrics-port` (0 = OS-assigned). */
  metricsPort: number;
  /** `DYN_HTTP_BODY_LIMIT_MB`: the largest request message. */
  maxMessageMb: number;
  /** The HTTP frontend's TLS certificate and key: gRPC uses them too. */
  tls?: { cert: Buffer; key: Buffer } | null;
  /** Prometheus exposition of the frontend's registry. */
  metrics: () => Promise<{ contentType: string; body: string }>;
  /** The checks of `/health` (`healthChecks` of http/app.ts): ready = every value `ok`. */
  health: () => Promise<Record<string, string>>;
  /** False once shutdown began: new inference calls get UNAVAILABLE. */
  accepting: () => boolean;
  /** In-flight inference requests (graceful shutdown waits for the frontend's count to reach zero). */
  onInflight?: (delta: number) => void;
  paths: { metrics: string; health: string; live: string; models: string };
  log: Logger;
}

const VERSION = (createRequire(import.meta.url)('../../package.json') as { version: string }).version;
const ENDPOINT = 'completions';

/** A gRPC status from any error: `KvrError`s by their HTTP status, anything else INTERNAL. */
function grpcStatusOf(e: unknown): { code: grpc.status; details: string } {
  if (!(e instanceof KvrError)) return { code: grpc.status.INTERNAL, details: 'internal error' };
  const s = e.status;
  const code =
    s === 400 || s === 413 || s === 422
      ? grpc.status.INVALID_ARGUMENT
      : s === 404
        ? grpc.status.NOT_FOUND
        : s === 429
          ? grpc.status.RESOURCE_EXHAUSTED
          : s === 499
            ? grpc.status.CANCELLED
            : s === 501
              ? grpc.status.UNIMPLEMENTED
              : s === 503
                ? grpc.status.UNAVAILABLE
                : s === 504
                  ? grpc.status.DEADLINE_EXCEEDED
                  : grpc.status.INTERNAL;
  return { code, details: e.message };
}

/** A client-supplied name as an error message echoes it (a client can send a huge one). */
const shown = (s: string): string => (s.length > 256 ? `${s.slice(0, 256)}…` : s);

type Unary<Req, Res> = grpc.handleUnaryCall<Req, Res>;

export class KserveServer {
  private readonly calls = new Set<AbortController>();
  private closing: Promise<void> | null = null;

  private constructor(
    private readonly o: KserveOptions,
    private readonly grpcServer: grpc.Server,
    /** The bound gRPC port. */
    readonly port: number,
    private readonly metricsServer: http.Server,
  ) {}

  get metricsPort(): number {
    return (this.metricsServer.address() as AddressInfo).port;
  }

  static async start(o: KserveOptions): Promise<KserveServer> {
    const metricsServer = http.createServer((req, res) => void metricsListener(o, req, res));
    await new Promise<void>((resolve, reject) => {
      metricsServer.once('error', (e) =>
        reject(new Error(`--grpc-metrics-port ${o.metricsPort}: ${(e as Error).message}`)),
      );
      metricsServer.listen(o.metricsPort, o.host, () => resolve());
    });
    // The HTTP body limit bounds a request message too (grpc-js answers RESOURCE_EXHAUSTED above it).
    const server = new grpc.Server({ 'grpc.max_receive_message_length': o.maxMessageMb * 1024 * 1024 });
    const ref: { k: KserveServer | null } = { k: null };
    server.addService(loadInferenceService().service, {
      ServerLive: ((_call, cb) => cb(null, { live: true })) satisfies Unary<object, { live: boolean }>,
      ServerReady: ((_call, cb) => {
        o.health().then(
          (checks) => cb(null, { ready: Object.values(checks).every((v) => v === 'ok') }),
          (e: unknown) => cb(grpcStatusOf(e)),
        );
      }) satisfies Unary<object, { ready: boolean }>,
      ModelReady: ((call, cb) => {
        const { name, version } = call.request;
        const ready =
          o.accepting() &&
          (version === '' || version === MODEL_VERSION) &&
          (o.registry.get(name)?.sets.some((s) => s.readyCount > 0 && s.initialized) ?? false);
        cb(null, { ready });
      }) satisfies Unary<{ name: string; version: string }, { ready: boolean }>,
      ServerMetadata: ((_call, cb) =>
        cb(null, {
          name: 'kvrouter',
          version: VERSION,
          extensions: ['model_configuration', 'parameters'],
        })) satisfies Unary<object, { name: string; version: string; extensions: string[] }>,
      ModelMetadata: ((call, cb) => {
        try {
          const { name, version } = call.request;
          servedModel(o, name, version);
          cb(null, modelMetadata(name));
        } catch (e) {
          cb(grpcStatusOf(e));
        }
      }) satisfies Unary<{ name: string; version: string }, ModelMetadataResponse>,
      ModelConfig: ((call, cb) => {
        try {
          const { name, version } = call.request;
          const m = servedModel(o, name, version);
          const set = m.sets.find((s) => s.readyCount > 0) ?? m.sets[0];
          cb(null, { config: modelConfig(name, set) });
        } catch (e) {
          cb(grpcStatusOf(e));
        }
      }) satisfies Unary<{ name: string; version: string }, { config: ModelConfig }>,
      ModelInfer: ((call, cb) => {
        void ref.k!.unary(call, cb);
      }) satisfies Unary<ModelInferRequest, ModelInferResponse>,
      ModelStreamInfer: ((call) => {
        ref.k!.stream(call);
      }) satisfies grpc.handleBidiStreamingCall<ModelInferRequest, ModelStreamInferResponse>,
    });
    const addr = o.host.includes(':') ? `[${o.host}]:${o.port}` : `${o.host}:${o.port}`;
    const creds = o.tls
      ? grpc.ServerCredentials.createSsl(null, [{ cert_chain: o.tls.cert, private_key: o.tls.key }], false)
      : grpc.ServerCredentials.createInsecure();
    let port: number;
    try {
      port = await new Promise<number>((resolve, reject) =>
        server.bindAsync(addr, creds, (err, p) =>
          err ? reject(new Error(`--kserve-grpc-port ${o.port}: ${err.message}`)) : resolve(p),
        ),
      );
    } catch (e) {
      server.forceShutdown();
      await new Promise((r) => metricsServer.close(r));
      throw e;
    }
    ref.k = new KserveServer(o, server, port, metricsServer);
    return ref.k;
  }

  /**
   * Stops both listeners. The frontend's graceful period already waited for in-flight requests (they
   * count in its in-flight total); what still runs is cancelled: its generation stops, its booking is
   * freed, and the client gets its error status.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      for (const ac of this.calls) ac.abort();
      // Answers already given still have to leave: a graceful shutdown first, forced after 1 s.
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          this.grpcServer.forceShutdown();
          resolve();
        }, 1000);
        this.grpcServer.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      });
      this.metricsServer.closeAllConnections();
      await new Promise((r) => this.metricsServer.close(r));
    })();
    return this.closing;
  }

  /**
   * One request: validated, started (model, tokenizer, context check), then its deltas, folded into
   * one response (`streaming` false) or one response per delta. The last response carries the usage
   * as int64 parameters (`prompt_tokens`, `completion_tokens`, `cached_tokens`); with `streaming`
   * every response carries `triton_final_response` (Triton's decoupled-model marker).
   */
  private async *generate(
    req: ModelInferRequest,
    signal: AbortSignal,
    allowStreaming: boolean,
  ): AsyncGenerator<ModelInferResponse, void, undefined> {
    const receivedAt = performance.now();
    const o = this.o;
    const svc = o.service;
    const name = req.model_name ?? '';
    if (!o.accepting()) throw new KvrError('shutting_down', 'the frontend is shutting down', 503);
    const unknown = () => o.registry.get(name) === null;
    let parsed: ReturnType<typeof parseInfer> | null = null;
    try {
      if (unknown()) {
        if (o.registry.models.has(name))
          throw new KvrError('no_eligible_workers', `model ${shown(name)} has no ready worker`, 503);
        throw modelNotFound(name);
      }
      checkVersion(name, req.model_version ?? '');
      parsed = parseInfer(req);
      if (parsed.streaming && !allowStreaming)
        throw invalidArgument(
          STREAMING_INPUT,
          'ModelInfer answers with one response; use ModelStreamInfer for streaming',
        );
    } catch (e) {
      // Counted as the HTTP path counts a rejected body that names its model.
      if (name !== '') svc.countRejected(name, ENDPOINT, parsed?.streaming ?? false, e, receivedAt);
      throw e;
    }
    const c = await svc.start(parsed.request, { endpoint: ENDPOINT, signal, receivedAt });
    const out = { model: name, id: req.id ?? '', outputs: parsed.outputs };
    const usage = (): ModelInferResponse['parameters'] => ({
      prompt_tokens: { int64_param: c.promptTokens },
      completion_tokens: { int64_param: c.completionTokens },
      cached_tokens: { int64_param: c.cachedTokens },
    });
    let done = false;
    try {
      let text = '';
      for await (const d of c.deltas) {
        const finish = d.finishReason ?? '';
        if (!parsed.streaming) {
          text += d.text;
          if (finish) {
            done = true;
            yield inferResponse(out, text, finish, usage());
            return;
          }
        } else if (d.text.length > 0 || finish) {
          if (finish) done = true;
          yield inferResponse(out, d.text, finish, {
            triton_final_response: { bool_param: finish !== '' },
            ...(finish ? usage() : {}),
          });
          if (finish) return;
        }
      }
      done = true;
      if (!parsed.streaming) yield inferResponse(out, text, 'stop', usage());
    } finally {
      if (!done) c.abandon();
    }
  }

  /** Runs `f` as one in-flight request whose signal aborts on `cancel` or at `close`. */
  private async track<T>(
    onCancel: (f: () => void) => void,
    f: (signal: AbortSignal) => Promise<T>,
  ): Promise<T> {
    const ac = new AbortController();
    onCancel(() => ac.abort());
    this.calls.add(ac);
    this.o.onInflight?.(1);
    try {
      return await f(ac.signal);
    } finally {
      this.calls.delete(ac);
      this.o.onInflight?.(-1);
    }
  }

  private async unary(
    call: grpc.ServerUnaryCall<ModelInferRequest, ModelInferResponse>,
    cb: grpc.sendUnaryData<ModelInferResponse>,
  ): Promise<void> {
    try {
      const res = await this.track(
        (f) => call.once('cancelled', f),
        async (signal) => {
          let last: ModelInferResponse | null = null;
          for await (const r of this.generate(call.request, signal, false)) last = r;
          return last!;
        },
      );
      cb(null, res);
    } catch (e) {
      cb(this.statusOf(e));
    }
  }

  /**
   * `ModelStreamInfer`: every request on the stream runs at once (responses carry the request's
   * `id`). A request that fails before its first response ends the stream with that error's status
   * (as Dynamo); one that fails later gets a response with `error_message` and the stream goes on.
   * The stream ends (OK) once the client half-closed and every request finished.
   */
  private stream(call: grpc.ServerDuplexStream<ModelInferRequest, ModelStreamInferResponse>): void {
    let active = 0;
    let clientDone = false;
    let ended = false;
    const cancels = new Set<() => void>();
    const finish = (status?: { code: grpc.status; details: string }) => {
      if (ended) return;
      ended = true;
      for (const c of cancels) c();
      if (status) call.emit('error', status);
      else call.end();
    };
    const write = (m: ModelStreamInferResponse): Promise<void> =>
      ended
        ? Promise.resolve()
        : new Promise<void>((resolve) => {
            if (call.write(m)) return resolve();
            // A full buffer: wait for it to drain, or for the call to end (then nothing drains).
            const done = () => {
              for (const ev of ['drain', 'cancelled', 'close', 'error']) call.off(ev, done);
              resolve();
            };
            for (const ev of ['drain', 'cancelled', 'close', 'error']) call.on(ev, done);
          });
    call.on('cancelled', () => {
      ended = true;
      for (const c of cancels) c();
    });
    call.on('data', (req: ModelInferRequest) => {
      if (ended) return;
      active++;
      let cancel: (() => void) | null = null;
      void this.track(
        (f) => cancels.add((cancel = f)),
        async (signal) => {
          let sent = 0;
          try {
            for await (const r of this.generate(req, signal, true)) {
              if (ended) return;
              await write({ error_message: '', infer_response: r });
              sent++;
            }
          } catch (e) {
            if (ended) return;
            const s = this.statusOf(e);
            if (sent === 0) finish(s);
            else await write({ error_message: s.details, infer_response: null });
          }
        },
      ).finally(() => {
        if (cancel) cancels.delete(cancel);
        active--;
        if (clientDone && active === 0) finish();
      });
    });
    call.on('end', () => {
      clientDone = true;
      if (active === 0) finish();
    });
    call.on('error', () => finish());
  }

  /** The status a failed request answers with; internal errors are logged once. */
  private statusOf(e: unknown): { code: grpc.status; details: string } {
    if (!(e instanceof KvrError))
      this.o.log.error(`kserve: internal error: ${(e as Error)?.stack ?? String(e)}`);
    // Cut by close() after the graceful period.
    if (this.closing && e instanceof KvrError && e.code === 'cancelled')
      return { code: grpc.status.UNAVAILABLE, details: 'the frontend shut down before the request finished' };
    return grpcStatusOf(e);
  }
}

function servedModel(o: KserveOptions, name: string, version: string) {
  const m = o.registry.get(name);
  if (!m) throw modelNotFound(name);
  checkVersion(name, version);
  return m;
}

/** What Dynamo's KServe frontend reports for a completions model. */
function modelMetadata(name: string): ModelMetadataResponse {
  return {
    name,
    versions: [MODEL_VERSION],
    platform: 'dynamo',
    inputs: [
      { name: TEXT_INPUT, datatype: 'BYTES', shape: [1] },
      { name: STREAMING_INPUT, datatype: 'BOOL', shape: [1] },
    ],
    outputs: [
      { name: TEXT_OUTPUT, datatype: 'BYTES', shape: [-1] },
      { name: FINISH_REASON_OUTPUT, datatype: 'BYTES', shape: [-1] },
    ],
  };
}

/** Triton's model configuration of a completions model, with the card's limits as parameters. */
function modelConfig(
  name: string,
  set: { contextLength: number; blockSize: number } | undefined,
): ModelConfig {
  return {
    name,
    platform: 'dynamo',
    backend: 'dynamo',
    max_batch_size: 0,
    input: [
      { name: TEXT_INPUT, data_type: 'TYPE_STRING', dims: [1] },
      { name: STREAMING_INPUT, data_type: 'TYPE_BOOL', dims: [1], optional: true },
    ],
    output: [
      { name: TEXT_OUTPUT, data_type: 'TYPE_STRING', dims: [-1] },
      { name: FINISH_REASON_OUTPUT, data_type: 'TYPE_STRING', dims: [-1] },
    ],
    parameters: set
      ? {
          context_length: { string_value: String(set.contextLength) },
          kv_cache_block_size: { string_value: String(set.blockSize) },
        }
      : {},
  };
}

/** The `--grpc-metrics-port` listener: metrics, health (503 when a check fails), live, models; else 404. */
async function metricsListener(
  o: KserveOptions,
  req: http.IncomingMessage,
  res: http.ServerResponse,
): Promise<void> {
  const path = (req.url ?? '/').split('?')[0];
  const json = (status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  try {
    if (req.method !== 'GET' && req.method !== 'HEAD')
      return json(405, {
        error: { message: `${req.method} is not allowed here`, code: 'method_not_allowed' },
      });
    if (path === o.paths.metrics) {
      const m = await o.metrics();
      res.writeHead(200, { 'content-type': m.contentType });
      res.end(m.body);
    } else if (path === o.paths.health) {
      const checks = await o.health();
      const reasons = Object.values(checks).filter((r) => r !== 'ok');
      json(reasons.length === 0 ? 200 : 503, {
        status: reasons.length === 0 ? 'healthy' : 'unhealthy',
        reasons,
        checks,
      });
    } else if (path === o.paths.live) json(200, { status: 'live', message: 'the gRPC service serves' });
    // Dynamo's gRPC metrics service lists the models too.
    else if (path === o.paths.models)
      json(200, {
        object: 'list',
        data: o.registry
          .list()
          .map((m) => ({ id: m.id, object: 'model', created: m.created, owned_by: 'kvrouter' })),
      });
    else json(404, { error: { message: `no route ${path} on the gRPC metrics port`, code: 'not_found' } });
  } catch (e) {
    o.log.error(`kserve metrics port: ${(e as Error)?.stack ?? String(e)}`);
    if (!res.headersSent) json(500, { error: { message: 'internal error', code: 'internal' } });
    else res.destroy();
  }
}
