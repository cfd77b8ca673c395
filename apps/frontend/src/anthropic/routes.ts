/** Anthropic Messages API (`/v1/messages`, `/v1/messages/count_tokens`), behind `--enable-anthropic-api`. */
import type { Express, Request, Response } from 'express';
import { notImplemented } from '../errors.js';
import type { ApiContext } from '../http/apis.js';
import { sendError } from '../http/util.js';

export function registerAnthropic(app: Express, ctx: ApiContext): void {
  const p = ctx.deps.paths;
  const notYet = (req: Request, res: Response) => sendError(res, notImplemented(req.path));
  app.post(p.anthropic, notYet);
  app.post(`${p.anthropic}/count_tokens`, notYet);
}
