/**
 * What a simulated engine does with a request's output options and test hooks, on top of the
 * simulated token stream:
 * - `output_options.logprobs` → well-formed synthetic logprobs: every token gets a log probability
 *   in (-3, 0] (a fixed function of id and position, so runs repeat), and with k > 0 the top k
 *   alternatives, most likely first: the sampled token, then ids after it, each 0.5 less likely;
 * - `sampling_options.vllm_xargs.mock_output_token_ids` (kvrouter test hook): these ids replace
 *   the simulated ones in order, and the stream ends with `stop` after the last (or earlier with
 *   `length` when max_tokens is smaller), so tests can make an engine answer with a tool call or
 *   reasoning text in the frontend's vocabulary.
 * Timing, KV blocks and cancellation stay the engine's.
 */
import type { GenerateItem, ParsedGenerate } from '@kvrouter/protocols';

/** The scripted output ids of a request (test hook), or null. */
export function scriptedOutput(req: ParsedGenerate): number[] | null {
  const x = req.extras?.samplingOptions?.vllm_xargs as Record<string, unknown> | undefined;
  const ids = x?.mock_output_token_ids;
  if (!Array.isArray(ids) || ids.length === 0) return null;
  return ids.every((t) => typeof t === 'number' && Number.isInteger(t) && t >= 0) ? (ids as number[]) : null;
}

/** Log probability of `id` at output position `pos`: in (-3, 0]. */
export function syntheticLogprob(id: number, pos: number): number {
  const h = (Math.imul(id ^ 0x9e3779b9, 0x85ebca6b) + Math.imul(pos, 0xc2b2ae35)) >>> 0;
  return -((h % 3000) / 1000);
}

/** The stream itself when the request asks for nothing of this; else `withExtras`. */
export function applyExtras(
  items: AsyncIterableIterator<GenerateItem>,
  req: ParsedGenerate,
): AsyncIterableIterator<GenerateItem> {
  return req.extras === undefined ? items : withExtras(items, req);
}

/** `items` with the request's scripted ids and synthetic logprobs applied. */
export async function* withExtras(
  items: AsyncIterable<GenerateItem>,
  req: ParsedGenerate,
): AsyncGenerator<GenerateItem> {
  const script = scriptedOutput(req);
  const k = req.extras?.logprobs ?? null;
  if (script === null && k === null) {
    yield* items;
    return;
  }
  let pos = 0;
  for await (const it of items) {
    let ids = it.token_ids;
    let finish = it.finish_reason;
    if (script !== null) {
      const room = script.length - pos;
      ids = script.slice(pos, pos + Math.min(ids.length, room));
      // The script is the whole answer: its end is a natural stop.
      if (pos + ids.length >= script.length && (finish === undefined || finish === 'length')) finish = 'stop';
    }
    const out: GenerateItem = { ...it, token_ids: ids };
    if (finish !== undefined) out.finish_reason = finish;
    else delete out.finish_reason;
    if (k !== null) {
      out.log_probs = ids.map((id, i) => syntheticLogprob(id, pos + i));
      if (k > 0)
        out.top_logprobs = ids.map((id, i) => {
          const lp = out.log_probs![i]!;
          return Array.from({ length: k }, (_, j) => ({
            token_id: j === 0 ? id : id + j,
            logprob: j === 0 ? lp : lp - 0.5 * j,
          }));
        });
    }
    pos += ids.length;
    yield out;
    if (out.finish_reason !== undefined) return;
  }
}
