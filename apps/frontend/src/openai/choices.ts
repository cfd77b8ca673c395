/**
 * One choice of a response: the engine's deltas through the model's output parser (reasoning,
 * tool calls) into OpenAI's chat delta / message shapes, and engine logprobs into OpenAI's chat
 * (`logprobs.content[]`) or completions (`tokens`, `token_logprobs`, `top_logprobs`) form.
 */
import type { GenerateItem } from '@kvrouter/protocols';
import {
  createOutputParser,
  isReasoningParser,
  isToolCallParser,
  mergeToolCalls,
  promptOpensThinking,
  type OutputParser,
  type ReasoningParserName,
  type ToolCall,
  type ToolCallDelta,
  type ToolCallParserName,
} from '../parsers/index.js';
import type { TextTokenizer } from '../tokenizer/types.js';
import type { InferenceRequest } from './validate.js';

export interface ParserNames {
  toolCallParser: ToolCallParserName | null;
  reasoningParser: ReasoningParserName | null;
}

/** Frontend flags win; else the card's `runtime_config.tool_call_parser` / `reasoning_parser`. */
export function parserNames(
  flags: { toolCallParser?: string | null; reasoningParser?: string | null } | undefined,
  runtimeConfig: Record<string, unknown> | undefined,
): ParserNames {
  const pick = <T extends string>(
    flag: string | null | undefined,
    card: unknown,
    ok: (s: string) => s is T,
  ) => {
    if (typeof flag === 'string' && ok(flag)) return flag;
    return typeof card === 'string' && ok(card) ? card : null;
  };
  return {
    toolCallParser: pick(flags?.toolCallParser, runtimeConfig?.tool_call_parser, isToolCallParser),
    reasoningParser: pick(flags?.reasoningParser, runtimeConfig?.reasoning_parser, isReasoningParser),
  };
}

/** Whether a request on a model with these parsers is parsed at all (then special tokens are kept). */
export function parses(req: InferenceRequest, p: ParserNames): boolean {
  if (req.kind !== 'chat') return false;
  return (
    p.reasoningParser !== null ||
    (req.toolMode !== null && (p.toolCallParser !== null || req.toolMode !== 'auto'))
  );
}

export interface ChatDelta {
  role?: 'assistant';
  content?: string;
  reasoning_content?: string;
  tool_calls?: ToolCallDelta[];
}

export interface ChatLogprob {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: { token: string; logprob: number; bytes: number[] }[];
}

export interface CompletionLogprobs {
  tokens: string[];
  token_logprobs: number[];
  top_logprobs: Record<string, number>[] | null;
  text_offset: number[];
}

const utf8 = new TextEncoder();

/** Per-choice state: parser, accumulated message, logprobs, finish reason. */
export class ChoiceOutput {
  private readonly parser: OutputParser | null;
  content = '';
  reasoning = '';
  private readonly deltas: ToolCallDelta[] = [];
  readonly chatLogprobs: ChatLogprob[] = [];
  readonly completionLogprobs: CompletionLogprobs = {
    tokens: [],
    token_logprobs: [],
    top_logprobs: [],
    text_offset: [],
  };
  private textOffset = 0;

  constructor(
    readonly index: number,
    private readonly req: InferenceRequest,
    names: ParserNames,
    /** Decodes one id for logprob entries (special tokens as text). */
    private readonly tokenText: (id: number) => string,
    promptTail: string,
    newId: () => string,
  ) {
    this.parser =
      req.kind === 'chat' && parses(req, names)
        ? createOutputParser({
            ...names,
            toolChoice: req.toolMode,
            promptOpensThinking: promptOpensThinking(promptTail),
            newId,
          })
        : null;
  }

  get toolCalls(): ToolCall[] {
    return mergeToolCalls(this.deltas);
  }

  /** The chat delta of one engine delta (null when nothing is to be sent). */
  chat(text: string, last: boolean): ChatDelta | null {
    const d: ChatDelta = {};
    if (!this.parser) {
      if (text.length > 0) d.content = text;
      this.content += text;
    } else {
      const out = this.parser.push(text);
      if (last) {
        const f = this.parser.finish();
        out.content += f.content;
        out.reasoning += f.reasoning;
        out.toolCalls.push(...f.toolCalls);
      }
      let calls = out.toolCalls;
      if (this.req.kind === 'chat' && !this.req.parallelToolCalls) calls = calls.filter((c) => c.index === 0);
      if (out.content.length > 0) d.content = out.content;
      if (out.reasoning.length > 0) d.reasoning_content = out.reasoning;
      if (calls.length > 0) d.tool_calls = calls;
      this.content += out.content;
      this.reasoning += out.reasoning;
      this.deltas.push(...calls);
    }
    return d.content !== undefined || d.reasoning_content !== undefined || d.tool_calls ? d : null;
  }

  /** OpenAI finish reason: a choice that called tools ends with `tool_calls` (unless cut by length). */
  finishReason(engine: string | null): string | null {
    if (engine === 'stop' && this.deltas.length > 0) return 'tool_calls';
    return engine;
  }

  /** Logprob entries of one engine item (null when none were asked for or returned). */
  logprobs(item: GenerateItem | undefined, ids: readonly number[], text: string): unknown {
    if (this.req.logprobs === null) return null;
    const lp = item?.log_probs;
    if (!lp || lp.length === 0) {
      this.textOffset += text.length;
      return null;
    }
    const top = item.top_logprobs;
    const k = this.req.logprobs;
    if (this.req.kind === 'chat') {
      const content: ChatLogprob[] = ids.map((id, i) => {
        const token = this.tokenText(id);
        return {
          token,
          logprob: lp[i] ?? 0,
          bytes: Array.from(utf8.encode(token)),
          top_logprobs: (top?.[i] ?? []).slice(0, k).map((t) => {
            const s = this.tokenText(t.token_id);
            return { token: s, logprob: t.logprob, bytes: Array.from(utf8.encode(s)) };
          }),
        };
      });
      this.chatLogprobs.push(...content);
      return { content };
    }
    const out: CompletionLogprobs = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
    for (let i = 0; i < ids.length; i++) {
      const token = this.tokenText(ids[i]!);
      out.tokens.push(token);
      out.token_logprobs.push(lp[i] ?? 0);
      const alts: Record<string, number> = {};
      for (const t of (top?.[i] ?? []).slice(0, k)) alts[this.tokenText(t.token_id)] = t.logprob;
      out.top_logprobs!.push(alts);
      out.text_offset.push(this.textOffset);
      this.textOffset += token.length;
    }
    const all = this.completionLogprobs;
    all.tokens.push(...out.tokens);
    all.token_logprobs.push(...out.token_logprobs);
    all.top_logprobs!.push(...out.top_logprobs!);
    all.text_offset.push(...out.text_offset);
    return out;
  }
}

/** Decode of one id with special tokens kept (logprob token strings). */
export function tokenTextOf(tok: TextTokenizer): (id: number) => string {
  const specials = new Map<number, string>();
  for (const [s, id] of tok.specialTokens) specials.set(id, s);
  return (id) => specials.get(id) ?? tok.decode([id]);
}
