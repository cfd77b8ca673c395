export {
  Frontend,
  consoleLogger,
  DEFAULT_EMBEDDED_MODEL,
  type FrontendConfig,
  type FrontendOptions,
  type EmbeddedOptions,
} from './frontend.js';
export { createApp } from './http/app.js';
export type { AppDeps } from './http/deps.js';
export { pathsFromConfig, type Paths } from './http/paths.js';
export { openApiSpec } from './http/docs.js';
export { ModelRegistry, Model, WorkerSet, type Logger, type ModelRegistryOptions } from './models.js';
export {
  InferenceService,
  Completion,
  migrationBudget,
  type Delta,
  type RequestContext,
  type Timing,
} from './service.js';
export { toOpenAiError, type OpenAiErrorBody } from './errors.js';
export {
  parseChatRequest,
  parseCompletionRequest,
  type ChatMessage,
  type ChatRequest,
  type CompletionRequest,
  type InferenceRequest,
} from './openai/validate.js';
export { PromptEncoder } from './tokenizer/encoder.js';
export { DecodeStream } from './tokenizer/detok.js';
export { loadTokenizer, specFor, type LoadedTokenizer } from './tokenizer/load.js';
export { ChatMlTemplate, JinjaChatTemplate, type ChatTemplate } from './tokenizer/template.js';
export { TokenizerPool } from './tokenizer/pool.js';
export type { TextTokenizer, TokenizerSpec } from './tokenizer/types.js';
export { runInteractive } from './interactive.js';
