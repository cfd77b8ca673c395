/**
 * Chat templates. A model's Jinja template is rendered as Hugging Face transformers'
 * `apply_chat_template(tokenize=False)` renders it, by @huggingface/jinja (the engine
 * transformers.js uses; trim_blocks + lstrip_blocks, transformers' `tojson`, `raise_exception`,
 * `strftime_now`); without a template of its own a model is prompted with ChatML, rendered by hand
 * because it is the hot path of every default request.
 *
 * What the template sees (the same as transformers' render call; parity fixtures in
 * packages/testkit/fixtures/tokenizer-parity check it against Python jinja2):
 * - `messages` as the client sent them: `tool_calls` (content null), `tool` results with
 *   `tool_call_id` / `name`, `reasoning_content` of earlier assistant turns, `name`;
 * - `tools` and `documents` (null when absent), `add_generation_prompt`;
 * - the tokenizer's special tokens (`bos_token`, `eos_token`, `pad_token`, `unk_token`,
 *   `additional_special_tokens`, ...), then `chat_template_kwargs` (e.g. `enable_thinking`,
 *   `reasoning_effort`), which win;
 * - `continue_final_message`: the text is cut right after the last message's content, exactly as
 *   transformers cuts it (and it may not be combined with `add_generation_prompt`).
 *
 * Serving choices on top (the fixture generator applies the same ones):
 * - an assistant turn with `content: null` (what OpenAI clients send after a tool call) reaches
 *   the template as null only when the template tests contents against none (DeepSeek V3's
 *   `message['content'] is none`); every other template gets `""` (what vLLM passes), so Qwen3's
 *   `'</think>' in content` does not fail and Llama's `content | trim` does not print "None";
 * - tool-call `arguments` given as an object (OpenAI sends a JSON string) are passed as compact
 *   JSON text, so templates that concatenate them (DeepSeek V3) do not fail;
 * - content given as parts: templates that iterate over `message.content` get the parts; the
 *   others get one string, text parts joined by "\n" and each image part replaced by the model's
 *   image placeholder (Qwen's `<|vision_start|><|image_pad|><|vision_end|>`, Llama's `<|image|>`,
 *   else `<image>`), as vLLM's "string" content format does.
 */
import * as jinja from '@huggingface/jinja';
import { Template } from '@huggingface/jinja';
import { KvrError } from '@kvrouter/protocols';
import { compileTemplate, Unsupported, type CompiledTemplate } from './jinja/compile.js';

/** The runtime part of @huggingface/jinja used here (its .d.ts imports are extensionless; NodeNext cannot follow them). */
interface JinjaEnvironment {
  set(name: string, value: unknown): unknown;
}
const { Environment, Interpreter } = jinja as unknown as {
  Environment: new () => JinjaEnvironment;
  Interpreter: new (env: JinjaEnvironment) => { run(program: unknown): { value: string } };
};

/** A message as the template receives it (every field the client sent is passed through). */
export interface TemplateMessage {
  readonly role: string;
  readonly content: unknown;
}

export interface RenderOptions {
  addGenerationPrompt: boolean;
  /** transformers' `continue_final_message`: the last (assistant) message is continued. */
  continueFinalMessage?: boolean;
  tools?: unknown[];
  /** Accepted for API symmetry; like transformers, not passed to the template. */
  toolChoice?: unknown;
  /** RAG documents (`documents` of transformers' apply_chat_template). */
  documents?: unknown[];
  /** `chat_template_kwargs`. */
  kwargs?: Record<string, unknown>;
}

export interface ChatTemplate {
  readonly name: string;
  render(messages: readonly TemplateMessage[], o: RenderOptions): string;
  /**
   * The same text as the strings the template produced, in order (their concatenation is
   * `render`'s text, same errors): a 150k-token prompt stays ~thousands of small strings (the
   * messages' own among them) instead of one 1 MB string, which the prefix-cache cut reads piece
   * by piece (encoder.ts).
   */
  renderPieces?(messages: readonly TemplateMessage[], o: RenderOptions): string[];
}

/** Pieces concatenated as a rope (as `+=` over the template's outputs built it before). */
function concat(pieces: readonly string[]): string {
  let s = '';
  for (const p of pieces) s += p;
  return s;
}

const textOf = (c: unknown): string =>
  typeof c === 'string' ? c : c === null || c === undefined ? '' : partsText(c, '<image>');

function partsText(content: unknown, imagePlaceholder: string): string {
  if (!Array.isArray(content)) return String(content);
  const out: string[] = [];
  for (const p of content as { type?: unknown; text?: unknown }[]) {
    if (p && typeof p === 'object' && typeof p.text === 'string') out.push(p.text);
    else if (
      p &&
      typeof p === 'object' &&
      (p.type === 'image_url' || p.type === 'image' || p.type === 'input_image')
    )
      out.push(imagePlaceholder);
  }
  return out.join('\n');
}

/**
 * `<|im_start|>{role}\n{content}<|im_end|>\n` per message, then `<|im_start|>assistant\n`.
 * Tools (when given) go into a leading system message as JSON, the common ChatML convention.
 */
export class ChatMlTemplate implements ChatTemplate {
  readonly name = 'chatml';
  render(messages: readonly TemplateMessage[], o: RenderOptions): string {
    return concat(this.renderPieces(messages, o));
  }

  renderPieces(messages: readonly TemplateMessage[], o: RenderOptions): string[] {
    const s: string[] = [];
    if (o.tools && o.tools.length > 0)
      s.push(`<|im_start|>system\n# Tools\n${JSON.stringify(o.tools)}<|im_end|>\n`);
    const last = messages.length - 1;
    for (let i = 0; i <= last; i++) {
      const m = messages[i]! as TemplateMessage & { tool_calls?: unknown };
      s.push(`<|im_start|>${m.role}\n`);
      const content = textOf(m.content);
      if (content.length > 0) s.push(content);
      if (m.tool_calls) s.push((content ? '\n' : '') + JSON.stringify(m.tool_calls));
      if (i === last && o.continueFinalMessage) return s;
      s.push('<|im_end|>\n');
    }
    if (o.addGenerationPrompt) s.push('<|im_start|>assistant\n');
    return s;
  }
}

export interface JinjaTemplateOptions {
  /** The date `strftime_now` formats (default: now). Tests pin it. */
  now?: () => Date;
  /** `interpreter`: never use the compiled renderer (tests compare the two). Default `auto`. */
  renderer?: 'auto' | 'interpreter';
}

/** transformers' `special_tokens_map` from a tokenizer_config.json (AddedToken objects → their text). */
export function specialTokensMap(config: Record<string, unknown>): Record<string, unknown> {
  const text = (v: unknown): string | null =>
    typeof v === 'string'
      ? v
      : v && typeof v === 'object' && typeof (v as { content?: unknown }).content === 'string'
        ? (v as { content: string }).content
        : null;
  const out: Record<string, unknown> = {};
  for (const k of [
    'bos_token',
    'eos_token',
    'unk_token',
    'sep_token',
    'pad_token',
    'cls_token',
    'mask_token',
  ]) {
    const t = text(config[k]);
    if (t !== null) out[k] = t;
  }
  const extra = config.additional_special_tokens;
  if (Array.isArray(extra) && extra.length > 0) out.additional_special_tokens = extra.map(text);
  return out;
}

/** Python's `range` (what the library's global is). */
function range(start: number, stop?: number, step = 1): number[] {
  if (stop === undefined) {
    stop = start;
    start = 0;
  }
  if (step === 0) throw new Error('range() step must not be zero');
  const out: number[] = [];
  if (step > 0) for (let i = start; i < stop; i += step) out.push(i);
  else for (let i = start; i > stop; i += step) out.push(i);
  return out;
}

function pad2(n: number): string {
  return n < 10 ? `0${n}` : String(n);
}

const MONTHS = [
  'January',
  'February',
  'March',
  'April',
  'May',
  'June',
  'July',
  'August',
  'September',
  'October',
  'November',
  'December',
];
const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];

/** Python's `datetime.strftime` for the directives chat templates use (C locale). */
function strftime(d: Date, fmt: string): string {
  return fmt.replace(/%[YmdbBaAHMSyjp%e]/g, (t) => {
    switch (t) {
      case '%Y':
        return String(d.getFullYear());
      case '%y':
        return pad2(d.getFullYear() % 100);
      case '%m':
        return pad2(d.getMonth() + 1);
      case '%d':
        return pad2(d.getDate());
      case '%e':
        return String(d.getDate()).padStart(2, ' ');
      case '%b':
        return MONTHS[d.getMonth()]!.slice(0, 3);
      case '%B':
        return MONTHS[d.getMonth()]!;
      case '%a':
        return DAYS[d.getDay()]!.slice(0, 3);
      case '%A':
        return DAYS[d.getDay()]!;
      case '%H':
        return pad2(d.getHours());
      case '%M':
        return pad2(d.getMinutes());
      case '%S':
        return pad2(d.getSeconds());
      case '%p':
        return d.getHours() < 12 ? 'AM' : 'PM';
      case '%j': {
        const start = new Date(d.getFullYear(), 0, 1);
        return String(Math.floor((d.getTime() - start.getTime()) / 86_400_000) + 1).padStart(3, '0');
      }
      default:
        return '%';
    }
  });
}

export class JinjaChatTemplate implements ChatTemplate {
  readonly name = 'jinja';
  private readonly t: Template;
  /** The template compiled to closures (null: a construct it does not mirror; see `compiledFallback`). */
  private readonly compiled: CompiledTemplate | null = null;
  /** Why the template is rendered by the interpreter (null when compiled). */
  readonly compiledFallback: string | null = null;
  /** Renders by the compiled renderer / by the interpreter after the compiled one gave up or threw. */
  readonly renders = { compiled: 0, interpreted: 0 };
  /** The template iterates over message contents (OpenAI "parts" format) rather than using them as strings. */
  readonly partsContent: boolean;
  /** The template tests contents against none: a null content is passed as null, not "". */
  readonly nullContent: boolean;
  private readonly imagePlaceholder: string;
  private readonly specials: Record<string, unknown>;

  constructor(
    source: string,
    /** transformers' `special_tokens_map` (see `specialTokensMap`). */
    specials: Record<string, unknown>,
    private readonly opts: JinjaTemplateOptions = {},
  ) {
    try {
      this.t = new Template(source);
    } catch (e) {
      throw new KvrError(
        'chat_template_invalid',
        `chat template does not parse: ${(e as Error).message}`,
        500,
        {
          field: 'chat_template',
        },
      );
    }
    try {
      if (opts.renderer !== 'interpreter') this.compiled = compileTemplate(this.t.parsed);
    } catch (e) {
      if (!(e instanceof Unsupported)) throw e;
      this.compiledFallback = e.message;
    }
    const s: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(specials)) if (v !== null && v !== undefined) s[k] = v;
    this.specials = s;
    // vLLM's detection, simplified: a loop over message['content'] / message.content means parts.
    this.nullContent = /\bcontent['"]?\]?\s+is\s+(not\s+)?none/.test(source);
    this.partsContent = /for\s+\w+\s+in\s+(message|msg|m)(\.content|\[['"]content['"]\])/.test(source);
    const known = JSON.stringify(specials);
    this.imagePlaceholder = known.includes('<|image_pad|>')
      ? '<|vision_start|><|image_pad|><|vision_end|>'
      : source.includes('<|image|>')
        ? '<|image|>'
        : '<image>';
  }

  /**
   * `Template.render` with our own `strftime_now` (Python's C-locale directives, an injectable
   * clock): the library's globals cannot be redeclared, so they are set up here the same way.
   */
  private run(items: Record<string, unknown>): string[] {
    if (this.compiled) {
      try {
        const pieces = this.compiled.renderPieces(this.vars(items));
        this.renders.compiled++;
        return pieces;
      } catch {
        // a case the compiled renderer does not mirror, or an error: the interpreter decides
      }
    }
    this.renders.interpreted++;
    const env = new Environment();
    for (const [k, v] of Object.entries(this.vars(items))) env.set(k, v);
    return [new Interpreter(env).run(this.t.parsed).value];
  }

  /**
   * The template's variables as plain values: our globals (`strftime_now` with Python's C-locale
   * directives and an injectable clock, `raise_exception`, `range`, the Python constants) and then
   * the render items, which never replace a global. The compiled renderer takes them as they are;
   * the interpreter gets them set one by one in its environment.
   */
  private vars(items: Record<string, unknown>): Record<string, unknown> {
    const now = this.opts.now ?? (() => new Date());
    const vars: Record<string, unknown> = {
      false: false,
      true: true,
      none: null,
      raise_exception: (msg: unknown) => {
        throw new Error(String(msg));
      },
      range,
      strftime_now: (fmt: string) => strftime(now(), fmt),
      True: true,
      False: false,
      None: null,
    };
    for (const [k, v] of Object.entries(items)) if (!(k in vars)) vars[k] = v;
    return vars;
  }

  private prepare(messages: readonly TemplateMessage[]): unknown[] {
    return messages.map((m) => {
      const c = m.content;
      const calls = (m as { tool_calls?: unknown }).tool_calls;
      let out: Record<string, unknown> | null = null;
      if (Array.isArray(c) && !this.partsContent)
        out = { ...m, content: partsText(c, this.imagePlaceholder) };
      else if (c === null && !this.nullContent) out = { ...m, content: '' };
      if (Array.isArray(calls) && calls.some(objectArguments)) {
        out ??= { ...m };
        out.tool_calls = calls.map((tc: unknown) =>
          objectArguments(tc)
            ? {
                ...(tc as Record<string, unknown>),
                function: {
                  ...(tc as { function: Record<string, unknown> }).function,
                  arguments: JSON.stringify((tc as { function: { arguments: unknown } }).function.arguments),
                },
              }
            : tc,
        );
      }
      return out ?? m;
    });
  }

  render(messages: readonly TemplateMessage[], o: RenderOptions): string {
    return concat(this.renderPieces(messages, o));
  }

  renderPieces(messages: readonly TemplateMessage[], o: RenderOptions): string[] {
    if (o.continueFinalMessage && o.addGenerationPrompt)
      throw new KvrError(
        'invalid_request',
        'continue_final_message and add_generation_prompt cannot both be true',
        400,
        { field: 'continue_final_message' },
      );
    const base: Record<string, unknown> = {
      tools: o.tools ?? null,
      documents: o.documents ?? null,
      add_generation_prompt: o.addGenerationPrompt,
      ...this.specials,
      ...o.kwargs,
    };
    let pieces: string[];
    try {
      pieces = this.run({ ...base, messages: this.prepare(messages) });
    } catch (e) {
      // Templates raise on inputs they reject (e.g. roles out of order): the request is at fault.
      throw new KvrError(
        'invalid_request',
        `chat template rejected the messages: ${(e as Error).message}`,
        400,
        {
          field: 'messages',
        },
      );
    }
    // The continue_final_message cut searches the whole text: that rare request is one string.
    return o.continueFinalMessage ? [continueFinal(concat(pieces), messages)] : pieces;
  }
}

function objectArguments(tc: unknown): boolean {
  const f = (tc as { function?: { arguments?: unknown } } | null)?.function;
  return !!f && typeof f === 'object' && f.arguments !== undefined && typeof f.arguments !== 'string';
}

/** transformers' continue_final_message cut (apply_chat_template). */
function continueFinal(rendered: string, messages: readonly TemplateMessage[]): string {
  const last = messages[messages.length - 1];
  let final: unknown = last?.content;
  if (Array.isArray(final)) {
    const withText = [...(final as { text?: unknown }[])].reverse().find((b) => typeof b?.text === 'string');
    if (!withText)
      throw new KvrError(
        'invalid_request',
        'continue_final_message: the final message has no text content',
        400,
        {
          field: 'messages',
        },
      );
    final = withText.text;
  }
  const f = typeof final === 'string' ? final : '';
  const stripped = f.trim();
  const loc = rendered.lastIndexOf(stripped);
  if (loc < 0)
    throw new KvrError(
      'invalid_request',
      'continue_final_message: the final message does not appear in the rendered chat',
      400,
      { field: 'messages' },
    );
  const lstripped = f.replace(/^\s+/, '');
  if (rendered.slice(loc, loc + lstripped.length) === f) return rendered.slice(0, loc + f.length);
  return rendered.slice(0, loc + stripped.length);
}
