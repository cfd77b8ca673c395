#!/usr/bin/env node
/**
 * `kvrouter-router` (upstream `python -m dynamo.router`): the KV router as its own service. Exit
 * codes: 0 after a clean shutdown, 1 on a startup failure, 2 on invalid configuration, 130 on a
 * second signal during shutdown.
 */
import { parseAppConfig } from '@kvrouter/config/cli';
import { cliFiles, runMain } from '@kvrouter/router-host/main';
import { ENDPOINT_HELP, splitEndpointArg } from './args.js';
import { StandaloneRouter, stderrLogger as log } from './service.js';

const argv = process.argv.slice(2);
// `pnpm start -- --flag` hands the separator through.
if (argv[0] === '--') argv.shift();
if (argv.includes('-h') || argv.includes('--help'))
  process.stdout.write(`Standalone router flag:\n${ENDPOINT_HELP}\n`);

let split: ReturnType<typeof splitEndpointArg>;
try {
  split = splitEndpointArg(argv);
} catch (e) {
  process.stderr.write(`error: ${(e as Error).message}\n`);
  process.exit(2);
}
// A standalone router is a KV router (upstream has no mode flag): kv unless the mode is given.
const modeGiven =
  split.rest.some((a) => a === '--router-mode' || a.startsWith('--router-mode=')) ||
  (process.env.DYN_ROUTER_MODE ?? '') !== '';
const { config } = parseAppConfig(
  'router',
  modeGiven ? split.rest : ['--router-mode', 'kv', ...split.rest],
  process.env,
  {
    info: {
      name: 'kvrouter-router',
      description: 'Standalone KV-aware router for one worker endpoint (python -m dynamo.router)',
    },
    ...cliFiles,
    onWarning: (w) => log.warn(w),
  },
);
if (!split.endpoint) {
  process.stderr.write('error: the following arguments are required: --endpoint\n');
  process.exit(2);
}

await runMain({
  start: () => StandaloneRouter.start(config, split.endpoint!, { log }),
  // One machine-readable line on stdout for supervisors and tests: where this router listens.
  ready: (router) => ({
    router_id: router.routerId.toString(),
    system_url: router.systemUrl,
    transport: router.transport,
  }),
  onSignal: (sig) => log.info(`${sig}: deregistering and shutting down`),
  stop: (router) => router.close(),
  onStopError: (e) => log.error(`shutdown failed: ${(e as Error).message}`),
});
