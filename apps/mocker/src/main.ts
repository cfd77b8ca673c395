#!/usr/bin/env node
/**
 * `kvrouter-mocker` (upstream `python -m dynamo.mocker`): simulated engine workers. Exit codes:
 * 0 after a clean shutdown, 1 on a startup failure, 2 on invalid configuration, 130 on a second
 * signal during shutdown.
 */
import { runMain } from '@kvrouter/router-host/main';
import { errText, resolveMockerConfig, startMocker } from './mocker.js';
import { MockerConfigError } from './options.js';
import { startVllmCompat, vllmCompatPlan } from './vllm-compat.js';

/** In-flight streams get this long after SIGINT / SIGTERM before they end with `engine_shutdown`. */
const SHUTDOWN_GRACE_MS = 5000;

const log = (line: string): void => void process.stderr.write(`[mocker] ${line}\n`);

const argv = process.argv.slice(2);
// `pnpm start -- --flag` hands the separator through.
if (argv[0] === '--') argv.shift();
const config = resolveMockerConfig(argv, process.env, { log });
// Fault injection (`pnpm soak`): SIGUSR2 stops the workers' KV events, the next one resumes them.
let kvMuted = false;
process.on('SIGUSR2', () => {
  kvMuted = !kvMuted;
  log(`SIGUSR2: KV events ${kvMuted ? 'stopped' : 'resumed'}`);
});
await runMain<{ stop(graceMs?: number): Promise<void>; ready: unknown }>({
  start: async () => {
    const vplan = vllmCompatPlan(config);
    if (vplan !== null) {
      const m = await startVllmCompat(config, vplan, { log });
      // One JSON line on stdout: the engines' HTTP and ZMQ addresses (ports may be OS-assigned).
      return { stop: (g) => m.stop(g), ready: { engines: m.describe() } };
    }
    const m = await startMocker(config, {
      log,
      kvEventsMuted: () => kvMuted,
      // Discovery grants the lease again under the same id and puts every key back (issue 18).
      onLeaseLost: (id, err) => {
        log(`warning: discovery lease of worker ${id.toString(16)} lost (${errText(err)}); re-registering`);
      },
    });
    return { stop: (g) => m.stop(g), ready: null };
  },
  ready: (m) => m.ready,
  errorText: (e) => `error: ${e instanceof MockerConfigError ? e.message : errText(e)}`,
  onSignal: (sig) => log(`${sig}: deregistering; in-flight streams have ${SHUTDOWN_GRACE_MS} ms`),
  stop: (m) => m.stop(SHUTDOWN_GRACE_MS),
  onStopError: (e) => log(`shutdown failed: ${errText(e)}`),
});
