/** Embeddings, image and video generation APIs (`embeddings.ts`, `generate.ts`, worker choice in `pick.ts`). */
import type { Express, Request, Response } from 'express';
import type { ApiContext } from '../http/deps.js';
import { embeddingsHandler } from './embeddings.js';
import { imagesHandler, videosHandler } from './generate.js';
import { MediaPicker } from './pick.js';

export function registerMedia(app: Express, ctx: ApiContext): void {
  const picker = new MediaPicker(ctx.deps.registry);
  const via =
    (h: (req: Request, res: Response, body: unknown) => Promise<void>) => (req: Request, res: Response) =>
      h(req, res, req.body);
  app.post(ctx.deps.paths.embeddings, ctx.body, via(embeddingsHandler(ctx.deps, picker)));
  app.post('/v1/images/generations', ctx.body, via(imagesHandler(ctx.deps, picker)));
  app.post('/v1/videos/generations', ctx.body, via(videosHandler(ctx.deps, picker, false)));
  app.post('/v1/videos/generations/stream', ctx.body, via(videosHandler(ctx.deps, picker, true)));
}
