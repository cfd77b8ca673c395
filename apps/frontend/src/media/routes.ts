/** Embeddings, image and video generation APIs. */
import type { Express, Request, Response } from 'express';
import { notImplemented } from '../errors.js';
import type { ApiContext } from '../http/apis.js';
import { sendError } from '../http/util.js';

export function registerMedia(app: Express, ctx: ApiContext): void {
  const notYet = (req: Request, res: Response) => sendError(res, notImplemented(req.path));
  for (const path of [
    ctx.deps.paths.embeddings,
    '/v1/images/generations',
    '/v1/videos/generations',
    '/v1/videos/generations/stream',
  ])
    app.post(path, notYet);
}
