/**
 * `nvext.agent_hints.speculative_prefill` (docs/protocol.md §15, Dynamo's speculative next-turn
 * prefill): once a chat turn has finished, its conversation plus the assistant's answer is exactly
 * the prefix the user's next turn will start with. That prefix is rendered with the model's chat
 * template (`add_generation_prompt` false), tokenized, and sent with `max_tokens = 1` to the worker
 * that served the turn (pinned, booked and freed like any request), so the next turn finds it cached.
 * Fire and forget: the client's response never waits for it, a failure is logged, and a warm-up that
 * has not finished after `SPECULATIVE_PREFILL_TIMEOUT_MS` is cancelled (it has lost its race with
 * the next turn by then).
 */
import { randomUUID } from 'node:crypto';
import type { GenerateItem, GenerateRequest, WorkerWithDpRank } from '@kvrouter/protocols';
import type { KvRouter } from '@kvrouter/router';
import type { RequestClient, Transport } from '@kvrouter/runtime';
import type { Logger } from './models.js';
import type { InferenceRequest } from './openai/validate.js';
import type { PromptEncoder } from './tokenizer/encoder.js';
import type { ModelTokenizers } from './tokenizer/per-model.js';
import type { ChatTemplate } from './tokenizer/template.js';

/** What the warm-up needs of the service (its options). */
export interface PrefillDeps {
  log: Logger;
  client: RequestClient;
  encoder: PromptEncoder;
  template: ChatTemplate;
  tokenizers?: ModelTokenizers | null;
}

/** What the warm-up needs of the finished turn. */
export interface PrefillTurn {
  readonly id: string;
  readonly req: InferenceRequest;
  readonly model: string;
  readonly worker: WorkerWithDpRank | null;
  readonly set: { readonly router: KvRouter; transportOf(id: bigint): Transport | null };
}

/** Upper bound on one warm-up (Dynamo uses the same 60 s). */
const SPECULATIVE_PREFILL_TIMEOUT_MS = 60_000;

/**
 * Passes the deltas through and hands the full answer text to `onDone` once the turn finished
 * normally (a finish reason); nothing for a failed or abandoned turn.
 */
export async function* withSpeculativePrefill<D extends { text: string; finishReason: unknown }>(
  deltas: AsyncGenerator<D, void, undefined>,
  onDone: (text: string) => void,
): AsyncGenerator<D, void, undefined> {
  let text = '';
  let finished = false;
  for await (const d of deltas) {
    text += d.text;
    if (d.finishReason !== null) finished = true;
    yield d;
  }
  if (finished) onDone(text);
}

/** The warm-up request of a finished chat turn; resolves when it ended (never rejects). */
export async function speculativePrefill(
  deps: PrefillDeps,
  c: PrefillTurn,
  answer: string,
): Promise<{ requestId: string; tokens: number } | null> {
  const log = deps.log;
  const req = c.req;
  const worker = c.worker;
  if (req.kind !== 'chat' || !worker) return null;
  const requestId = `speculative-prefill-${randomUUID()}`;
  const router = c.set.router;
  let routed = false;
  try {
    const mt = deps.tokenizers ? await deps.tokenizers.for(c.model) : null;
    const template = mt?.template ?? deps.template;
    const encoder = mt?.encoder ?? deps.encoder;
    const messages = [...req.messages, { role: 'assistant', content: answer }];
    const opts = {
      addGenerationPrompt: false,
      ...(req.documents ? { documents: req.documents } : {}),
      ...(req.tools ? { tools: req.tools } : {}),
      ...(req.templateKwargs ? { kwargs: req.templateKwargs } : {}),
    };
    // The template's pieces, never one string (a long agent conversation would be a 1 MB one).
    const tokens = await encoder.encodeRendered(
      template.renderPieces?.(messages, opts) ?? [template.render(messages, opts)],
    );
    const signal = AbortSignal.timeout(SPECULATIVE_PREFILL_TIMEOUT_MS);
    const d = await router.route({
      requestId,
      tokens,
      nvext: { backend_instance_id: worker.worker_id, dp_rank: worker.dp_rank },
      signal,
    });
    routed = true;
    const transport = c.set.transportOf(d.workerId);
    if (!transport) throw new Error(`worker ${d.workerId} has no known transport`);
    const payload: GenerateRequest = {
      request_id: requestId,
      model: c.model,
      token_ids: tokens,
      dp_rank: d.dpRank,
      stop_conditions: { max_tokens: 1, ignore_eos: true },
      sampling_options: {},
    };
    let first = true;
    for await (const item of deps.client.stream<GenerateItem>(transport, 'generate', payload, { signal })) {
      if (first && item.token_ids.length > 0) {
        first = false;
        router.markPrefillCompleted(requestId);
      }
    }
    log.info(
      `speculative prefill of request ${c.id}: ${tokens.length} tokens (next-turn prefix) sent to worker ${d.workerId} as ${requestId}`,
    );
    return { requestId, tokens: tokens.length };
  } catch (e) {
    log.warn(`speculative prefill of request ${c.id} failed: ${(e as Error).message}`);
    return null;
  } finally {
    if (routed) router.free(requestId);
  }
}
