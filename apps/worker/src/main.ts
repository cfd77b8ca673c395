#!/usr/bin/env node
/**
 * `kvrouter-worker`: puts one OpenAI-compatible engine (vLLM) behind kvrouter. Exit codes: 0 after a
 * clean shutdown, 1 on a startup failure (engine never answered, discovery unreachable), 2 on invalid
 * configuration, 130 on a second signal during shutdown.
 */
import { parseAppConfig } from '@kvrouter/config/cli';
import { KvrError } from '@kvrouter/protocols';
import { WorkerConfigError } from './options.js';
import { startWorker, type RunningWorker } from './worker.js';
import { cliFiles, runMain } from '@kvrouter/router-host/main';

/** In-flight streams get this long after SIGINT / SIGTERM before they end with `engine_shutdown`. */
const SHUTDOWN_GRACE_MS = 5000;

const log = (line: string): void => void process.stderr.write(`[worker] ${line}\n`);
const errText = (e: unknown): string =>
  e instanceof KvrError ? `${e.code}: ${e.message}` : e instanceof Error ? e.message : String(e);

const argv = process.argv.slice(2);
// `pnpm start -- --flag` hands the separator through.
if (argv[0] === '--') argv.shift();
const { config } = parseAppConfig('worker', argv, process.env, {
  info: {
    name: 'kvrouter-worker',
    description: 'Engine adapter: an OpenAI-compatible engine (vLLM) behind kvrouter',
  },
  ...cliFiles,
  onWarning: (w) => log(`warning: ${w}`),
});
await runMain<RunningWorker>({
  start: () =>
    startWorker(config, {
      log,
      // Discovery grants the lease again under the same id and puts every key back (issue 18).
      onLeaseLost: (err) => {
        log(`warning: discovery lease lost (${errText(err)}); re-registering`);
      },
    }),
  // One JSON line on stdout for supervisors and tests.
  ready: (w) => ({ instance_id: w.instanceId.toString(), model: w.model }),
  errorText: (e) => `error: ${errText(e)}`,
  exitCode: (e) => (e instanceof WorkerConfigError ? 2 : 1),
  onSignal: (sig) => log(`${sig}: deregistering; in-flight streams have ${SHUTDOWN_GRACE_MS} ms`),
  stop: (w) => w.stop(SHUTDOWN_GRACE_MS),
  onStopError: (e) => log(`shutdown failed: ${errText(e)}`),
});
