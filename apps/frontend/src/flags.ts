/**
 * Frontend flags that are accepted by the config table but cannot be honoured here: refused at
 * startup (`not_supported`, exit 2 in the CLI) with a message naming the flag, why, and the
 * allowed values, instead of being silently ignored.
 */
import { KvrError } from '@kvrouter/protocols';
import type { ResolvedConfig } from '@kvrouter/config';

/**
 * `--dyn-chat-processor vllm` runs vLLM's own Python pre/post-processing inside Dynamo's frontend;
 * kvrouter has no Python runtime to host it. The built-in (`dynamo`) processor already does what
 * vLLM's does for chat: it renders the model's own Jinja chat template and tokenizes with its
 * `tokenizer.json`.
 */
export function checkChatProcessor(config: Pick<ResolvedConfig<'frontend'>, 'dynChatProcessor'>): void {
  if (config.dynChatProcessor !== 'dynamo')
    throw new KvrError(
      'not_supported',
      `--dyn-chat-processor ${config.dynChatProcessor}: not available in kvrouter (it runs vLLM's Python pre/post-processing, and kvrouter has no Python runtime); allowed: dynamo (the built-in processor renders the model's own chat template and tokenizes with its tokenizer.json, as vLLM does)`,
      400,
      { field: 'dyn-chat-processor' },
    );
}
