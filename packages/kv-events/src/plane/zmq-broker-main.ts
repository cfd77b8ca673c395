#!/usr/bin/env node
/**
 * The ZMQ event-plane broker as a process: `pnpm --filter @kvrouter/kv-events broker`. Environment
 * (upstream's broker binary names): `ZMQ_BROKER_XSUB_BIND` (default `tcp://0.0.0.0:5555`, publishers
 * connect here), `ZMQ_BROKER_XPUB_BIND` (default `tcp://0.0.0.0:5556`, subscribers connect here),
 * `ZMQ_BROKER_NAMESPACE` (comma-separated namespaces to register in, default `dynamo`), and the usual
 * `DYN_DISCOVERY_BACKEND` (`etcd` or `file`: register so `DYN_ZMQ_BROKER_ENABLED=true` clients find it;
 * unset or `mem`: no registration, clients use `DYN_ZMQ_BROKER_URL`), `ETCD_ENDPOINTS`, `DYN_FILE_KV`.
 * Prints one JSON line on stdout: `{"url": "xsub=… , xpub=…"}` (the `DYN_ZMQ_BROKER_URL` value).
 */
import { invalidArgument } from '@kvrouter/protocols';
import { createDiscovery, type Discovery } from '@kvrouter/runtime';
import { ZmqBroker } from './zmq-broker.js';

const log = (line: string): void => void process.stderr.write(`[zmq-broker] ${line}\n`);
const env = process.env;
const backend = env.DYN_DISCOVERY_BACKEND ?? 'mem';
const namespaces = (env.ZMQ_BROKER_NAMESPACE ?? 'dynamo')
  .split(',')
  .map((s) => s.trim())
  .filter((s) => s !== '');

let discovery: Discovery | null = null;
let broker: ZmqBroker;
try {
  if (backend === 'etcd' || backend === 'file')
    discovery = await createDiscovery({
      backend,
      etcdEndpoints: env.ETCD_ENDPOINTS ? env.ETCD_ENDPOINTS.split(',').map((s) => s.trim()) : undefined,
      fileRoot: env.DYN_FILE_KV || undefined,
    });
  else if (backend !== 'mem')
    throw invalidArgument('DYN_DISCOVERY_BACKEND', 'must be etcd, file or mem here', backend);
  broker = await ZmqBroker.start({
    xsubBind: env.ZMQ_BROKER_XSUB_BIND || 'tcp://0.0.0.0:5555',
    xpubBind: env.ZMQ_BROKER_XPUB_BIND || 'tcp://0.0.0.0:5556',
    discovery,
    namespaces,
    onError: (e) => log(`error: ${e instanceof Error ? e.message : String(e)}`),
  });
} catch (e) {
  process.stderr.write(`error: ${e instanceof Error ? e.message : String(e)}\n`);
  await discovery?.close().catch(() => undefined);
  process.exit(1);
}
log(
  `relaying ${broker.url}` +
    (discovery
      ? `; registered in namespace(s) ${namespaces.join(', ')} (${backend} discovery)`
      : '; not registered (use DYN_ZMQ_BROKER_URL)'),
);
process.stdout.write(`${JSON.stringify({ url: broker.url })}\n`);
let stopping = false;
const stop = (): void => {
  if (stopping) process.exit(130);
  stopping = true;
  void (async () => {
    await broker.close();
    await discovery?.close();
    process.exit(0);
  })();
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
