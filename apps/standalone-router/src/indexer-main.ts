#!/usr/bin/env node
/**
 * `kvrouter-indexer` (upstream `python -m dynamo.indexer`): the standalone HTTP indexer of
 * PROTOCOL.md §7.8. Flags `--block-size` (required), `--port` (8090), `--threads` (4), `--peers`.
 * Exit codes: 0 after a clean shutdown, 1 on a startup failure, 2 on invalid configuration.
 */
import fs from 'node:fs';
import { parseAppConfig } from '@kvrouter/config/cli';
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
  isDirectory: (p) => fs.statSync(p, { throwIfNoEntry: false })?.isDirectory() === true,
  writeFile: (p, text) => fs.writeFileSync(p, text),
  onWarning: (w) => log.warn(w),
});

let svc: IndexerService;
try {
  svc = await IndexerService.start({
    blockSize: config.blockSize,
    port: config.port,
    threads: config.threads,
    peers: config.peers,
    log,
  });
} catch (e) {
  process.stderr.write(`error: ${(e as Error).message}\n`);
  process.exit(1);
}
process.stdout.write(`${JSON.stringify({ url: svc.url })}\n`);

let signals = 0;
const stop = (sig: string): void => {
  if (++signals > 1) process.exit(130);
  log.info(`${sig}: shutting down`);
  svc.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
};
process.on('SIGINT', () => stop('SIGINT'));
process.on('SIGTERM', () => stop('SIGTERM'));
