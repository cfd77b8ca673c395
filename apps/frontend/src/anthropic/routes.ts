/**
 * Anthropic Messages API (`/v1/messages`, `/v1/messages/count_tokens`), behind `--enable-anthropic-api`.
 * A request is translated into the internal chat request (translate.ts) and served by the same
 * `InferenceService` as chat completions: template, tokenizer, router, engine, output parsers.
 * The first delta is pulled before anything is written, so routing failures keep their status;
 * later failures end the stream with an `error` event.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Express, NextFunction, Request, Response } from 'express';
import { stringifyJson } from '@kvrouter/protocols';
import { modelNotFound } from '../errors.js';
import type { ApiContext } from '../http/deps.js';
import type { AppDeps } from '../http/deps.js';
import { header, promptTail, runtimeConfigOf } from '../http/openai.js';
import { reportInternal } from '../http/internal-errors.js';
import { SseWriter } from '../http/sse.js';
import { abortOnClose, parseBody, payloadTooLarge, sendJson } from '../http/util.js';
import { ChoiceOutput, parserNames, parses } from '../openai/choices.js';
import type { ChatRequest } from '../openai/validate.js';
import type { Completion, Delta, InferenceService } from '../service.js';
import { BlockBuilder, commonPrefix, stopReason, usageOf, type StreamEvent } from './blocks.js';
import { errorEvent, sendAnthropicError } from './errors.js';
import { parseMessagesRequest, type MessagesRequest } from './translate.js';

const ENDPOINT = 'anthropic_messages';

/** JSON with lossless u64 only where needed (response `nvext` may hold bigint worker ids). */
function json(v: unknown): string {
  try {
    return JSON.stringify(v);
  } catch {
    return stringifyJson(v);
  }
}

/**
 * Tokens of the client's cached prefix (the conversation up to the last breakpoint) that the full
 * prompt shares; 0 when the prefix cannot be rendered on its own (a template that needs a user turn).
 */
async function prefixTokens(svc: InferenceService, prefix: ChatRequest, c: Completion): Promise<number> {
  if (prefix.nvext.token_data) return 0;
  try {
    return commonPrefix(await svc.tokenize(prefix, c.model, c.set.contextLength), c.tokens);
  } catch {
    return 0;
  }
}

/** `model` as named, or the base model of a LoRA adapter (whose workers serve it). */
function resolveModel(d: AppDeps, m: MessagesRequest): void {
  const r = m.chat;
  if (!d.lora || d.registry.get(r.model) !== null) return;
  const l = d.lora.resolve(r.model, d.registry);
  if (!l) return;
  r.model = l.baseModel;
  r.lora = { name: l.lora, workerIds: l.workerIds };
  if (m.cache.prefix) m.cache.prefix = { ...m.cache.prefix, model: r.model, lora: r.lora };
}

function messagesHandler(d: AppDeps) {
  const svc = d.service;
  const log = svc.o.log;
  const route = d.paths.anthropic;

  return async (req: IncomingMessage, res: ServerResponse, bodyText: unknown): Promise<void> => {
    const receivedAt = performance.now();
    const ac = abortOnClose(res);
    let m: MessagesRequest;
    let c: Completion | null = null;
    let out: ChoiceOutput;
    let first: IteratorResult<Delta, void>;
    let prefix = 0;
    let servedAs: string;
    try {
      const body = parseBody(bodyText);
      try {
        m = parseMessagesRequest(body);
      } catch (e) {
        const b = body as { model?: unknown; stream?: unknown };
        if (typeof b?.model === 'string' && b.model.length > 0)
          svc.countRejected(b.model, ENDPOINT, b.stream === true, e, receivedAt);
        throw e;
      }
      servedAs = m.chat.model;
      resolveModel(d, m);
      const r = m.chat;
      const names = parserNames(d.parsers ?? undefined, runtimeConfigOf(svc, r.model));
      // Parsers read markers that are special tokens in most vocabularies.
      if (parses(r, names)) r.skipSpecialTokens = false;
      c = await svc.start(r, {
        endpoint: ENDPOINT,
        workerHeader: header(req, 'x-worker-instance-id'),
        prefillHeader: header(req, 'x-prefill-instance-id'),
        signal: ac.signal,
        receivedAt,
      });
      const started = c;
      const tok = svc.encoderFor(c.model).tokenizer;
      out = new ChoiceOutput(
        0,
        r,
        names,
        (id) => tok.decode([id]),
        promptTail(svc, c, names),
        () => `toolu_${randomUUID().replace(/-/g, '').slice(0, 24)}`,
      );
      // The prefix is tokenized while the request is routed and prefilled.
      const p = m.cache.prefix;
      [first, prefix] = await Promise.all([
        started.deltas.next(),
        p ? prefixTokens(svc, p, started) : Promise.resolve(0),
      ]);
    } catch (e) {
      c?.abandon();
      sendAnthropicError(res, e, log, route);
      return;
    }
    if (ac.signal.aborted) {
      c.abandon();
      return;
    }
    const id = `msg_${c.id.replace(/-/g, '')}`;
    const blocks = new BlockBuilder();
    let finish: string | null = null;
    let stopSequence: string | undefined;
    /** The events of one engine delta (the prewarm answer shows nothing). */
    const events = (v: Delta): StreamEvent[] => {
      if (v.finishReason) {
        finish = v.finishReason;
        stopSequence = v.stopSequence;
      }
      if (m.prewarm) return [];
      const cd = out.chat(v.text, v.finishReason !== null);
      return cd ? blocks.push(cd) : [];
    };
    const usage = () =>
      usageOf(c.promptTokens, c.cachedTokens, prefix, m.prewarm ? 0 : c.completionTokens, m.cache.ttl);
    const ending = () => ({
      stop_reason: m.prewarm ? 'max_tokens' : stopReason(finish, stopSequence, blocks.calledTools),
      stop_sequence: stopSequence ?? null,
    });
    let unregister: (() => void) | null = null;
    try {
      if (!m.chat.stream) {
        for (let x = first; !x.done; x = await c.deltas.next()) events(x.value);
        blocks.finish();
        const msg: Record<string, unknown> = {
          id,
          type: 'message',
          role: 'assistant',
          model: servedAs,
          content: m.prewarm ? [] : blocks.content,
          ...ending(),
          usage: usage(),
        };
        const nvext = c.nvextOut();
        if (nvext) msg.nvext = nvext;
        sendJson(res, 200, json(msg));
        return;
      }
      const sse = new SseWriter(res);
      unregister = d.streams?.add(res, () => ac.abort(), errorEvent) ?? null;
      let pinged = false;
      const send = async (evs: StreamEvent[]) => {
        for (const e of evs) {
          await sse.send(json(e), e.type);
          // Anthropic's streams carry a ping after the first block opens.
          if (!pinged && e.type === 'content_block_start') {
            pinged = true;
            await sse.send('{"type":"ping"}', 'ping');
          }
        }
      };
      await send([
        {
          type: 'message_start',
          message: {
            id,
            type: 'message',
            role: 'assistant',
            model: servedAs,
            content: [],
            stop_reason: null,
            stop_sequence: null,
            usage: usage(),
          },
        },
      ]);
      for (let x = first; !x.done; x = await c.deltas.next()) await send(events(x.value));
      await send(blocks.finish());
      if (!pinged) await sse.send('{"type":"ping"}', 'ping');
      const delta: StreamEvent = { type: 'message_delta', delta: ending(), usage: usage() };
      const nvext = c.nvextOut();
      if (nvext) delta.nvext = nvext;
      await send([delta, { type: 'message_stop' }]);
      sse.done('');
    } catch (e) {
      c.abandon();
      if (ac.signal.aborted) return;
      if (!res.headersSent) {
        sendAnthropicError(res, e, log, route);
        return;
      }
      // Mid-stream failure: an error event ends the stream (what Anthropic clients expect).
      reportInternal(res, e);
      if (!res.destroyed && !res.writableEnded) res.end(errorEvent(e));
    } finally {
      unregister?.();
    }
  };
}

/** `{input_tokens}`: the prompt as `/v1/messages` would send it (chat template + the model's tokenizer). */
function countTokensHandler(d: AppDeps) {
  const svc = d.service;
  const route = `${d.paths.anthropic}/count_tokens`;
  return async (res: ServerResponse, bodyText: unknown): Promise<void> => {
    try {
      const m = parseMessagesRequest(parseBody(bodyText), true);
      resolveModel(d, m);
      const model = d.registry.get(m.chat.model);
      const set = model?.pick() ?? null;
      if (!model || !set) throw modelNotFound(m.chat.model);
      const ids = await svc.tokenize(m.chat, model.name, set.contextLength);
      sendJson(res, 200, JSON.stringify({ input_tokens: ids.length }));
    } catch (e) {
      sendAnthropicError(res, e, svc.o.log, route);
    }
  };
}

export function registerAnthropic(app: Express, ctx: ApiContext): void {
  const p = ctx.deps.paths;
  const messages = messagesHandler(ctx.deps);
  const count = countTokensHandler(ctx.deps);
  const log = ctx.deps.service.o.log;
  // Body-reader failures (413, bad encodings) in Anthropic's shape too.
  const bodyError = (route: string) => (err: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const e = err as { type?: string };
    sendAnthropicError(
      res,
      e?.type === 'entity.too.large' ? payloadTooLarge(ctx.deps.bodyLimitMb) : err,
      log,
      route,
    );
  };
  app.post(
    p.anthropic,
    ctx.body,
    (req: Request, res: Response) => void messages(req, res, req.body),
    bodyError(p.anthropic),
  );
  app.post(
    `${p.anthropic}/count_tokens`,
    ctx.body,
    (req: Request, res: Response) => void count(res, req.body),
    bodyError(`${p.anthropic}/count_tokens`),
  );
}
