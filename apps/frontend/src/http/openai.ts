/**
 * Chat completions and completions over HTTP: body → validated request → one `Completion` per
 * choice (`n` per prompt, batched completion prompts) → SSE chunks or one JSON response, in the
 * OpenAI shapes (usage with `prompt_tokens_details.cached_tokens`, `stream_options.include_usage`,
 * response `nvext`, `tool_calls` / `reasoning_content` from the model's output parser, logprobs).
 *
 * Several choices of one prompt share its prefix: choice 0 is routed first; once it has its first
 * token (the engine holds the prompt's KV blocks), the other choices are pinned to the same worker
 * and rank, where the prefix is a cache hit (unless the client pinned the request itself).
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { KvrError, stringifyJson, type WorkerId } from '@kvrouter/protocols';
import { ChoiceOutput, parserNames, parses, tokenTextOf, type ParserNames } from '../openai/choices.js';
import type { LoraCatalog } from '../openai/lora.js';
import { SingleFlight, conversationKey } from '../openai/single-flight.js';
import {
  parseChatRequest,
  parseCompletionRequest,
  type CompletionPrompt,
  type InferenceRequest,
} from '../openai/validate.js';
import type { Completion, Delta, InferenceService, RequestContext } from '../service.js';
import { SseWriter } from './sse.js';
import type { StreamRegistry } from './streams.js';
import { abortOnClose, endWithError, parseBody, sendError, sendJson } from './util.js';

type Kind = 'chat' | 'completions';

/** `--dyn-tool-call-parser` / `--dyn-reasoning-parser` (null: the card decides). */
export interface ParserFlags {
  toolCallParser: string | null;
  reasoningParser: string | null;
}

function usageOf(cs: readonly Completion[], firsts: readonly Completion[]) {
  let prompt = 0;
  let cached = 0;
  let completion = 0;
  for (const c of firsts) {
    prompt += c.promptTokens;
    cached += c.cachedTokens;
  }
  for (const c of cs) completion += c.completionTokens;
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: cached },
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

export function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return typeof v === 'string' ? v : undefined;
}

/** Handles one request whose body text was read already (plain node objects: no express in the hot path). */
export type CompletionsHandler = (
  req: IncomingMessage,
  res: ServerResponse,
  bodyText: unknown,
) => Promise<void>;

const NO_PARSERS: ParserNames = { toolCallParser: null, reasoningParser: null };

/** The model's card `runtime_config` (any worker's; one worker set agrees on the model). */
export function runtimeConfigOf(svc: InferenceService, model: string): Record<string, unknown> | undefined {
  const m = svc.o.registry.get(model);
  for (const s of m?.sets ?? [])
    for (const w of s.workers.values()) if (w.card) return w.card.runtime_config as Record<string, unknown>;
  return undefined;
}

const FIM = [
  ['<|fim_prefix|>', '<|fim_suffix|>', '<|fim_middle|>'],
  ['<fim_prefix>', '<fim_suffix>', '<fim_middle>'],
] as const;

/** `suffix`: a prefix-suffix-middle prompt in the tokenizer's fill-in-the-middle tokens. */
function fimPrompt(svc: InferenceService, model: string, prompt: string, suffix: string): string {
  const tok = svc.encoderFor(model).tokenizer;
  const sp = tok.specialTokens;
  const t = FIM.find((f) => f.every((s) => sp.has(s)));
  if (!t)
    throw new KvrError(
      'invalid_request',
      `suffix: the model's tokenizer (${tok.name}) has no fill-in-the-middle tokens`,
      400,
      { field: 'suffix' },
    );
  return `${t[0]}${prompt}${t[1]}${suffix}${t[2]}`;
}

/** The request of choice `j` of one prompt: its own seed, pinned to the first choice's worker. */
function choiceRequest(
  base: InferenceRequest,
  j: number,
  pin: { worker_id: WorkerId; dp_rank: number } | null,
): InferenceRequest {
  if (j === 0) return base;
  const r = { ...base, sampling: { ...base.sampling } } as InferenceRequest;
  if (base.sampling.seed !== undefined) r.sampling.seed = base.sampling.seed + j;
  if (pin && base.nvext.backend_instance_id === undefined)
    r.nvext = { ...base.nvext, backend_instance_id: pin.worker_id, dp_rank: pin.dp_rank };
  return r;
}

/**
 * Once every choice has started, a chat request's messages are not read again (the prompt is token
 * ids now, and a migration resends those): dropped, so that a streamed response does not keep the
 * conversation's text alive (at 300 req/s of 8k-token chats that text was most of what each young
 * generation GC copied and promoted). Speculative prefill renders them again at the end: kept.
 */
function dropMessages(q: InferenceRequest): void {
  if (q.kind === 'chat' && q.nvext.agent_hints?.speculative_prefill !== true) q.messages = [];
}

interface Started {
  index: number;
  c: Completion;
  out: ChoiceOutput;
  first: IteratorResult<Delta, void>;
}

/** Pull-based merge of several choices' chunk streams (whichever has data first). */
async function* merge<T>(gens: AsyncGenerator<T>[]): AsyncGenerator<T> {
  const next = (i: number) => gens[i]!.next().then((r) => ({ i, r }));
  const pending = new Map(gens.map((_, i) => [i, next(i)] as const));
  try {
    while (pending.size > 0) {
      const { i, r } = await Promise.race(pending.values());
      if (r.done) pending.delete(i);
      else {
        pending.set(i, next(i));
        yield r.value;
      }
    }
  } finally {
    for (const g of gens) void g.return(undefined);
  }
}

export function completionsHandler(
  svc: InferenceService,
  kind: Kind,
  flags?: ParserFlags | null,
  lora?: LoraCatalog | null,
  /** Open SSE responses, cut with an error event at the end of the shutdown grace period. */
  streams?: StreamRegistry | null,
): CompletionsHandler {
  const endpoint = kind === 'chat' ? 'chat_completions' : 'completions';
  const object = kind === 'chat' ? 'chat.completion' : 'text_completion';
  const chunkObject = kind === 'chat' ? 'chat.completion.chunk' : 'text_completion';
  const idPrefix = kind === 'chat' ? 'chatcmpl-' : 'cmpl-';
  const tokenText = new WeakMap<object, (id: number) => string>();
  // A turn whose conversation's earlier turn is still being tokenized waits for it (single-flight.ts).
  const tokenizing = new SingleFlight();
  const startOne = (q: InferenceRequest, ctx: RequestContext): Promise<Completion> =>
    tokenizing.run(q.kind === 'chat' ? conversationKey(q.messages) : null, () => svc.start(q, ctx));
  const textOf = (model: string): ((id: number) => string) => {
    const tok = svc.encoderFor(model).tokenizer;
    let f = tokenText.get(tok);
    if (!f) tokenText.set(tok, (f = tokenTextOf(tok)));
    return f;
  };

  /** The validated request, and whether the body set `skip_special_tokens`; nothing else of the body is kept. */
  const readRequest = (bodyText: unknown, receivedAt: number): { r: InferenceRequest; skipSet: boolean } => {
    const body = parseBody(bodyText);
    try {
      const r = kind === 'chat' ? parseChatRequest(body) : parseCompletionRequest(body);
      return { r, skipSet: 'skip_special_tokens' in (body as object) };
    } catch (e) {
      // An invalid request that names its model still counts in that model's request metrics.
      const b = body as { model?: unknown; stream?: unknown };
      if (typeof b?.model === 'string' && b.model.length > 0)
        svc.countRejected(b.model, endpoint, b.stream === true, e, receivedAt);
      throw e;
    }
  };

  return async (req: IncomingMessage, res: ServerResponse, bodyText: unknown): Promise<void> => {
    const receivedAt = performance.now();
    const ac = abortOnClose(res);
    const all: Started[] = [];
    const abandonAll = () => {
      for (const s of all) s.c.abandon();
    };
    let r: InferenceRequest;
    let firsts: Started[];
    let names: ParserNames = NO_PARSERS;
    /** The model as the client named it (a LoRA adapter is served by its base model's workers). */
    let servedAs: string;
    let unregister: (() => void) | null = null;
    try {
      const read = readRequest(bodyText, receivedAt);
      // Nothing of the body outlives validation (this frame lives as long as the stream).
      bodyText = undefined;
      r = read.r;
      servedAs = r.model;
      if (lora && svc.o.registry.get(r.model) === null) {
        const l = lora.resolve(r.model, svc.o.registry);
        if (l) {
          r.model = l.baseModel;
          r.lora = { name: l.lora, workerIds: l.workerIds };
        }
      }
      if (r.kind === 'chat') names = parserNames(flags ?? undefined, runtimeConfigOf(svc, r.model));
      // Parsers read markers that are special tokens in most vocabularies.
      if (parses(r, names) && !read.skipSet) r.skipSpecialTokens = false;
      const base = r;
      const prompts: InferenceRequest[] =
        base.kind === 'completions'
          ? base.batch.map((p: CompletionPrompt) => ({
              ...base,
              prompt:
                base.suffix !== null && p.prompt !== null
                  ? fimPrompt(svc, base.model, p.prompt, base.suffix)
                  : p.prompt,
              promptTokens: p.promptTokens,
            }))
          : [base];
      const ctx = {
        endpoint,
        workerHeader: header(req, 'x-worker-instance-id'),
        prefillHeader: header(req, 'x-prefill-instance-id'),
        signal: ac.signal,
        receivedAt,
      };
      const n = base.n;
      const start = async (q: InferenceRequest, index: number): Promise<Started> => {
        const c = await startOne(q, ctx);
        // Tokenized: with one choice per prompt nothing renders these messages again.
        if (n === 1) dropMessages(q);
        const out = new ChoiceOutput(
          index,
          q,
          names,
          textOf(c.model),
          promptTail(svc, c, names),
          () => `call_${randomUUID().replace(/-/g, '').slice(0, 24)}`,
        );
        const s: Started = { index, c, out, first: { done: true, value: undefined } };
        all.push(s);
        // The first delta is pulled before anything is written, so routing failures (busy, no
        // worker) still get their HTTP status.
        s.first = await c.deltas.next();
        return s;
      };
      firsts = await Promise.all(prompts.map((p, pi) => start(p, pi * n)));
      if (n > 1 && !firsts[0]!.c.queryOnly)
        await Promise.all(
          prompts.flatMap((p, pi) =>
            Array.from({ length: n - 1 }, (_, k) =>
              start(choiceRequest(p, k + 1, firsts[pi]!.c.worker), pi * n + k + 1),
            ),
          ),
        );
    } catch (e) {
      abandonAll();
      sendError(res, e);
      return;
    }
    // n > 1: the other choices rendered the same messages; all have started now.
    for (const s of all) dropMessages(s.c.req);
    if (ac.signal.aborted) {
      abandonAll();
      return;
    }
    all.sort((a, b) => a.index - b.index);
    const c0 = firsts[0]!.c;
    const id = idPrefix + c0.id;
    const base = { id, object: chunkObject, created: c0.created, model: servedAs };
    const echoOf = (s: Started): string => {
      const q = s.c.req;
      return q.kind === 'completions' && q.echo ? (q.prompt ?? '') : '';
    };
    const completions = all.map((s) => s.c);
    try {
      if (!r.stream) {
        const choices = await Promise.all(
          all.map(async (s) => {
            let text = echoOf(s);
            let finish: string | null = null;
            for (let d = s.first; !d.done; d = await s.c.deltas.next()) {
              const v = d.value;
              s.out.logprobs(v.item, v.tokenIds, v.text);
              if (kind === 'chat') s.out.chat(v.text, v.finishReason !== null);
              else text += v.text;
              if (v.finishReason) finish = v.finishReason;
            }
            if (kind !== 'chat')
              return {
                index: s.index,
                text,
                logprobs:
                  r.logprobs !== null && s.out.completionLogprobs.tokens.length > 0
                    ? s.out.completionLogprobs
                    : null,
                finish_reason: finish,
              };
            const calls = s.out.toolCalls;
            const message: Record<string, unknown> = {
              role: 'assistant',
              content: calls.length > 0 && s.out.content.trim() === '' ? null : s.out.content,
            };
            if (s.out.reasoning.length > 0) message.reasoning_content = s.out.reasoning;
            if (calls.length > 0) message.tool_calls = calls;
            return {
              index: s.index,
              message,
              logprobs:
                r.logprobs !== null && s.out.chatLogprobs.length > 0 ? { content: s.out.chatLogprobs } : null,
              finish_reason: s.out.finishReason(finish),
            };
          }),
        );
        const nvext = c0.nvextOut();
        const out: Record<string, unknown> = {
          id,
          object,
          created: c0.created,
          model: servedAs,
          choices: c0.queryOnly ? [] : choices,
          usage: usageOf(
            completions,
            firsts.map((s) => s.c),
          ),
        };
        if (nvext) out.nvext = nvext;
        sendJson(res, 200, json(out));
        return;
      }
      const sse = new SseWriter(res);
      unregister = streams?.add(res, () => ac.abort()) ?? null;
      const usage = r.includeUsage ? { usage: null } : {};
      const chunks = async function* (s: Started): AsyncGenerator<Record<string, unknown>> {
        const echo = echoOf(s);
        if (kind === 'chat' && !s.c.queryOnly)
          yield {
            ...base,
            choices: [
              {
                index: s.index,
                delta: { role: 'assistant', content: '' },
                logprobs: null,
                finish_reason: null,
              },
            ],
            ...usage,
          };
        else if (echo)
          yield {
            ...base,
            choices: [{ index: s.index, text: echo, logprobs: null, finish_reason: null }],
            ...usage,
          };
        for (let d = s.first; !d.done; d = await s.c.deltas.next()) {
          const { text, finishReason, tokenIds, item } = d.value;
          const lp = s.out.logprobs(item, tokenIds, text);
          let choice: Record<string, unknown>;
          if (kind === 'chat') {
            const delta = s.out.chat(text, finishReason !== null);
            if (!delta && !finishReason && lp === null) continue;
            choice = {
              index: s.index,
              delta: delta ?? {},
              logprobs: lp,
              finish_reason: s.out.finishReason(finishReason),
            };
          } else {
            if (text.length === 0 && !finishReason && lp === null) continue;
            choice = { index: s.index, text, logprobs: lp, finish_reason: finishReason };
          }
          const chunk: Record<string, unknown> = { ...base, choices: [choice], ...usage };
          if (finishReason && s.index === 0) {
            const nvext = s.c.nvextOut();
            if (nvext) chunk.nvext = nvext;
          }
          yield chunk;
        }
      };
      const stream = all.length === 1 ? chunks(all[0]!) : merge(all.map(chunks));
      for await (const chunk of stream) await sse.send(json(chunk));
      if (c0.queryOnly) await sse.send(json({ ...base, choices: [], nvext: c0.nvextOut() }));
      if (r.includeUsage)
        await sse.send(
          JSON.stringify({
            ...base,
            choices: [],
            usage: usageOf(
              completions,
              firsts.map((s) => s.c),
            ),
          }),
        );
      sse.done();
    } catch (e) {
      abandonAll();
      if (ac.signal.aborted) return;
      endWithError(res, e);
    } finally {
      unregister?.();
    }
  };
}

const specialsById = new WeakMap<ReadonlyMap<string, number>, Map<number, string>>();

/**
 * The end of the prompt as text, for parsers whose start state depends on it (a `<think>` the
 * template opened); empty when no parser needs it.
 */
export function promptTail(svc: InferenceService, c: Completion, names: ParserNames): string {
  if (names.reasoningParser === null || c.tokens.length === 0) return '';
  const tail = c.tokens.subarray(Math.max(0, c.tokens.length - 8));
  const tok = svc.encoderFor(c.model).tokenizer;
  // Special tokens by id, built once per tokenizer (hundreds of added tokens in real vocabularies).
  let specials = specialsById.get(tok.specialTokens);
  if (!specials) {
    specials = new Map<number, string>();
    for (const [s, id] of tok.specialTokens) specials.set(id, s);
    specialsById.set(tok.specialTokens, specials);
  }
  let out = '';
  for (const id of tail) out += specials.get(id) ?? tok.decode([id]);
  return out;
}
