#!/usr/bin/env node
/**
 * `kvrouter-frontend` (`pnpm --filter @kvrouter/frontend start`): resolves the configuration from
 * the one flag table, starts the frontend, prints the URL and a ready-to-paste curl example, and
 * shuts down gracefully on SIGTERM / SIGINT (`runMain`: exit 0 clean, 1 startup failure, 2 invalid
 * configuration, 130 on a second signal). `-i` runs the interactive chat instead of HTTP.
 */
import fs from 'node:fs';
import { parseAppConfig } from '@kvrouter/config/cli';
import { cliFiles, runMain } from '@kvrouter/router-host/main';
import { Frontend, consoleLogger } from './frontend.js';
import { runInteractive } from './interactive.js';

// `pnpm --filter` runs this in apps/frontend; relative paths on the command line mean the caller's directory.
const callerDir = process.env.INIT_CWD;
if (callerDir && fs.statSync(callerDir, { throwIfNoEntry: false })?.isDirectory()) process.chdir(callerDir);
// `npm start -- --flag` can leave a literal `--` in front.
const argv = process.argv.slice(2);
if (argv[0] === '--') argv.shift();

const { config } = parseAppConfig('frontend', argv, process.env, {
  info: {
    name: 'kvrouter-frontend',
    description: 'KV-cache-aware OpenAI-compatible frontend with an embedded router',
  },
  ...cliFiles,
});

await runMain({
  start: () => Frontend.start(config, { noHttp: config.interactive }),
  ready: (fe) => {
    if (config.interactive) return null;
    const model = fe.registry.list()[0]?.id ?? '<model>';
    const url = fe.url;
    consoleLogger.info(
      `kvrouter frontend listening on ${url} (router mode ${config.routerMode}, discovery ${config.discoveryBackend})`,
    );
    return `
Try it:

  curl -s ${url}/v1/chat/completions -H 'Content-Type: application/json' ${url.startsWith('https') ? '-k ' : ''}\\
    -d '{"model": "${model}", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 32}'

Models: ${url}/v1/models   Metrics: ${url}${config.httpSvcMetricsPath}   API docs: ${url}/docs
`;
  },
  // Interactive mode: the session's end ends the process.
  run: config.interactive
    ? async (fe) => {
        await runInteractive(fe, process.stdin, process.stdout);
        return 0;
      }
    : undefined,
  onSignal: (sig) =>
    consoleLogger.info(
      `${sig}: shutting down (up to ${config.httpGracefulShutdownTimeoutSecs}s for in-flight requests)`,
    ),
  stop: (fe) => fe.close(config.interactive ? 0 : undefined),
  onStopError: (e) => console.error(`error during shutdown: ${(e as Error).message}`),
});
