/** Route paths after the `DYN_HTTP_SVC_*_PATH_ENV` overrides (docs/configuration.md). */
export interface Paths {
  chat: string;
  completions: string;
  embeddings: string;
  responses: string;
  models: string;
  anthropic: string;
  health: string;
  live: string;
  metrics: string;
}

export function pathsFromConfig(c: {
  httpSvcChatPath: string;
  httpSvcCmpPath: string;
  httpSvcEmbPath: string;
  httpSvcResponsesPath: string;
  httpSvcModelsPath: string;
  httpSvcAnthropicPath: string;
  httpSvcHealthPath: string;
  httpSvcLivePath: string;
  httpSvcMetricsPath: string;
}): Paths {
  return {
    chat: c.httpSvcChatPath,
    completions: c.httpSvcCmpPath,
    embeddings: c.httpSvcEmbPath,
    responses: c.httpSvcResponsesPath,
    models: c.httpSvcModelsPath,
    anthropic: c.httpSvcAnthropicPath,
    health: c.httpSvcHealthPath,
    live: c.httpSvcLivePath,
    metrics: c.httpSvcMetricsPath,
  };
}
