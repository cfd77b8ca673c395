/**
 * The HTTP request listener: every route of docs/configuration.md "HTTP endpoints" with the configured paths,
 * one body limit (`DYN_HTTP_BODY_LIMIT_MB`, 413), and one error middleware that turns anything
 * thrown into the OpenAI error body.
 *
 * Chat and completions requests (POST on their exact paths, plain UTF-8 bodies) skip express: its
 * per-request setup (prototype swaps on req/res, router walk, body-parser stack) cost about as much
 * CPU as routing the request. Everything else, and those paths in any other form (trailing slash,
 * other case, encoded bodies), goes through the express app with identical results.
 */
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import './cjs-interop.js';
import express from 'express';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { KvrError } from '@kvrouter/protocols';
import { modelNotFound } from '../errors.js';
import type { ModelRegistry } from '../models.js';
import { anthropicPlainError } from '../anthropic/errors.js';
import { registerApis } from './apis.js';
import { openAiPlainError } from './streams.js';
import type { AppDeps } from './deps.js';
import { busyThresholdGet, busyThresholdPost } from './busy.js';
import { docsRouter, openApiSpec } from './docs.js';
import { completionsHandler, type CompletionsHandler } from './openai.js';
import { watchResponse, type InternalErrorSink } from './internal-errors.js';
import { payloadTooLarge, plainUtf8Body, readUtf8Body, sendError } from './util.js';

/** `ok` when every known model has a ready worker (and there is at least one model), else why not. */
function workersCheck(registry: ModelRegistry): string {
  if (registry.models.size === 0) return 'no model has a worker (discovery lists none)';
  const without = [...registry.models.values()].filter((m) => !m.ready).map((m) => m.name);
  return without.length === 0 ? 'ok' : `no ready worker for model ${without.sort().join(', ')}`;
}

/** The checks of `/health` (and of KServe `ServerReady`): the probes, shutdown, workers; healthy = all `ok`. */
export async function healthChecks(
  d: Pick<AppDeps, 'probes' | 'healthy' | 'registry'>,
): Promise<Record<string, string>> {
  const probed = d.probes ? await d.probes() : null;
  return {
    ...probed?.checks,
    shutting_down: d.healthy() ? 'ok' : 'the frontend is shutting down',
    workers: workersCheck(d.registry),
  };
}

export function createApp(d: AppDeps): RequestListener {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  const p = d.paths;
  // Any content type: `curl -d` sends form encoding, and the body is JSON either way.
  const text = express.text({ type: () => true, limit: `${d.bodyLimitMb}mb` });
  const limitBytes = d.bodyLimitMb * 1024 * 1024;
  // The other APIs' bodies (Anthropic Messages, Responses, media) are read as the chat path reads
  // them: a plain UTF-8 body of 64 KiB or more is parsed from its bytes (an agent's 500 kB request
  // to /v1/messages costs what it costs on /v1/chat/completions); charsets and compression go
  // through express.text. `req.body` is whatever `parseBody` takes.
  const body: RequestHandler = (req, res, next) => {
    if (!plainUtf8Body(req)) return text(req, res, next);
    readUtf8Body(req, limitBytes, d.bodyLimitMb, d.bodyThreadBytes, d.bodyStrings ?? null).then((b) => {
      req.body = b;
      next();
    }, next);
  };

  const track = (res: ServerResponse, path: string): void => {
    // Answered with a 503 error in its API's shape if still unanswered when shutdown's grace ends.
    d.streams?.track?.(res, path.startsWith(p.anthropic) ? anthropicPlainError : openAiPlainError);
    const on = d.onInflight;
    if (!on) return;
    on(1);
    let done = false;
    const end = () => {
      if (done) return;
      done = true;
      on(-1);
    };
    res.on('finish', end);
    res.on('close', end);
  };
  // Before the in-flight tracking: an open dashboard stream must not hold up graceful shutdown.
  if (d.dashboard) app.use(d.dashboard.middleware);
  app.use((req, res, next) => {
    track(res, req.path);
    next();
  });

  const chat = completionsHandler(d.service, 'chat', d.parsers, d.lora, d.streams);
  const completions = completionsHandler(d.service, 'completions', d.parsers, d.lora, d.streams);
  const models = () =>
    [...d.registry.list(), ...(d.lora?.list(d.registry) ?? [])].sort((a, b) =>
      a.id < b.id ? -1 : a.id > b.id ? 1 : 0,
    );
  const viaExpress = (h: CompletionsHandler) => (req: Request, res: Response) => h(req, res, req.body);
  app.post(p.chat, text, viaExpress(chat));
  app.post(p.completions, text, viaExpress(completions));
  app.get(p.models, (_req, res) => {
    res.json({
      object: 'list',
      data: models().map((m) => ({ id: m.id, object: 'model', created: m.created, owned_by: 'kvrouter' })),
    });
  });
  // Model ids may hold slashes (`Qwen/Qwen3-8B`).
  app.get(`${p.models}/*id`, (req, res) => {
    const raw = (req.params as { id?: string | string[] }).id ?? '';
    const id = Array.isArray(raw) ? raw.join('/') : raw;
    const m = models().find((x) => x.id === id);
    if (!m) return sendError(res, modelNotFound(id));
    res.json({ id: m.id, object: 'model', created: m.created, owned_by: 'kvrouter' });
  });
  app.get(p.health, async (_req, res) => {
    const checks = await healthChecks(d);
    const reasons = Object.values(checks).filter((r) => r !== 'ok');
    const healthy = reasons.length === 0;
    const sets = d.registry.allSets();
    const body = {
      status: healthy ? 'healthy' : 'unhealthy',
      reasons,
      checks,
      models: d.registry.list().map((m) => m.id),
      ...(d.routing ? { routing: d.routing() } : {}),
      instances: sets.flatMap((s) =>
        [...s.workers.values()]
          .filter((w) => w.routed)
          .map((w) => ({
            model: s.model,
            namespace: s.namespace,
            component: s.component,
            endpoint: s.endpoint,
            instance_id: w.id.toString(),
          })),
      ),
    };
    res.status(healthy ? 200 : 503).json(body);
  });
  // Live = the process serves (also while unhealthy or shutting down).
  app.get(p.live, (_req, res) => void res.json({ status: 'live', message: 'the frontend serves HTTP' }));
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

  registerApis(app, { deps: d, body });

  app.use((req: Request, res: Response) => {
    sendError(res, new KvrError('not_found', `no route for ${req.method} ${req.path}`, 404));
  });
  // Body-parser failures (413, bad encodings) and anything a handler passed on.
  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    const e = err as { type?: string; status?: number; message?: string };
    if (e?.type === 'entity.too.large') return sendError(res, payloadTooLarge(d.bodyLimitMb));
    if (req.path === '/busy_threshold' && typeof e?.status === 'number' && e.status < 500)
      return void res.status(422).json({ error: e.message ?? 'malformed body' });
    sendError(res, err);
  });

  const fast = new Map<string, CompletionsHandler>([
    [p.chat, chat],
    [p.completions, completions],
  ]);
  const sink: InternalErrorSink = d.internalErrors ?? {
    error: (m) => console.error(`${new Date().toISOString()} ERROR ${m}`),
    count: () => undefined,
  };
  // Route labels of the internal-error counter: the configured paths, everything else `other`.
  const routes = new Set<string>([
    ...(Object.values(p) as string[]),
    '/busy_threshold',
    '/openapi.json',
    '/docs',
  ]);
  return (req: IncomingMessage, res: ServerResponse): void => {
    const url = req.url ?? '';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    watchResponse(req, res, routes.has(path) ? path : 'other', sink);
    const h = req.method === 'POST' ? fast.get(path) : undefined;
    if (h === undefined || !plainUtf8Body(req)) {
      app(req, res);
      return;
    }
    track(res, path);
    readUtf8Body(req, limitBytes, d.bodyLimitMb, d.bodyThreadBytes, d.bodyStrings ?? null)
      .then((body) => h(req, res, body))
      .catch((e: unknown) => sendError(res, e));
  };
}
