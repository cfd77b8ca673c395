/**
 * From the resolved `worker` configuration to what the adapter starts. Pure: every mapping and
 * refusal is unit-tested without an engine.
 */
import type { ResolvedConfig } from '@kvrouter/config';
import { KvrError, parseEndpoint } from '@kvrouter/protocols';
import { brokerSetting, type ZmqBrokerSetting } from '@kvrouter/kv-events';

export type WorkerConfig = ResolvedConfig<'worker'>;

export class WorkerConfigError extends KvrError {
  constructor(message: string, flag: string) {
    super('config_error', message, 400, { flag });
    this.name = 'WorkerConfigError';
  }
}

export interface WorkerPlan {
  namespace: string;
  component: string;
  endpoint: string;
  engineUrl: string;
  /** Null: ask the engine (`/v1/models`). */
  modelName: string | null;
  blockSize: number;
  dataParallelSize: number;
  /** Per dp rank: the engine's PUB endpoint (rank 0's port + r); empty = no KV events. */
  kvEventEndpoints: string[];
  /** Per dp rank, or empty. */
  replayEndpoints: string[];
  discoveryBackend: WorkerConfig['discoveryBackend'];
  requestPlane: 'tcp' | 'nats';
  eventPlane: 'nats' | 'zmq';
  durableKvEvents: boolean;
  /** ZMQ event plane through brokers (`DYN_ZMQ_BROKER_URL` / `DYN_ZMQ_BROKER_ENABLED`); null = direct. */
  zmqBroker: ZmqBrokerSetting | null;
  tcpPort: number | null;
  /** `--model-type`: text generation (chat) or a pooling model serving embeddings. */
  modelType: 'chat' | 'embedding';
  warnings: string[];
}

/** `tcp://host:port` of rank 0 → rank r's (port + r), as vLLM offsets its KV event ports by dp rank. */
function perRank(ep: string | null, ranks: number, flag: string): string[] {
  if (ep === null) return [];
  const m = /^(tcp:\/\/.+):([0-9]+)$/.exec(ep);
  const port = m ? Number(m[2]) : NaN;
  if (!m || !(port >= 1) || port + ranks - 1 > 65535)
    throw new WorkerConfigError(
      `${flag} must be tcp://host:port with room for ${ranks} rank port(s), got ${ep}`,
      flag,
    );
  return Array.from({ length: ranks }, (_, r) => `${m[1]}:${port + r}`);
}

export function planFromConfig(c: WorkerConfig): WorkerPlan {
  const warnings: string[] = [];
  const path = parseEndpoint(c.endpoint, {
    fail: (message, flag) => {
      throw new WorkerConfigError(message, flag);
    },
  });
  const ranks = c.dataParallelSize;
  const kv = perRank(c.kvEventsEndpoint, ranks, '--kv-events-endpoint');
  const replay = perRank(c.kvEventsReplayEndpoint, ranks, '--kv-events-replay-endpoint');
  if (replay.length > 0 && kv.length === 0)
    throw new WorkerConfigError(
      '--kv-events-replay-endpoint needs --kv-events-endpoint',
      '--kv-events-replay-endpoint',
    );
  if (kv.length === 0)
    warnings.push(
      'no --kv-events-endpoint: the engine publishes no KV events here, so KV-aware routers see no cached blocks for this worker',
    );
  const eventPlane = c.eventPlane; // computed by the config table (--event-plane auto)
  if (c.routerDurableKvEvents && eventPlane !== 'nats')
    throw new WorkerConfigError(
      '--router-durable-kv-events requires --event-plane=nats',
      '--router-durable-kv-events',
    );
  let zmqBroker: ZmqBrokerSetting | null;
  try {
    zmqBroker = brokerSetting({ url: c.zmqBrokerUrl, enabled: c.zmqBrokerEnabled });
  } catch (e) {
    throw new WorkerConfigError(e instanceof Error ? e.message : String(e), 'DYN_ZMQ_BROKER_URL');
  }
  if (zmqBroker !== null && eventPlane !== 'zmq')
    warnings.push('DYN_ZMQ_BROKER_* apply to the zmq event plane only (ignored)');
  if (c.discoveryBackend === 'mem')
    warnings.push(
      'discovery backend mem: this worker is visible only inside this process; use --discovery-backend etcd or file',
    );
  return {
    ...path,
    engineUrl: c.engineUrl,
    modelName: c.modelName,
    blockSize: c.blockSize,
    dataParallelSize: ranks,
    kvEventEndpoints: kv,
    replayEndpoints: replay,
    discoveryBackend: c.discoveryBackend,
    requestPlane: c.requestPlane,
    eventPlane,
    durableKvEvents: c.routerDurableKvEvents,
    zmqBroker,
    tcpPort: c.tcpRpcPort,
    modelType: c.workerModelType,
    warnings,
  };
}
