#!/usr/bin/env node
/**
 * `kvrouter-indexer` (upstream `python -m dynamo.indexer`): the standalone HTTP indexer of
 * docs/protocol.md §7.8. Flags `--block-size` (required), `--port` (8090), `--threads` (4), `--peers`.
 * Exit codes (`runMain`): 0 after a clean shutdown, 1 on a startup failure, 2 on invalid
 * configuration, 130 on a second signal.
 */
import { parseAppConfig } from '@kvrouter/config/cli';
import { cliFiles, runMain } from '@kvrouter/router-host/main';
import { IndexerService } from './indexer-service.js';
import { stderrLogger as log } from './service.js';

const argv = process.argv.slice(2);
if (argv[0] === '--') argv.shift();
const { config } = parseAppConfig('indexer', argv, process.env, {
  info: {
    name: 'kvrouter-indexer',
    description:
      "Standalone KV indexer over HTTP, fed by engines' vLLM ZMQ KV events (python -m dynamo.indexer)",
  },
  ...cliFiles,
  onWarning: (w) => log.warn(w),
});

await runMain({
  start: () =>
    IndexerService.start({
      blockSize: config.blockSize,
      port: config.port,
      threads: config.threads,
      peers: config.peers,
      log,
    }),
  // One JSON line on stdout: where the indexer listens.
  ready: (svc) => ({ url: svc.url }),
  onSignal: (sig) => log.info(`${sig}: shutting down`),
  stop: (svc) => svc.close(),
});
