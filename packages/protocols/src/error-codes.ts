/**
 * THE error-code table: every code a `KvrError` may carry, with the HTTP status the HTTP layer answers
 * with and a one-line meaning. `docs/errors.md` is generated from it
 * (`pnpm --filter @kvrouter/protocols gen:errors`) and `error-codes.test.ts` checks that the table, the doc
 * and every `new KvrError('…')` in the tree agree. Add a row here before using a new code.
 *
 * Groups are for the doc only. Status 499 is nginx's "client closed request" (the caller went away).
 */
export interface ErrorSpec {
  readonly status: number;
  readonly group: ErrorGroup;
  readonly meaning: string;
}

export type ErrorGroup =
  'request' | 'routing' | 'transport' | 'discovery' | 'engine' | 'configuration' | 'internal';

export const ERROR_CODES = {
  // ---- request: the caller sent something wrong
  invalid_argument: {
    status: 400,
    group: 'request',
    meaning:
      'An argument of an API call, a flag or an option is out of range or malformed; `detail.field` names it.',
  },
  invalid_request: {
    status: 400,
    group: 'request',
    meaning: 'A request body (OpenAI, generate, router API) has a bad field; `detail.field` names it.',
  },
  invalid_json: { status: 400, group: 'request', meaning: 'The request body is not valid JSON.' },
  decode_error: {
    status: 400,
    group: 'request',
    meaning:
      'A wire message (KV event, envelope, msgpack frame) does not decode; `detail.field` names the path.',
  },
  invalid_name: {
    status: 400,
    group: 'request',
    meaning:
      'A namespace, component, endpoint or model name breaks the naming rules of subjects and discovery keys.',
  },
  payload_too_large: { status: 413, group: 'request', meaning: 'The body or frame exceeds the size limit.' },
  headers_too_large: {
    status: 431,
    group: 'request',
    meaning:
      'The request has more header fields than `--http-max-headers` (or a head above `--http-max-header-bytes`).',
  },
  too_many_streams: {
    status: 503,
    group: 'request',
    meaning: 'The frontend has `--http-max-streams` streaming responses open; retry after `Retry-After`.',
  },
  tokenize_budget_exceeded: {
    status: 413,
    group: 'request',
    meaning:
      'Tokenizing the prompt ran past its time budget (`--dyn-preprocess-budget-ms`); the tokenizer thread was replaced.',
  },
  tokenizer_overloaded: {
    status: 503,
    group: 'request',
    meaning:
      "Prompts waiting for a tokenizer thread already hold the queue's character bound; retry after `Retry-After`.",
  },
  request_too_large: {
    status: 400,
    group: 'request',
    meaning: 'The prompt plus max_tokens does not fit the engine (context length or KV capacity).',
  },
  duplicate_request: {
    status: 400,
    group: 'request',
    meaning: 'A request id already in flight was submitted again.',
  },
  direct_routing_requires_instance: {
    status: 400,
    group: 'request',
    meaning: '`--router-mode direct` needs `nvext.backend_instance_id` on every request.',
  },
  not_supported: {
    status: 400,
    group: 'request',
    meaning: 'The feature or option combination is not supported by this component.',
  },
  not_implemented: {
    status: 501,
    group: 'request',
    meaning: 'The endpoint is part of the API surface but kvrouter does not implement it yet.',
  },
  not_found: { status: 404, group: 'request', meaning: 'No such HTTP route or resource.' },
  method_not_allowed: {
    status: 405,
    group: 'request',
    meaning: 'The route exists but not for this HTTP method.',
  },
  model_not_found: { status: 404, group: 'request', meaning: 'The requested model is not served here.' },
  previous_response_not_found: {
    status: 404,
    group: 'request',
    meaning:
      'Responses API: `previous_response_id` names no stored response (unknown, expired, evicted, or `store: false`).',
  },
  unknown_worker: {
    status: 404,
    group: 'request',
    meaning: 'The worker id named by the call is not (or no longer) known to the router.',
  },
  unknown_endpoint: {
    status: 404,
    group: 'request',
    meaning: 'The request plane has no handler for the endpoint named in the call.',
  },
  invalid_trace: {
    status: 400,
    group: 'request',
    meaning: 'A replay trace row is malformed; the message names the row and field.',
  },
  invalid_time: {
    status: 400,
    group: 'request',
    meaning: 'A simulated engine was stepped to a time before its last step.',
  },
  cancelled: {
    status: 499,
    group: 'request',
    meaning: 'The caller cancelled or disconnected before the request finished.',
  },

  // ---- routing: no worker can take the request now
  no_eligible_workers: {
    status: 503,
    group: 'routing',
    meaning: 'No worker passes the filters (model, constraints, pins); retry later.',
  },
  all_workers_busy: {
    status: 503,
    group: 'routing',
    meaning: 'Every eligible worker is over its busy threshold (`error_type: overload`); retry later.',
  },
  pinned_worker_busy: {
    status: 503,
    group: 'routing',
    meaning: 'The pinned worker is over its busy threshold (`error_type: overload`); retry later.',
  },
  model_not_ready: {
    status: 503,
    group: 'routing',
    meaning: 'The model has fewer ready workers than `--router-min-initial-workers`.',
  },
  prefill_workers_missing: {
    status: 503,
    group: 'routing',
    meaning: 'Disaggregated serving: no prefill worker is available and decode fallback is off.',
  },
  router_closed: {
    status: 503,
    group: 'routing',
    meaning: 'The router is shutting down and takes no new requests.',
  },
  session_open_failed: {
    status: 503,
    group: 'routing',
    meaning: 'Opening a sticky session on the chosen worker failed.',
  },
  remote_indexer_error: {
    status: 503,
    group: 'routing',
    meaning: 'The remote indexer (`--use-remote-indexer`) failed to answer an overlap query.',
  },
  no_remote_indexer: {
    status: 503,
    group: 'routing',
    meaning: 'No router serving the indexer (`--serve-indexer`) is registered for the endpoint.',
  },
  topology_constraint_unavailable: {
    status: 503,
    group: 'routing',
    meaning:
      "The prefill worker's published topology is incomplete, so decode constraints cannot be derived.",
  },
  shutting_down: { status: 503, group: 'routing', meaning: 'The service is shutting down.' },

  // ---- transport: the request plane between router and worker (PROTOCOL §5.7, migration §14)
  cannot_connect: {
    status: 503,
    group: 'transport',
    meaning: 'Nothing listens at the target (refused, no NATS responder); migratable.',
  },
  connection_timeout: {
    status: 504,
    group: 'transport',
    meaning: 'The peer did not answer in time (connect or first message); migratable.',
  },
  disconnected: {
    status: 502,
    group: 'transport',
    meaning: 'The stream closed without its end (peer died, connection dropped); migratable.',
  },
  kv_events_failed: {
    status: 503,
    group: 'transport',
    meaning:
      'The KV event feed failed (subscription ended, receive, publish, replay, recovery or snapshot); the message says which.',
  },
  protocol_error: { status: 502, group: 'transport', meaning: 'The peer sent a malformed frame or message.' },
  request_timeout: {
    status: 504,
    group: 'transport',
    meaning: 'A unary call got no reply within its timeout.',
  },
  empty_response: { status: 502, group: 'transport', meaning: 'A unary call ended without a reply item.' },
  resource_exhausted: {
    status: 429,
    group: 'transport',
    meaning: 'The worker refused the request for lack of capacity; not migratable.',
  },
  listen_failed: {
    status: 500,
    group: 'transport',
    meaning:
      'A request-plane server could not listen on its port (in use, no permission); `detail.field` = port.',
  },
  bootstrap_listen_failed: {
    status: 500,
    group: 'transport',
    meaning: 'A prefill worker could not open its disaggregation bootstrap port.',
  },
  bootstrap_timeout: {
    status: 504,
    group: 'transport',
    meaning: 'A decode worker waited too long for the prefill peer at the bootstrap endpoint.',
  },
  prefill_failed: {
    status: 502,
    group: 'transport',
    meaning: 'Disaggregated serving: the prefill leg failed, so decode cannot start.',
  },
  online_error: {
    status: 502,
    group: 'transport',
    meaning: 'Online replay: the frontend under test answered unexpectedly.',
  },
  stream_error: {
    status: 502,
    group: 'transport',
    meaning: 'Online replay: the frontend reported an error inside a stream.',
  },
  http_error: {
    status: 502,
    group: 'transport',
    meaning: "Online replay: an HTTP call failed (the error carries the server's status).",
  },

  // ---- discovery: etcd / file / mem discovery
  discovery_unavailable: {
    status: 503,
    group: 'discovery',
    meaning: 'The discovery store cannot be reached or read.',
  },
  discovery_closed: {
    status: 500,
    group: 'discovery',
    meaning: 'The discovery client was used after this process closed its lease.',
  },
  lease_lost: {
    status: 503,
    group: 'discovery',
    meaning: "The process's discovery lease expired or was revoked; its registrations are gone.",
  },
  watch_failed: {
    status: 503,
    group: 'discovery',
    meaning: 'A discovery watch broke and could not be re-established.',
  },

  // ---- engine: the simulated engine or the real engine behind apps/worker
  engine_shutdown: {
    status: 503,
    group: 'engine',
    meaning: 'The worker is shutting down and dropped or refused the stream; migratable.',
  },
  engine_unavailable: {
    status: 503,
    group: 'engine',
    meaning: 'The engine behind the worker adapter is not reachable or not ready.',
  },
  engine_error: {
    status: 502,
    group: 'engine',
    meaning: 'The engine failed the request (5xx or an error item in the stream).',
  },
  engine_internal: {
    status: 500,
    group: 'engine',
    meaning: "The simulated engine's block accounting broke an invariant (a bug).",
  },
  tokenizer_load_failed: {
    status: 500,
    group: 'engine',
    meaning: "The model's tokenizer files could not be loaded or parsed.",
  },
  tokenizer_error: {
    status: 500,
    group: 'engine',
    meaning: 'A tokenizer thread failed while encoding or decoding.',
  },
  tokenizer_closed: { status: 503, group: 'engine', meaning: 'The tokenizer pool was used after it closed.' },
  chat_template_invalid: {
    status: 500,
    group: 'engine',
    meaning: "The model's chat template does not parse or fails to render.",
  },
  model_file_missing: {
    status: 503,
    group: 'engine',
    meaning:
      "A model file named by a card (tokenizer, template) is not in the discovery backend's blob store.",
  },
  model_file_corrupt: {
    status: 502,
    group: 'engine',
    meaning: 'A model file fetched from the blob store does not hash to the checksum its card names.',
  },

  // ---- configuration: refused at startup
  config_error: {
    status: 400,
    group: 'configuration',
    meaning: 'A flag or environment variable is invalid; `detail.flag` names it and the allowed values.',
  },
  invalid_engine_config: {
    status: 400,
    group: 'configuration',
    meaning: 'The simulated engine configuration is invalid; the message names the field.',
  },
  topology_config: {
    status: 400,
    group: 'configuration',
    meaning: 'The worker topology environment (taints, domains) is malformed; `detail.field` names it.',
  },
  metric_exists: {
    status: 500,
    group: 'configuration',
    meaning: 'A metric family was registered twice on one registry (a wiring bug).',
  },
  startup_timeout: {
    status: 500,
    group: 'configuration',
    meaning: 'Embedded workers did not become routable within the startup timeout.',
  },

  // ---- internal: invariants of the index and the worker-thread pool
  internal: {
    status: 500,
    group: 'internal',
    meaning: 'An unexpected failure; the message is not shown to HTTP clients.',
  },
  table_full: {
    status: 500,
    group: 'internal',
    meaning: 'The shared block table is over its hard load factor (the pool should have grown it).',
  },
  slots_exhausted: {
    status: 500,
    group: 'internal',
    meaning: "More (worker, dp_rank) slots are needed than the shared table's slot words hold.",
  },
  layout_mismatch: {
    status: 500,
    group: 'internal',
    meaning: 'A shared table buffer does not match the expected layout.',
  },
  not_shared: {
    status: 500,
    group: 'internal',
    meaning: 'A shared-memory operation was called on a table created without shared memory.',
  },
  not_approximate: {
    status: 500,
    group: 'internal',
    meaning: 'An approximate-index operation was called on a pool created without `approximate`.',
  },
  writer_crashed: {
    status: 500,
    group: 'internal',
    meaning: 'An index writer thread crashed; the pool rebuilds its lane.',
  },
  pool_worker_bundle: {
    status: 500,
    group: 'internal',
    meaning: 'Bundling the pool writer for source runs failed.',
  },
  pool_worker_missing: {
    status: 500,
    group: 'internal',
    meaning: 'The compiled pool writer file is missing (build first or set KVR_POOL_WORKER).',
  },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof ERROR_CODES;

export function isErrorCode(s: unknown): s is ErrorCode {
  return typeof s === 'string' && Object.prototype.hasOwnProperty.call(ERROR_CODES, s);
}

/** The table's HTTP status of a code (500 for a relayed code the table does not know). */
export function errorStatus(code: string): number {
  return isErrorCode(code) ? ERROR_CODES[code].status : 500;
}
