/**
 * Chat templates. With `--model-path` the model's Jinja template is rendered by a Jinja-compatible
 * engine (@huggingface/jinja, the one transformers.js uses); without one, ChatML, rendered by hand
 * because it is the hot path of every default request.
 */
import { Template } from '@huggingface/jinja';
import { KvrError } from '@kvrouter/protocols';
import type { ChatMessage } from '../openai/validate.js';

export interface RenderOptions {
  addGenerationPrompt: boolean;
  tools?: unknown[];
  toolChoice?: unknown;
  kwargs?: Record<string, unknown>;
}

export interface ChatTemplate {
  readonly name: string;
  render(messages: readonly ChatMessage[], o: RenderOptions): string;
}

/**
 * `<|im_start|>{role}\n{content}<|im_end|>\n` per message, then `<|im_start|>assistant\n`.
 * Tools (when given) go into a leading system message as JSON, the common ChatML convention.
 */
export class ChatMlTemplate implements ChatTemplate {
  readonly name = 'chatml';
  render(messages: readonly ChatMessage[], o: RenderOptions): string {
    let s = '';
    if (o.tools && o.tools.length > 0)
      s += `<|im_start|>system\n# Tools\n${JSON.stringify(o.tools)}<|im_end|>\n`;
    for (const m of messages) {
      let content = m.content ?? '';
      if (m.tool_calls) content += (content ? '\n' : '') + JSON.stringify(m.tool_calls);
      s += `<|im_start|>${m.role}\n${content}<|im_end|>\n`;
    }
    if (o.addGenerationPrompt) s += '<|im_start|>assistant\n';
    return s;
  }
}

export class JinjaChatTemplate implements ChatTemplate {
  readonly name = 'jinja';
  private readonly t: Template;

  constructor(
    source: string,
    private readonly specials: { bos_token: string | null; eos_token: string | null },
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
  }

  render(messages: readonly ChatMessage[], o: RenderOptions): string {
    try {
      return this.t.render({
        ...o.kwargs,
        messages,
        add_generation_prompt: o.addGenerationPrompt,
        bos_token: this.specials.bos_token ?? '',
        eos_token: this.specials.eos_token ?? '',
        ...(o.tools ? { tools: o.tools } : {}),
        ...(o.toolChoice !== undefined ? { tool_choice: o.toolChoice } : {}),
      });
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
  }
}
