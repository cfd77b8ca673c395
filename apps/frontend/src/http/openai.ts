/**
 * Chat completions and completions over HTTP: body → validated request → `InferenceService` →
 * SSE chunks or one JSON response, in the OpenAI shapes (usage with
 * `prompt_tokens_details.cached_tokens`, `stream_options.include_usage`, response `nvext`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { stringifyJson } from '@kvrouter/protocols';
import { toOpenAiError } from '../errors.js';
import { parseChatRequest, parseCompletionRequest, type InferenceRequest } from '../openai/validate.js';
import type { Completion, InferenceService } from '../service.js';
import { SseWriter } from './sse.js';
import { parseBody, sendError, sendJson } from './util.js';

type Kind = 'chat' | 'completions';

function usageOf(c: Completion) {
  return {
    prompt_tokens: c.promptTokens,
    completion_tokens: c.completionTokens,
    total_tokens: c.promptTokens + c.completionTokens,
    prompt_tokens_details: { cached_tokens: c.cachedTokens },
  };
}

/**
 * JSON with lossless u64 only where needed: response `nvext` may carry worker ids as bigints, which
 * the native writer refuses (TypeError), and only then the slower lossless writer runs.
 */
function json(v: Record<string, unknown>): string {
  if (v.nvext === undefined) return JSON.stringify(v);
  try {
    return JSON.stringify(v);
  } catch {
    return stringifyJson(v);
  }
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return typeof v === 'string' ? v : undefined;
}

/** Handles one request whose body text was read already (plain node objects: no express in the hot path). */
export type CompletionsHandler = (
  req: IncomingMessage,
  res: ServerResponse,
  bodyText: unknown,
) => Promise<void>;

export function completionsHandler(svc: InferenceService, kind: Kind): CompletionsHandler {
  const endpoint = kind === 'chat' ? 'chat_completions' : 'completions';
  const object = kind === 'chat' ? 'chat.completion' : 'text_completion';
  const chunkObject = kind === 'chat' ? 'chat.completion.chunk' : 'text_completion';
  const idPrefix = kind === 'chat' ? 'chatcmpl-' : 'cmpl-';

  return async (req: IncomingMessage, res: ServerResponse, bodyText: unknown): Promise<void> => {
    const receivedAt = performance.now();
    const ac = new AbortController();
    // 'close' before the response finished = the client went away.
    res.on('close', () => {
      if (!res.writableFinished) ac.abort();
    });
    let completion: Completion;
    let body: unknown;
    try {
      body = parseBody(bodyText);
      let r: InferenceRequest;
      try {
        r = kind === 'chat' ? parseChatRequest(body) : parseCompletionRequest(body);
      } catch (e) {
        // An invalid request that names its model still counts in that model's request metrics.
        const b = body as { model?: unknown; stream?: unknown };
        if (typeof b?.model === 'string' && b.model.length > 0)
          svc.countRejected(b.model, endpoint, b.stream === true, e, receivedAt);
        throw e;
      }
      completion = await svc.start(r, {
        endpoint,
        workerHeader: header(req, 'x-worker-instance-id'),
        prefillHeader: header(req, 'x-prefill-instance-id'),
        signal: ac.signal,
        receivedAt,
      });
    } catch (e) {
      sendError(res, e);
      return;
    }
    const c = completion;
    if (ac.signal.aborted) {
      c.abandon();
      return;
    }
    const id = idPrefix + c.id;
    const base = { id, object: chunkObject, created: c.created, model: c.req.model };
    const r = c.req;
    const echo = r.kind === 'completions' && r.echo ? (r.prompt ?? '') : '';
    try {
      // The first delta is pulled before anything is written, so routing failures (busy, no
      // worker) still get their HTTP status.
      const first = await c.deltas.next();
      if (!r.stream) {
        let text = echo;
        let finish: string | null = null;
        for (let d = first; !d.done; d = await c.deltas.next()) {
          text += d.value.text;
          if (d.value.finishReason) finish = d.value.finishReason;
        }
        const nvext = c.nvextOut();
        const choice =
          kind === 'chat'
            ? {
                index: 0,
                message: { role: 'assistant', content: text },
                logprobs: null,
                finish_reason: finish,
              }
            : { index: 0, text, logprobs: null, finish_reason: finish };
        const out: Record<string, unknown> = {
          id,
          object,
          created: c.created,
          model: r.model,
          choices: c.queryOnly ? [] : [choice],
          usage: usageOf(c),
        };
        if (nvext) out.nvext = nvext;
        sendJson(res, 200, json(out));
        return;
      }
      const sse = new SseWriter(res);
      const usage = r.includeUsage ? { usage: null } : {};
      if (kind === 'chat' && !c.queryOnly)
        await sse.send(
          JSON.stringify({
            ...base,
            choices: [
              { index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null },
            ],
            ...usage,
          }),
        );
      else if (echo)
        await sse.send(
          JSON.stringify({
            ...base,
            choices: [{ index: 0, text: echo, logprobs: null, finish_reason: null }],
            ...usage,
          }),
        );
      for (let d = first; !d.done; d = await c.deltas.next()) {
        const { text, finishReason } = d.value;
        if (text.length === 0 && !finishReason) continue;
        const choice =
          kind === 'chat'
            ? {
                index: 0,
                delta: finishReason && text.length === 0 ? {} : { content: text },
                logprobs: null,
                finish_reason: finishReason,
              }
            : { index: 0, text, logprobs: null, finish_reason: finishReason };
        const chunk: Record<string, unknown> = { ...base, choices: [choice], ...usage };
        if (finishReason) {
          const nvext = c.nvextOut();
          if (nvext) chunk.nvext = nvext;
        }
        await sse.send(json(chunk));
      }
      if (c.queryOnly) await sse.send(json({ ...base, choices: [], nvext: c.nvextOut() }));
      if (r.includeUsage) await sse.send(JSON.stringify({ ...base, choices: [], usage: usageOf(c) }));
      sse.done();
    } catch (e) {
      if (ac.signal.aborted) return;
      if (!res.headersSent) {
        sendError(res, e);
        return;
      }
      // Mid-stream failure: an error event, then the end of the stream (what OpenAI clients expect).
      const { body } = toOpenAiError(e);
      if (!res.destroyed) res.end(`data: ${JSON.stringify(body)}\n\ndata: [DONE]\n\n`);
    }
  };
}
