/**
 * One inference request from validated body to text deltas, independent of HTTP (the interactive
 * chat uses it too): model lookup, chat template, tokenization, routing, dispatch over the request
 * plane, migration when a worker dies, detokenization with stop strings, and the router's
 * lifecycle calls (first token → MarkPrefillCompleted, end / error / disconnect → Free).
 */
import { randomUUID } from 'node:crypto';
import { KvrError, isQueryOnly, u64ToHex, type WorkerWithDpRank } from '@kvrouter/protocols';
import {
  RequestLifecycleMetrics,
  errorTypeOf,
  type FrontendMetricSet,
  type RequestTracker,
} from '@kvrouter/metrics';
import type { RoutingDecision, TokensPrefix } from '@kvrouter/router';
import { isMigratable, type RequestClient } from '@kvrouter/runtime';
import type { GenerateItem, GenerateRequest } from '@kvrouter/protocols';
import { refuseIfCannotFit } from './context-bound.js';
import { runPrefillLeg } from './disagg.js';
import { badRequest, modelNotFound } from './errors.js';
import type { Logger, ModelRegistry, WorkerSet } from './models.js';
import { detokenizerFor, engineFields, mmHashesFor, stopExtras } from './openai/engine.js';
import type { InferenceRequest } from './openai/validate.js';
import { speculativePrefill, withSpeculativePrefill } from './speculative.js';
import { DecodeStream } from './tokenizer/detok.js';
import type { PromptEncoder } from './tokenizer/encoder.js';
import type { ModelTokenizers } from './tokenizer/per-model.js';
import type { ChatTemplate } from './tokenizer/template.js';
import type { EncodeStats } from './tokenizer/types.js';

export type FinishReason = 'stop' | 'length';

export interface Delta {
  text: string;
  tokenIds: number[];
  /** Set on the last delta. */
  finishReason: FinishReason | null;
  /** The request's stop string that ended the text (set with finishReason `stop`). */
  stopSequence?: string;
  /** The engine item these tokens came from (logprobs). */
  item?: GenerateItem;
}

export interface ServiceOptions {
  registry: ModelRegistry;
  client: RequestClient;
  encoder: PromptEncoder;
  template: ChatTemplate;
  /** One tokenizer + template per served model, from its card (null: `encoder`/`template` for all). */
  tokenizers?: ModelTokenizers | null;
  metrics: FrontendMetricSet;
  /** `--migration-limit` (0 = off unless the card sets one). */
  migrationLimit: number;
  /** `--migration-max-seq-len` (null = no limit). */
  migrationMaxSeqLen: number | null;
  log: Logger;
  /** `--dyn-debug-perf`: one info line per request with its stage times (`perfLine`). */
  debugPerf?: boolean;
}

export interface RequestContext {
  /** `chat_completions` | `completions` (metrics label). */
  endpoint: string;
  /** Header `x-worker-instance-id`. */
  workerHeader?: string;
  /** Header `x-prefill-instance-id`. */
  prefillHeader?: string;
  /** Aborted when the client goes away. */
  signal: AbortSignal;
  /** `performance.now()` at arrival. */
  receivedAt?: number;
}

export interface Timing {
  request_received_ms: number;
  preprocess_ms: number;
  route_ms: number;
  /** Arrival → dispatch over the request plane (the frontend's own added latency before the engine). */
  dispatch_ms: number;
  ttft_ms: number | null;
  total_ms: number | null;
  /** Dispatch → last item from the worker (the engine's share of the request, transport included). */
  engine_ms: number | null;
  migrations: number;
}

const ms3 = (x: number): number => Math.round(x * 1000) / 1000;

/** Min of the non-zero limits (§14: "the smaller non-zero value wins"); 0 = off. */
export function migrationBudget(flag: number, card: number): number {
  if (flag > 0 && card > 0) return Math.min(flag, card);
  return Math.max(flag, card, 0);
}

export class Completion {
  readonly id: string;
  readonly created = Math.floor(Date.now() / 1000);
  readonly promptTokens: number;
  /** Set once routed. */
  decision: RoutingDecision | null = null;
  worker: WorkerWithDpRank | null = null;
  /** Disaggregated serving: the prefill worker of the last attempt. */
  prefillWorker: WorkerWithDpRank | null = null;
  /** Engine-reported prefix hit (first item), else the router's prediction. */
  cachedTokens = 0;
  /** Names of the prompt's cached prefixes (chat, fastokens): the router reuses the earlier turn's block hashes. */
  tokensPrefix: TokensPrefix | null = null;
  completionTokens = 0;
  readonly timing: Timing;
  private readonly t0: number;
  readonly queryOnly: boolean;
  readonly deltas: AsyncGenerator<Delta, void, undefined>;
  private started = false;
  /** Arrival → routing decided (ms), for `--dyn-debug-perf`. */
  private routedMs: number | null = null;

  constructor(
    readonly req: InferenceRequest,
    readonly model: string,
    readonly set: WorkerSet,
    readonly tokens: Uint32Array,
    private readonly maxTokens: number | null,
    private readonly svc: InferenceService,
    private readonly ctx: RequestContext,
    readonly tracker: RequestTracker,
    t0: number,
    preprocessMs: number,
  ) {
    this.id = randomUUID();
    this.promptTokens = tokens.length;
    this.t0 = t0;
    this.timing = {
      request_received_ms: Date.now() - Math.round(performance.now() - t0),
      preprocess_ms: ms3(preprocessMs),
      route_ms: 0,
      dispatch_ms: 0,
      ttft_ms: null,
      total_ms: null,
      engine_ms: null,
      migrations: 0,
    };
    this.queryOnly = isQueryOnly(req.nvext);
    // nvext.agent_hints.speculative_prefill (chat): the finished turn warms the next one (speculative.ts).
    this.deltas =
      req.kind === 'chat' && req.nvext.agent_hints?.speculative_prefill === true && !this.queryOnly
        ? withSpeculativePrefill(this.run(), (text) => void speculativePrefill(svc.o, this, text))
        : this.run();
  }

  /** Response `nvext` per `extra_fields` (and always for query-only requests), or undefined. */
  nvextOut(): Record<string, unknown> | undefined {
    const want = new Set(this.req.nvext.extra_fields ?? []);
    const out: Record<string, unknown> = {};
    const w = this.worker;
    if ((want.has('worker_id') || this.queryOnly) && w)
      // Aggregated serving: one worker did both phases.
      out.worker_id = {
        prefill_worker_id: (this.prefillWorker ?? w).worker_id,
        prefill_dp_rank: (this.prefillWorker ?? w).dp_rank,
        decode_worker_id: w.worker_id,
        decode_dp_rank: w.dp_rank,
      };
    if (want.has('timing')) out.timing = this.timing;
    if (this.queryOnly) out.token_data = Array.from(this.tokens);
    return Object.keys(out).length > 0 ? out : undefined;
  }

  /** The response is abandoned before its first pull (client gone): the request still has to end. */
  abandon(): void {
    if (!this.started) {
      this.started = true;
      this.tracker.disconnected();
    }
    void this.deltas.return();
  }

  private async *run(): AsyncGenerator<Delta, void, undefined> {
    this.started = true;
    const svc = this.svc;
    const set = this.set;
    const router = set.router;
    const signal = this.ctx.signal;
    const req = this.req;
    const detok = new DecodeStream(detokenizerFor(req, svc.encoderFor(this.model).tokenizer));
    const stops = req.stop;
    const maxStop = stops.reduce((m, s) => Math.max(m, s.length), 0);
    let held = '';
    const generated: number[] = [];
    const budget = migrationBudget(svc.o.migrationLimit, set.migrationLimit);
    let migrations = 0;
    // Re-dispatches of attempts that never reached their worker (issue 18); not migrations.
    let unsent = 0;
    let finished: FinishReason | null = null;
    let error: unknown = null;
    const tracker = this.tracker;
    const stopIds = req.ignoreEos
      ? req.stopTokenIds
      : [...req.stopTokenIds, ...svc.encoderFor(this.model).tokenizer.eosTokenIds];
    try {
      for (;;) {
        const prompt = generated.length === 0 ? this.tokens : concat(this.tokens, generated);
        const tRoute = performance.now();
        const disagg = svc.o.registry.models.get(this.model)?.disagg;
        const leg = disagg
          ? await runPrefillLeg({
              ...{
                state: disagg,
                decodeSet: set,
                requestId: this.id,
                model: this.model,
                tokens: prompt,
                nvext: req.nvext,
              },
              ...{
                prefillHeader: this.ctx.prefillHeader,
                signal,
                client: svc.o.client,
                registry: svc.o.metrics.registry,
                log: svc.o.log,
              },
              onTransferSeconds: (s) => tracker.observeKvTransferEstimate(s),
            })
          : null;
        this.prefillWorker = leg?.prefill ?? null;
        const d = await router.route({
          requestId: this.id,
          tokens: prompt,
          nvext: leg?.nvext ?? req.nvext,
          pinHeader: this.ctx.workerHeader,
          signal,
          ...(this.tokensPrefix !== null ? { tokensPrefix: this.tokensPrefix } : {}),
          ...mmHashesFor(req, prompt, set.blockSize, svc.encoderFor(this.model).tokenizer),
          ...(leg ? { overrides: leg.overrides, constraints: leg.constraints } : {}),
        });
        leg?.decodeRouted(d);
        const routedAt = performance.now();
        if (migrations === 0) {
          this.timing.route_ms = ms3(routedAt - tRoute);
          this.routedMs = ms3(routedAt - this.t0);
          svc.o.metrics.frontend.observeStage('route', (routedAt - tRoute) / 1000);
          this.decision = d;
          this.cachedTokens = d.cachedTokens;
          tracker.routed(
            { workerId: d.workerId, dpRank: d.dpRank, kvHitRate: d.kvHitRate, cachedTokens: d.cachedTokens },
            { isl: this.promptTokens },
          );
        }
        this.worker = d.worker;
        if (d.queryOnly) return;
        let prefillDone = false;
        let gotItems = false;
        try {
          const transport = set.transportOf(d.workerId);
          if (!transport)
            throw new KvrError('cannot_connect', `worker ${d.workerId} has no known transport`, 503);
          const payload: GenerateRequest = {
            request_id: this.id,
            model: this.model,
            token_ids: prompt,
            dp_rank: d.dpRank,
            stop_conditions: {
              // Unset = the worker's default (kvrouter's embedded workers stop at 128 tokens);
              // the context length bounds it either way.
              max_tokens: this.maxTokens === null ? null : this.maxTokens - generated.length,
              stop_token_ids: stopIds,
              ignore_eos: req.ignoreEos,
              ...stopExtras(req),
            },
            sampling_options: { ...req.sampling },
            ...engineFields(req),
            ...(req.nvext.agent_hints?.priority !== undefined
              ? { priority: req.nvext.agent_hints.priority }
              : {}),
            ...(leg?.disagg ? { disagg: leg.disagg } : {}),
          };
          const dispatchedAt = performance.now();
          if (migrations === 0) {
            this.timing.dispatch_ms = ms3(dispatchedAt - this.t0);
            svc.o.metrics.frontend.observeStage('dispatch', (dispatchedAt - routedAt) / 1000);
          }
          // The client's signal cancels the worker's stream when the client goes away; leaving the
          // loop early (stop string, error, abandoned response) cancels it too: the request plane
          // sends a cancel when the iterator is closed. No controller of our own per attempt (an
          // AbortController and the DOMException of its abort() cost more than routing here).
          const stream = svc.o.client.stream<GenerateItem>(transport, 'generate', payload, { signal });
          for await (const item of stream) {
            gotItems = true;
            const ids = item.token_ids;
            if (ids.length > 0 && !prefillDone) {
              prefillDone = true;
              router.markPrefillCompleted(this.id);
              if (this.timing.ttft_ms === null) this.timing.ttft_ms = ms3(performance.now() - this.t0);
              if (migrations === 0 && typeof item.cached_tokens === 'number') {
                this.cachedTokens = item.cached_tokens;
                tracker.observeCachedTokens(item.cached_tokens);
                // Truth check (issue 19): the index's prediction vs the engine (aggregated serving).
                if (!this.prefillWorker) router.observeEngineCached(d, item.cached_tokens, prompt.length);
              }
            }
            if (ids.length > 0) {
              for (const t of ids) generated.push(t);
              this.completionTokens = generated.length;
              router.onOutputTokens(this.id, generated.length);
              tracker.tokens(ids.length);
            }
            let text = detok.push(ids);
            let reason: FinishReason | null = null;
            if (item.finish_reason === 'length') reason = 'length';
            else if (item.finish_reason === 'stop') reason = 'stop';
            else if (item.finish_reason === 'error')
              throw new KvrError('engine_error', 'the engine failed the request', 502);
            else if (item.finish_reason === 'cancelled')
              throw new KvrError('cancelled', 'the engine cancelled the request', 499);
            if (reason) text += detok.flush();
            if (maxStop > 0) {
              held += text;
              const cut = firstStop(held, stops);
              if (cut >= 0) {
                finished = 'stop';
                const stopSequence = stops.find((st) => held.startsWith(st, cut));
                yield { text: held.slice(0, cut), tokenIds: ids, finishReason: 'stop', item, stopSequence };
                return;
              }
              // Hold back what could still become a stop string.
              const keep = reason ? 0 : Math.min(held.length, maxStop - 1);
              text = held.slice(0, held.length - keep);
              held = held.slice(held.length - keep);
            }
            if (reason) {
              finished = reason;
              const end = performance.now();
              this.timing.total_ms = ms3(end - this.t0);
              this.timing.engine_ms = ms3(end - this.t0 - this.timing.dispatch_ms);
              yield { text, tokenIds: ids, finishReason: reason, item };
              return;
            }
            if (text.length > 0 || ids.length > 0) yield { text, tokenIds: ids, finishReason: null, item };
          }
          // A stream that ends without a finish reason ended normally (e.g. a foreign engine).
          finished = this.maxTokens !== null && generated.length >= this.maxTokens ? 'length' : 'stop';
          const tail = detok.flush() + held;
          yield { text: tail, tokenIds: [], finishReason: finished };
          return;
        } catch (e) {
          if (signal.aborted) throw new KvrError('cancelled', 'client disconnected', 499);
          const code = (e as KvrError).code;
          if (code === 'cannot_connect' || code === 'disconnected' || code === 'connection_timeout')
            set.markDown(d.workerId);
          // Nothing was sent (the connection failed before the request left): another worker can
          // serve it whatever --migration-limit says; the dead one just left the candidate set.
          if (code === 'cannot_connect' && !gotItems && unsent < set.workers.size) {
            unsent++;
            svc.o.log.warn(
              `request ${this.id}: worker ${d.workerId} unreachable before dispatch; routing again`,
            );
            continue;
          }
          if (!isMigratable(e) || migrations >= budget) throw e;
          const seqLen = this.tokens.length + generated.length;
          if (svc.o.migrationMaxSeqLen !== null && seqLen > svc.o.migrationMaxSeqLen) {
            svc.o.metrics.frontend.migrationMaxSeqLenExceeded(this.model);
            throw e;
          }
          migrations++;
          this.timing.migrations = migrations;
          svc.o.metrics.frontend.migration(
            this.model,
            gotItems || generated.length > 0 ? 'ongoing_request' : 'new_request',
          );
          svc.o.log.warn(
            `request ${this.id}: worker ${d.workerId} failed (${(e as KvrError).code}); migrating with ${generated.length} tokens (${migrations}/${budget})`,
          );
        } finally {
          router.free(this.id);
        }
      }
    } catch (e) {
      error = e;
      throw e;
    } finally {
      this.timing.total_ms = ms3(performance.now() - this.t0);
      if (finished || this.queryOnly) tracker.end('');
      else if (signal.aborted) tracker.disconnected();
      else if (error) tracker.end(errorTypeOf(error));
      else tracker.disconnected();
      if (svc.o.debugPerf)
        svc.o.log.info(
          perfLine(this, this.ctx.endpoint, this.routedMs, {
            outcome:
              finished ??
              (this.queryOnly
                ? 'query_only'
                : signal.aborted
                  ? 'disconnected'
                  : error
                    ? ((error as KvrError).code ?? 'error')
                    : 'disconnected'),
          }),
        );
    }
  }
}

/**
 * `--dyn-debug-perf`: the request's stages as offsets from its arrival, in ms —
 * received → tokenized (template + tokenizer) → routed (decision) → first token → done.
 */
function perfLine(c: Completion, endpoint: string, routedMs: number | null, o: { outcome: string }): string {
  const t = c.timing;
  const at = (v: number | null) => (v === null ? '-' : `${v} ms`);
  const w = c.worker;
  return (
    `debug-perf request ${c.id} (${endpoint}, model ${c.model}): received 0 ms → tokenized ${at(t.preprocess_ms)} → ` +
    `routed ${at(routedMs)} → first token ${at(t.ttft_ms)} → done ${at(t.total_ms)}; ` +
    `route ${t.route_ms} ms, ${c.promptTokens} prompt tokens, ${c.completionTokens} output tokens, ` +
    `overlap ${c.decision?.overlapBlocks ?? 0} blocks, worker ${w ? u64ToHex(w.worker_id) : '-'}, ` +
    `migrations ${t.migrations}, outcome ${o.outcome}`
  );
}

function firstStop(text: string, stops: readonly string[]): number {
  let best = -1;
  for (const s of stops) {
    const i = text.indexOf(s);
    if (i >= 0 && (best < 0 || i < best)) best = i;
  }
  return best;
}

function concat(a: Uint32Array, b: readonly number[]): Uint32Array {
  const out = new Uint32Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

export class InferenceService {
  /** Requests that fail before a worker set is chosen (unknown model, invalid body) count here. */
  private readonly unrouted: RequestLifecycleMetrics;

  constructor(readonly o: ServiceOptions) {
    this.unrouted = new RequestLifecycleMetrics({
      frontend: o.metrics.frontend,
      workers: o.metrics.workers,
      // Client-supplied names of models nobody serves count under one label (issue 17).
      knownModel: (m) => o.registry.get(m) !== null,
    });
  }

  /** Counts a request rejected before `start` could (bad body with a model name, unknown model). */
  countRejected(
    model: string,
    endpoint: string,
    stream: boolean,
    err: unknown,
    at: number = performance.now(),
  ): void {
    this.unrouted
      .start({ model, endpoint, requestType: stream ? 'stream' : 'unary' }, at)
      .end(errorTypeOf(err));
  }

  get encoder(): PromptEncoder {
    return this.o.encoder;
  }

  /** The encoder (and tokenizer) of `model`: its card's, else the default. */
  encoderFor(model: string): PromptEncoder {
    return this.o.tokenizers?.peek(model).encoder ?? this.o.encoder;
  }

  /**
   * Everything that can fail with a status before a response starts: model lookup, chat template,
   * tokenization, context-length check. Routing happens on the first pull of `deltas`.
   */
  async start(req: InferenceRequest, ctx: RequestContext): Promise<Completion> {
    const t0 = ctx.receivedAt ?? performance.now();
    const model = this.o.registry.get(req.model);
    const set = model?.pick() ?? null;
    if (!model || !set) {
      // A model whose workers only embed or draw (card model_type) is the wrong kind, not missing.
      const kinds = [...new Set(model?.sets.flatMap((s) => s.modelTypes) ?? [])];
      const e =
        model && kinds.length > 0 && !model.sets.some((s) => s.generates)
          ? badRequest(
              'model',
              `model: ${model.name} does not generate text (its workers' cards declare model_type [${kinds.join(', ')}])`,
            )
          : modelNotFound(req.model);
      this.countRejected(req.model, ctx.endpoint, req.stream, e, t0);
      throw e;
    }
    if (!set.initialized) {
      const e = new KvrError(
        'model_not_ready',
        `model ${model.name} is waiting for --router-min-initial-workers workers (${set.readyCount} ready)`,
        503,
        { error_type: 'overload' },
      );
      this.countRejected(model.name, ctx.endpoint, req.stream, e, t0);
      throw e;
    }
    const tracker = set.lifecycle.start(
      { model: model.name, endpoint: ctx.endpoint, requestType: req.stream ? 'stream' : 'unary' },
      t0,
    );
    try {
      // `stats.prefix`: the prefix-cache entries a chat prompt's ids extend, for the router.
      const stats: EncodeStats = { tokenizedChars: 0, offloaded: false };
      const tokens = await this.tokenize(req, model.name, set.contextLength, ctx.signal, stats);
      if (tokens.length === 0)
        throw badRequest(
          req.kind === 'chat' ? 'messages' : 'prompt',
          'the prompt is empty after tokenization',
        );
      const ctxLen = set.contextLength;
      if (tokens.length >= ctxLen)
        throw badRequest(
          req.kind === 'chat' ? 'messages' : 'prompt',
          `This model's maximum context length is ${ctxLen} tokens. However, your prompt has ${tokens.length} tokens.`,
        );
      if (req.maxTokens !== null && tokens.length + req.maxTokens > ctxLen)
        throw badRequest(
          'max_tokens',
          `This model's maximum context length is ${ctxLen} tokens. However, you requested ${tokens.length + req.maxTokens} tokens (${tokens.length} in the messages, ${req.maxTokens} in the completion). Please reduce the length of the messages or completion.`,
        );
      const pre = performance.now() - t0;
      this.o.metrics.frontend.observeStage('preprocess', pre / 1000);
      const c = new Completion(req, model.name, set, tokens, req.maxTokens, this, ctx, tracker, t0, pre);
      c.tokensPrefix = stats.prefix ?? null;
      return c;
    } catch (e) {
      tracker.end(errorTypeOf(e));
      throw e;
    }
  }

  /**
   * The prompt's token ids (chat template + the model's tokenizer; `nvext.token_data` as given).
   * `contextLength`: a text that cannot fit is refused before it is tokenized (issue 17). Public for
   * the Anthropic API's `count_tokens` and cache-breakpoint prefix. `signal`: the client's (a long
   * chat prompt still waiting for a tokenizer thread leaves the queue when it aborts).
   */
  async tokenize(
    req: InferenceRequest,
    model: string,
    contextLength: number,
    signal?: AbortSignal,
    stats?: EncodeStats,
  ): Promise<Uint32Array> {
    if (req.nvext.token_data) return req.nvext.token_data;
    const t = performance.now();
    const mt = this.o.tokenizers ? await this.o.tokenizers.for(model) : null;
    const encoder = mt?.encoder ?? this.o.encoder;
    let ids: Uint32Array;
    if (req.kind === 'chat') {
      // Render, refuse what cannot fit, tokenize (long conversations on a tokenizer thread).
      ids = await encoder.encodeChat(
        mt?.template ?? this.o.template,
        req.messages,
        {
          addGenerationPrompt: req.addGenerationPrompt,
          continueFinalMessage: req.continueFinalMessage,
          ...(req.documents ? { documents: req.documents } : {}),
          ...(req.tools ? { tools: req.tools } : {}),
          ...(req.toolChoice !== undefined ? { toolChoice: req.toolChoice } : {}),
          ...(req.templateKwargs ? { kwargs: req.templateKwargs } : {}),
        },
        contextLength,
        stats,
        signal,
      );
    } else if (req.promptTokens) return req.promptTokens;
    else {
      refuseIfCannotFit(req.prompt ?? '', encoder.tokenizer, contextLength, 'prompt');
      const body = await encoder.encode(req.prompt ?? '');
      const bos = encoder.tokenizer.bosTokenIds;
      ids = bos.length === 0 ? body : concat(Uint32Array.from(bos), Array.from(body));
    }
    this.o.metrics.frontend.observeTokenizer('tokenize', performance.now() - t);
    return ids;
  }
}
