/** OpenAI Responses API (`/v1/responses`). */
import type { Express, Request, Response } from 'express';
import { notImplemented } from '../errors.js';
import type { ApiContext } from '../http/apis.js';
import { sendError } from '../http/util.js';

export function registerResponses(app: Express, ctx: ApiContext): void {
  const notYet = (req: Request, res: Response) => sendError(res, notImplemented(req.path));
  app.post(ctx.deps.paths.responses, notYet);
}
