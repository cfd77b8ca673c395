/**
 * The non-OpenAI-chat HTTP APIs, each registered by its own module on the express app: Anthropic
 * Messages (`--enable-anthropic-api`), OpenAI Responses, and the media APIs (embeddings, images,
 * videos). Each module owns its routes, translation and tests; this file only wires them in order.
 */
import type { Express } from 'express';
import { registerAnthropic } from '../anthropic/routes.js';
import { registerMedia } from '../media/routes.js';
import { registerResponses } from '../responses/routes.js';
import type { ApiContext } from './deps.js';

export function registerApis(app: Express, ctx: ApiContext): void {
  registerMedia(app, ctx);
  registerResponses(app, ctx);
  if (ctx.deps.enableAnthropicApi) registerAnthropic(app, ctx);
}
