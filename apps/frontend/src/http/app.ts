/**
 * The express application: every route of FLAGS.md "HTTP endpoints" with the configured paths,
 * one body parser with the `DYN_HTTP_BODY_LIMIT_MB` limit (413), and one error middleware that
 * turns anything thrown into the OpenAI error body.
 */
import './cjs-interop.js';
import express from 'express';
import type { NextFunction, Request, Response } from 'express';
import { KvrError } from '@kvrouter/protocols';
import { notImplemented } from '../errors.js';
import type { ModelRegistry } from '../models.js';
import type { InferenceService } from '../service.js';
import { busyThresholdGet, busyThresholdPost } from './busy.js';
import { docsRouter, openApiSpec } from './docs.js';
import { completionsHandler } from './openai.js';
import type { Paths } from './paths.js';
import { sendError } from './util.js';

export interface AppDeps {
  service: InferenceService;
  registry: ModelRegistry;
  paths: Paths;
  bodyLimitMb: number;
  enableAnthropicApi: boolean;
  /** Prometheus exposition (content type, text). */
  metrics: () => Promise<{ contentType: string; body: string }>;
  /** Discovery connected and the initial listing applied. */
  healthy: () => boolean;
  /** Number of in-flight HTTP requests changes (graceful shutdown waits for zero). */
  onInflight?: (delta: number) => void;
}

export function createApp(d: AppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  const p = d.paths;
  // Any content type: `curl -d` sends form encoding, and the body is JSON either way.
  const text = express.text({ type: () => true, limit: `${d.bodyLimitMb}mb` });

  if (d.onInflight) {
    const on = d.onInflight;
    app.use((_req, res, next) => {
      on(1);
      let done = false;
      const end = () => {
        if (done) return;
        done = true;
        on(-1);
      };
      res.on('finish', end);
      res.on('close', end);
      next();
    });
  }

  app.post(p.chat, text, completionsHandler(d.service, 'chat'));
  app.post(p.completions, text, completionsHandler(d.service, 'completions'));
  app.get(p.models, (_req, res) => {
    res.json({
      object: 'list',
      data: d.registry.list().map((m) => ({ id: m.id, object: 'model', created: m.created, owned_by: 'kvrouter' })),
    });
  });
  app.get(p.health, (_req, res) => {
    const sets = d.registry.allSets();
    const body = {
      status: d.healthy() ? 'healthy' : 'unhealthy',
      models: d.registry.list().map((m) => m.id),
      instances: sets.flatMap((s) =>
        [...s.workers.values()]
          .filter((w) => w.routed)
          .map((w) => ({ model: s.model, namespace: s.namespace, component: s.component, endpoint: s.endpoint, instance_id: w.id.toString() })),
      ),
    };
    res.status(d.healthy() ? 200 : 503).json(body);
  });
  app.get(p.live, (_req, res) => void res.json({ status: 'live' }));
  app.get(p.metrics, (_req, res, next) => {
    d.metrics().then(
      (m) => void res.type(m.contentType).send(m.body),
      (e: unknown) => next(e),
    );
  });
  app.get('/busy_threshold', busyThresholdGet(d.registry));
  app.post('/busy_threshold', text, busyThresholdPost(d.registry));
  const spec = openApiSpec(p, d.enableAnthropicApi);
  app.get('/openapi.json', (_req, res) => void res.json(spec));
  app.use(docsRouter('/openapi.json'));

  const notYet = (req: Request, res: Response) => sendError(res, notImplemented(req.path));
  for (const path of [p.embeddings, p.responses, '/v1/images/generations', '/v1/videos/generations', '/v1/videos/generations/stream'])
    app.post(path, notYet);
  if (d.enableAnthropicApi) {
    app.post(p.anthropic, notYet);
    app.post(`${p.anthropic}/count_tokens`, notYet);
  }

  app.use((req: Request, res: Response) => {
    sendError(res, new KvrError('not_found', `no route for ${req.method} ${req.path}`, 404));
  });
  // Body-parser failures (413, bad encodings) and anything a handler passed on.
  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    const e = err as { type?: string; status?: number; message?: string };
    if (e?.type === 'entity.too.large')
      return sendError(
        res,
        new KvrError('payload_too_large', `request body exceeds the limit of ${d.bodyLimitMb} MB (DYN_HTTP_BODY_LIMIT_MB)`, 413, { field: 'body' }),
      );
    if (req.path === '/busy_threshold' && typeof e?.status === 'number' && e.status < 500)
      return void res.status(422).json({ error: e.message ?? 'malformed body' });
    sendError(res, err);
  });
  return app;
}
