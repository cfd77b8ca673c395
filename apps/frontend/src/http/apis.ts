/**
 * The non-OpenAI-chat HTTP APIs, each registered by its own module on the express app: Anthropic
 * Messages (`--enable-anthropic-api`), OpenAI Responses, and the media APIs (embeddings, images,
 * videos). Each module owns its routes, translation and tests; this file only wires them in order.
 */
import type { Express, RequestHandler } from 'express';
import { registerAnthropic } from '../anthropic/routes.js';
import { registerMedia } from '../media/routes.js';
import { registerResponses } from '../responses/routes.js';
import type { AppDeps } from './app.js';

/** What every API module gets: the app's dependencies and the shared body reader (any content type, body limit). */
export interface ApiContext {
  deps: AppDeps;
  /** Reads the body as text with the configured limit (413 past it); `req.body` is the text. */
  text: RequestHandler;
}

export function registerApis(app: Express, ctx: ApiContext): void {
  registerMedia(app, ctx);
  registerResponses(app, ctx);
  if (ctx.deps.enableAnthropicApi) registerAnthropic(app, ctx);
}
