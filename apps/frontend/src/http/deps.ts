/**
 * What the HTTP app and the API modules it registers (http/apis.ts) are given: a module of types
 * only, so the API modules can name them without importing the app that imports them.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import type { HealthReport } from '@kvrouter/runtime';
import type { ModelRegistry } from '../models.js';
import type { LoraCatalog } from '../openai/lora.js';
import type { InferenceService } from '../service.js';
import type { InternalErrorSink } from './internal-errors.js';
import type { StringCache } from './json-bytes.js';
import type { ParserFlags } from './openai.js';
import type { Paths } from './paths.js';
import type { StreamRegistry } from './streams.js';

export interface AppDeps {
  service: InferenceService;
  registry: ModelRegistry;
  paths: Paths;
  bodyLimitMb: number;
  /** `--http-body-thread-bytes`: chat/completions bodies this large are parsed on the body thread (0 or absent = never). */
  bodyThreadBytes?: number;
  /** `--http-body-string-cache-mb`: long strings of earlier bodies, reused by byte equality (null or absent = none). */
  bodyStrings?: StringCache | null;
  enableAnthropicApi: boolean;
  /** Prometheus exposition (content type, text). */
  metrics: () => Promise<{ contentType: string; body: string }>;
  /** False once shutdown began (the process still serves `/live`, but can no longer route). */
  healthy: () => boolean;
  /**
   * The connection probes of `/health` (discovery reachable, NATS up where routing needs it);
   * absent: none. `/health` adds `shutting_down` and `workers` (at least one ready worker per model).
   */
  probes?: (() => Promise<HealthReport>) | null;
  /** Bounded tables report their size and limit here (`dynamo_frontend_table_*`, issue 17); absent: not reported. */
  tables?: { register(table: string, read: () => { entries: number; limit: number } | null): void } | null;
  /** `/health` detail `routing`: the truth-checked routing report per model (issue 19); absent: none. */
  routing?: (() => unknown) | null;
  /** `/dashboard` and its event stream (`--dashboard`; null when off). */
  dashboard?: { middleware: (req: IncomingMessage, res: ServerResponse, next: () => void) => void } | null;
  /** Number of in-flight HTTP requests changes (graceful shutdown waits for zero). */
  onInflight?: (delta: number) => void;
  /** `--dyn-tool-call-parser` / `--dyn-reasoning-parser` (override every card). */
  parsers?: ParserFlags | null;
  /** LoRA adapters registered by workers, served as models. */
  lora?: LoraCatalog | null;
  /** Open SSE responses (graceful shutdown cuts them with an error event); absent: not tracked. */
  streams?: StreamRegistry | null;
  /** Where internal errors (500) are logged and counted (default: stderr, not counted). */
  internalErrors?: InternalErrorSink | null;
  /** `--responses-store-size` / `--responses-store-ttl-secs` (`previous_response_id`); absent: 1000 / 3600. */
  responsesStore?: { size: number; ttlSecs: number } | null;
}

/** What every API module gets: the app's dependencies and the shared body reader (any content type, body limit). */
export interface ApiContext {
  deps: AppDeps;
  /**
   * Reads the body with the configured limit (413 past it); `req.body` is what `parseBody` takes
   * (the text, or a large plain UTF-8 body's bytes, parsed value by value: http/json-bytes.ts).
   */
  body: RequestHandler;
}
