/**
 * OpenAI Responses API (`POST /v1/responses`, `GET /v1/responses/{id}`) on the chat pipeline: the
 * body becomes a chat request (`translate.ts`), is served by `InferenceService` like chat (same
 * routing, template, parsers for reasoning and tool calls), and the chat deltas become Responses
 * output items and stream events (`builder.ts`). `previous_response_id` continues a stored
 * conversation (`store.ts`, `--responses-store-size` / `--responses-store-ttl-secs`).
 *
 * Streaming: OpenAI's framing, `event: <type>` + `data: <json>` (the JSON carries `type` and
 * `sequence_number` too): `response.created`, `response.in_progress`, item / part / delta events,
 * `response.completed` or `response.incomplete`, and the stream ends (no `[DONE]`). A failure after
 * the first event is `event: error` with `{type: "error", code, message, param}`.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Express } from 'express';
import { KvrError } from '@kvrouter/protocols';
import { toOpenAiError } from '../errors.js';
import type { ApiContext } from '../http/deps.js';
import type { AppDeps } from '../http/deps.js';
import { reportInternal } from '../http/internal-errors.js';
import { header, promptTail, runtimeConfigOf } from '../http/openai.js';
import { SseWriter } from '../http/sse.js';
import { abortOnClose, parseBody, sendError, sendJson } from '../http/util.js';
import { ChoiceOutput, parserNames, parses, tokenTextOf } from '../openai/choices.js';
import { parseChatRequest } from '../openai/validate.js';
import { ResponseBuilder } from './builder.js';
import { ResponseStore } from './store.js';
import { translateResponses, type ChatBodyMessage, type ResponsesParams } from './translate.js';

type Obj = Record<string, unknown>;

/** Defaults of `--responses-store-size` / `--responses-store-ttl-secs` when the app is built without them. */
const DEFAULT_STORE = { size: 1000, ttlSecs: 3600 };

const hexId = (prefix: string): string => `${prefix}${randomBytes(16).toString('hex')}`;

function previousNotFound(id: string): KvrError {
  const shown = id.length > 256 ? `${id.slice(0, 256)}…` : id;
  return new KvrError(
    'previous_response_not_found',
    `Previous response with id '${shown}' not found (unknown, expired, evicted from the store, or created with store: false).`,
    404,
    { field: 'previous_response_id' },
  );
}

interface Usage {
  prompt: number;
  cached: number;
  completion: number;
  reasoning: number;
}

function responseObject(
  id: string,
  createdAt: number,
  p: ResponsesParams,
  status: 'in_progress' | 'completed' | 'incomplete',
  output: Obj[],
  usage: Usage | null,
): Obj {
  return {
    id,
    object: 'response',
    created_at: createdAt,
    status,
    background: false,
    error: null,
    incomplete_details: status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
    instructions: p.instructions,
    max_output_tokens: p.maxOutputTokens,
    model: p.model,
    output,
    parallel_tool_calls: p.parallelToolCalls,
    previous_response_id: p.previousResponseId,
    reasoning: p.reasoning ?? { effort: null, summary: null },
    store: p.store,
    temperature: p.temperature ?? 1,
    text: { format: p.textFormat },
    tool_choice: p.toolChoice,
    tools: p.tools,
    top_p: p.topP ?? 1,
    truncation: p.truncation,
    usage: usage && {
      input_tokens: usage.prompt,
      input_tokens_details: { cached_tokens: usage.cached },
      output_tokens: usage.completion,
      output_tokens_details: { reasoning_tokens: usage.reasoning },
      total_tokens: usage.prompt + usage.completion,
    },
    user: p.user,
    metadata: p.metadata,
  };
}

/** The output of a response as the chat messages the next turn shows the model. */
function outputAsChat(b: ResponseBuilder): ChatBodyMessage[] {
  if (b.text.length === 0 && b.calls.length === 0) return [{ role: 'assistant', content: '' }];
  const m: ChatBodyMessage = {
    role: 'assistant',
    content: b.text.trim() === '' && b.calls.length > 0 ? null : b.text,
  };
  if (b.calls.length > 0)
    m.tool_calls = b.calls.map((c) => ({
      id: c.call_id,
      type: 'function',
      function: { name: c.name, arguments: c.arguments },
    }));
  return [m];
}

function responsesHandler(
  d: AppDeps,
  store: ResponseStore,
): (req: IncomingMessage, res: ServerResponse, bodyText: unknown) => Promise<void> {
  const svc = d.service;
  const endpoint = 'responses';
  return async (req, res, bodyText) => {
    const receivedAt = performance.now();
    const ac = abortOnClose(res);
    let unregister: (() => void) | null = null;
    let completion: Awaited<ReturnType<typeof svc.start>> | null = null;
    let builder: ResponseBuilder | null = null;
    try {
      const body = parseBody(bodyText);
      let t: ReturnType<typeof translateResponses>;
      let r: ReturnType<typeof parseChatRequest>;
      let prior: ChatBodyMessage[] = [];
      try {
        t = translateResponses(body);
        if (t.params.previousResponseId !== null) {
          const prev = store.get(t.params.previousResponseId);
          if (!prev) throw previousNotFound(t.params.previousResponseId);
          prior = prev.conversation;
        }
        const messages: ChatBodyMessage[] = [
          ...(t.params.instructions !== null ? [{ role: 'system', content: t.params.instructions }] : []),
          ...prior,
          ...t.input,
        ];
        if (messages.length === 0)
          throw new KvrError('invalid_request', 'input: must not be empty', 400, { field: 'input' });
        r = parseChatRequest({ ...t.chat, model: t.params.model, messages, stream: t.params.stream });
      } catch (e) {
        const b = body as { model?: unknown; stream?: unknown };
        if (typeof b?.model === 'string' && b.model.length > 0)
          svc.countRejected(b.model, endpoint, b.stream === true, e, receivedAt);
        throw e;
      }
      const p = t.params;
      if (d.lora && svc.o.registry.get(r.model) === null) {
        const l = d.lora.resolve(r.model, svc.o.registry);
        if (l) {
          r.model = l.baseModel;
          r.lora = { name: l.lora, workerIds: l.workerIds };
        }
      }
      const names = parserNames(d.parsers ?? undefined, runtimeConfigOf(svc, r.model));
      if (parses(r, names) && !('skip_special_tokens' in (body as object))) r.skipSpecialTokens = false;
      const c = await svc.start(r, {
        endpoint,
        workerHeader: header(req, 'x-worker-instance-id'),
        prefillHeader: header(req, 'x-prefill-instance-id'),
        signal: ac.signal,
        receivedAt,
      });
      completion = c;
      const out = new ChoiceOutput(
        0,
        r,
        names,
        tokenTextOf(svc.encoderFor(c.model).tokenizer),
        promptTail(svc, c, names),
        () => hexId('call_').slice(0, 29),
      );
      // Pulled before anything is written: routing failures keep their HTTP status.
      let next = await c.deltas.next();
      if (ac.signal.aborted) {
        c.abandon();
        return;
      }
      const id = `resp_${randomUUID().replace(/-/g, '')}`;
      const createdAt = c.created;
      const b = new ResponseBuilder(hexId);
      builder = b;
      const usage: Usage = { prompt: c.promptTokens, cached: 0, completion: 0, reasoning: 0 };
      const sse = p.stream ? new SseWriter(res) : null;
      if (sse) {
        // Cut at the end of the shutdown grace period: Responses' own error event.
        unregister =
          d.streams?.add(
            res,
            () => ac.abort(),
            (err) => errorFrame(b, err),
          ) ?? null;
        for (const e of b.start(responseObject(id, createdAt, p, 'in_progress', [], null)))
          await sse.send(JSON.stringify(e), e.type as string);
      }
      let finish: string | null = null;
      for (; !next.done; next = await c.deltas.next()) {
        const v = next.value;
        const delta = out.chat(v.text, v.finishReason !== null);
        if (v.finishReason) finish = v.finishReason;
        if (delta?.reasoning_content && !delta.content && !delta.tool_calls)
          usage.reasoning += v.tokenIds.length;
        if (!delta) continue;
        const evs = b.delta(delta);
        if (sse) for (const e of evs) await sse.send(JSON.stringify(e), e.type as string);
      }
      const tail = b.finish();
      if (sse) for (const e of tail) await sse.send(JSON.stringify(e), e.type as string);
      usage.cached = c.cachedTokens;
      usage.completion = c.completionTokens;
      const status = finish === 'length' ? 'incomplete' : 'completed';
      const final = responseObject(id, createdAt, p, status, b.output, usage);
      if (p.store)
        store.put(id, { conversation: [...prior, ...t.input, ...outputAsChat(b)], response: final });
      if (sse) {
        const last = b.end(final);
        await sse.send(JSON.stringify(last), last.type as string);
        // OpenAI's Responses streams end after the final event (no `[DONE]`).
        sse.done('');
      } else sendJson(res, 200, JSON.stringify(final));
    } catch (e) {
      completion?.abandon();
      if (ac.signal.aborted) return;
      if (!res.headersSent) {
        sendError(res, e);
        return;
      }
      // Mid-stream failure: an `error` event, then the end of the stream.
      reportInternal(res, e);
      if (!res.destroyed && !res.writableEnded && builder) res.end(errorFrame(builder, e));
    } finally {
      unregister?.();
    }
  };
}

/** `event: error` with `{type: "error", code, message, param, sequence_number}` (OpenAI's error event). */
function errorFrame(b: ResponseBuilder, err: unknown): string {
  const { body } = toOpenAiError(err);
  const ev = b.error(String(body.error.code), body.error.message, body.error.param ?? null);
  return `event: error\ndata: ${JSON.stringify(ev)}\n\n`;
}

export function registerResponses(app: Express, ctx: ApiContext): void {
  const cfg = ctx.deps.responsesStore ?? DEFAULT_STORE;
  const store = new ResponseStore(cfg.size, cfg.ttlSecs);
  ctx.deps.tables?.register('responses_store', () => ({ entries: store.count, limit: cfg.size }));
  const h = responsesHandler(ctx.deps, store);
  const path = ctx.deps.paths.responses;
  app.post(path, ctx.body, (req, res) => h(req, res, req.body));
  // A stored response by id (404 when unknown, expired, evicted or not stored).
  app.get(`${path}/:id`, (req, res) => {
    const id = String((req.params as { id?: string }).id ?? '');
    const s = store.get(id);
    if (!s) {
      const msg = `No response with id '${id.slice(0, 256)}' is stored.`;
      sendError(res, new KvrError('not_found', msg, 404, { field: 'response_id' }));
      return;
    }
    sendJson(res, 200, JSON.stringify(s.response));
  });
}
