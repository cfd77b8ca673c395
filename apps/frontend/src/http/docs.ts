/**
 * `/openapi.json` (OpenAPI 3.0 of the routes this frontend serves, with the configured paths) and
 * `/docs`: Swagger UI from the swagger-ui-dist npm package, served locally (no CDN).
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import './cjs-interop.js';
import express from 'express';
import type { Paths } from './paths.js';

const errorSchema = {
  type: 'object',
  properties: {
    error: {
      type: 'object',
      properties: {
        message: { type: 'string' },
        type: { type: 'string' },
        code: { type: 'string', nullable: true },
      },
    },
  },
};

const nvextSchema = {
  type: 'object',
  description: 'kvrouter / Dynamo request extension (docs/protocol.md §15)',
  properties: {
    backend_instance_id: { type: 'integer', format: 'uint64' },
    dp_rank: { type: 'integer' },
    token_data: { type: 'array', items: { type: 'integer' } },
    agent_hints: { type: 'object' },
    session_control: { type: 'object' },
    extra_fields: { type: 'array', items: { type: 'string', enum: ['worker_id', 'timing'] } },
    annotations: { type: 'array', items: { type: 'string' } },
  },
};

function op(
  summary: string,
  body: Record<string, unknown> | null,
  ok: string,
  extra: Record<string, unknown> = {},
) {
  const responses: Record<string, unknown> = {
    '200': { description: ok },
    default: {
      description: 'OpenAI error',
      content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
    },
  };
  return {
    summary,
    ...(body ? { requestBody: { required: true, content: { 'application/json': { schema: body } } } } : {}),
    responses,
    ...extra,
  };
}

export function openApiSpec(p: Paths, anthropic: boolean): Record<string, unknown> {
  const chatBody = {
    type: 'object',
    required: ['model', 'messages'],
    properties: {
      model: { type: 'string' },
      messages: {
        type: 'array',
        minItems: 1,
        items: {
          type: 'object',
          required: ['role'],
          properties: { role: { type: 'string' }, content: { type: 'string' } },
        },
      },
      stream: { type: 'boolean' },
      stream_options: { type: 'object', properties: { include_usage: { type: 'boolean' } } },
      max_tokens: { type: 'integer', minimum: 1 },
      max_completion_tokens: { type: 'integer', minimum: 1 },
      temperature: { type: 'number' },
      top_p: { type: 'number' },
      stop: { oneOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' } }] },
      ignore_eos: { type: 'boolean' },
      nvext: { $ref: '#/components/schemas/Nvext' },
    },
  };
  const cmpBody = {
    type: 'object',
    required: ['model', 'prompt'],
    properties: {
      model: { type: 'string' },
      prompt: { oneOf: [{ type: 'string' }, { type: 'array', items: { type: 'integer' } }] },
      stream: { type: 'boolean' },
      max_tokens: { type: 'integer', minimum: 1 },
      echo: { type: 'boolean' },
      nvext: { $ref: '#/components/schemas/Nvext' },
    },
  };
  const videoBody = {
    type: 'object',
    required: ['model', 'prompt'],
    properties: {
      model: { type: 'string' },
      prompt: { type: 'string' },
      size: { type: 'string', description: 'WxH (default 832x480)' },
      seconds: { type: 'integer', minimum: 1, maximum: 60 },
      response_format: { type: 'string', enum: ['url', 'b64_json'] },
      output_format: { type: 'string', enum: ['mp4'] },
      stream: { type: 'boolean' },
      nvext: { type: 'object', properties: { fps: { type: 'integer' } } },
    },
  };
  const paths: Record<string, unknown> = {
    [p.chat]: {
      post: op(
        'OpenAI chat completions (SSE when stream is true)',
        chatBody,
        'chat.completion or SSE chunks ending with [DONE]',
      ),
    },
    [p.completions]: { post: op('OpenAI text completions', cmpBody, 'text_completion or SSE chunks') },
    [p.models]: { get: op('Models with at least one ready worker', null, 'model list') },
    [p.embeddings]: {
      post: op(
        'Embeddings from workers whose card model_type includes embedding (400 on a model without them)',
        {
          type: 'object',
          required: ['model', 'input'],
          properties: {
            model: { type: 'string' },
            input: {
              oneOf: [
                { type: 'string' },
                { type: 'array', items: { type: 'string' } },
                { type: 'array', items: { type: 'integer' } },
                { type: 'array', items: { type: 'array', items: { type: 'integer' } } },
              ],
            },
            encoding_format: { type: 'string', enum: ['float', 'base64'] },
            dimensions: { type: 'integer', minimum: 1, description: 'first n components, renormalised' },
          },
        },
        'list of embeddings with usage.prompt_tokens',
      ),
    },
    [p.responses]: {
      post: op(
        'OpenAI Responses API on the chat pipeline (SSE events when stream is true; previous_response_id from the in-memory store)',
        {
          type: 'object',
          required: ['model', 'input'],
          properties: {
            model: { type: 'string' },
            input: { oneOf: [{ type: 'string' }, { type: 'array', items: { type: 'object' } }] },
            instructions: { type: 'string' },
            tools: { type: 'array', items: { type: 'object', required: ['type', 'name'] } },
            tool_choice: {},
            reasoning: { type: 'object', properties: { effort: { type: 'string' } } },
            max_output_tokens: { type: 'integer', minimum: 1 },
            temperature: { type: 'number' },
            previous_response_id: { type: 'string' },
            store: { type: 'boolean' },
            stream: { type: 'boolean' },
          },
        },
        'response object, or SSE response.created … response.completed',
      ),
    },
    [`${p.responses}/{id}`]: {
      get: op('A stored response (404 when unknown, expired or not stored)', null, 'response object'),
    },
    '/v1/images/generations': {
      post: op(
        'Image generation on workers whose card model_type includes images (404 without; 501 when no worker has them)',
        {
          type: 'object',
          required: ['model', 'prompt'],
          properties: {
            model: { type: 'string' },
            prompt: { type: 'string' },
            n: { type: 'integer', minimum: 1, maximum: 10 },
            size: { type: 'string', description: 'WxH (default 1024x1024)' },
            response_format: { type: 'string', enum: ['url', 'b64_json'], description: 'url: a data: URL' },
          },
        },
        '{created, data: [{b64_json | url}]}',
      ),
    },
    '/v1/videos/generations': {
      post: op(
        'Video generation on workers whose card model_type includes videos',
        videoBody,
        'NvVideosResponse',
      ),
    },
    '/v1/videos/generations/stream': {
      post: op(
        'Video generation, streamed',
        videoBody,
        'SSE NvVideosResponse chunks (progress), then [DONE]',
      ),
    },
    [p.health]: { get: op('200 once discovery is connected, else 503', null, '{"status": "healthy"}') },
    [p.live]: { get: op('200 while the process serves', null, '{"status": "live"}') },
    [p.metrics]: { get: op('Prometheus text exposition', null, 'metrics text') },
    '/busy_threshold': {
      get: op('Busy thresholds of every model', null, '{"thresholds": [...]}'),
      post: op(
        "Set (any threshold field present) or read one model's busy thresholds",
        {
          type: 'object',
          required: ['model'],
          properties: {
            model: { type: 'string' },
            active_decode_blocks_threshold: { type: 'number', nullable: true },
            active_prefill_tokens_threshold: { type: 'integer', nullable: true },
            active_prefill_tokens_threshold_frac: { type: 'number', nullable: true },
          },
        },
        "the model's thresholds",
      ),
    },
  };
  if (anthropic) {
    const msgBody = {
      type: 'object',
      required: ['model', 'messages', 'max_tokens'],
      properties: {
        model: { type: 'string' },
        messages: { type: 'array', minItems: 1, items: { type: 'object', required: ['role', 'content'] } },
        max_tokens: { type: 'integer', minimum: 0, description: '0: prefill only (warms the cache)' },
        system: { oneOf: [{ type: 'string' }, { type: 'array', items: { type: 'object' } }] },
        tools: { type: 'array', items: { type: 'object', required: ['name', 'input_schema'] } },
        tool_choice: { type: 'object' },
        thinking: { type: 'object' },
        stop_sequences: { type: 'array', items: { type: 'string' } },
        stream: { type: 'boolean' },
        temperature: { type: 'number', minimum: 0, maximum: 1 },
        top_p: { type: 'number' },
        top_k: { type: 'integer' },
        metadata: { type: 'object', properties: { user_id: { type: 'string' } } },
        nvext: { $ref: '#/components/schemas/Nvext' },
      },
    };
    paths[p.anthropic] = {
      post: op(
        'Anthropic Messages (SSE events when stream is true); errors as {type: "error", error: {type, message}}',
        msgBody,
        'message, or SSE message_start … message_stop',
      ),
    };
    paths[`${p.anthropic}/count_tokens`] = {
      post: op(
        "Anthropic token count (the model's chat template and tokenizer)",
        { ...msgBody, required: ['model', 'messages'] },
        '{"input_tokens": n}',
      ),
    };
  }
  return {
    openapi: '3.0.3',
    info: {
      title: 'kvrouter frontend',
      version: '0.1.0',
      description: 'OpenAI-compatible frontend with a KV-cache-aware router',
    },
    paths,
    components: { schemas: { Error: errorSchema, Nvext: nvextSchema } },
  };
}

const html = (specUrl: string) => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>kvrouter API</title>
<link rel="stylesheet" href="/docs/swagger-ui.css"></head>
<body><div id="swagger-ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script src="/docs/init.js" data-spec="${specUrl}"></script>
</body></html>`;

const init = `window.ui = SwaggerUIBundle({ url: document.currentScript.dataset.spec, dom_id: '#swagger-ui' });\n`;

export function docsRouter(specUrl: string): express.Router {
  const dir = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
  const r = express.Router();
  r.get('/docs', (_req, res) => void res.type('html').send(html(specUrl)));
  r.get('/docs/init.js', (_req, res) => void res.type('application/javascript').send(init));
  r.use('/docs', express.static(dir, { index: false }));
  return r;
}
