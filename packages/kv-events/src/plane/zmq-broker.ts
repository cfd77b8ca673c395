/**
 * ZMQ broker mode of the event plane (docs/protocol.md §5.2, docs/configuration.md `DYN_ZMQ_BROKER_URL`,
 * `DYN_ZMQ_BROKER_ENABLED`): an XSUB/XPUB proxy relays every publisher to every subscriber, so the
 * connection count is publishers + subscribers instead of their product. Publishers connect their PUB
 * socket to the broker's XSUB side, subscribers their SUB socket to its XPUB side; the frames are the
 * direct mode's (4 frames, envelope inside).
 *
 * Addressing, as upstream Dynamo:
 * - `DYN_ZMQ_BROKER_URL="xsub=tcp://h1:5555;tcp://h2:5555 , xpub=tcp://h1:5556;tcp://h2:5556"` names the
 *   brokers directly (several = high availability: publishers send to all, subscribers read all and
 *   drop duplicates by (publisher_id, sequence));
 * - else with `DYN_ZMQ_BROKER_ENABLED=true` the brokers come from discovery: each broker registers
 *   `v1/event_channels/{ns}/zmq_broker/broker/{id:hex}` = JSON
 *   `{"transport": "zmq_broker", "xsub_endpoints": [...], "xpub_endpoints": [...]}` in the namespaces it
 *   serves, and planes follow that prefix (brokers may come and go).
 */
import { networkInterfaces } from 'node:os';
import { Proxy, XPublisher, XSubscriber } from 'zeromq';
import {
  eventChannelKey,
  eventChannelsPrefix,
  invalidArgument,
  errorMessage,
  KvrError,
} from '@kvrouter/protocols';

import type { ChannelDiscovery } from './channels.js';

export interface ZmqBrokerEndpoints {
  /** Where publishers connect (the broker's XSUB side). */
  xsub: readonly string[];
  /** Where subscribers connect (the broker's XPUB side). */
  xpub: readonly string[];
}

/** Static brokers, or `discovery`: follow the brokers registered in the topic's namespace. */
export type ZmqBrokerSetting = ZmqBrokerEndpoints | 'discovery';

/** Discovery component and topic under which brokers register (upstream's component name). */
export const BROKER_COMPONENT = 'zmq_broker';
const BROKER_TOPIC = 'broker';

const ENDPOINT = /^(tcp|ipc|inproc):\/\/\S+$/;

/** `xsub=<urls> , xpub=<urls>` with `;`-separated URLs (upstream's `parse_broker_url`). */
export function parseBrokerUrl(url: string, field = 'DYN_ZMQ_BROKER_URL'): ZmqBrokerEndpoints {
  const parts = url.split(',').map((s) => s.trim());
  if (parts.length !== 2)
    throw invalidArgument(field, `expected 'xsub=<urls> , xpub=<urls>', got ${JSON.stringify(url)}`);
  let xsub: string[] = [];
  let xpub: string[] = [];
  for (const p of parts) {
    const list = (s: string) =>
      s
        .split(';')
        .map((x) => x.trim())
        .filter((x) => x !== '');
    if (p.startsWith('xsub=')) xsub = list(p.slice(5));
    else if (p.startsWith('xpub=')) xpub = list(p.slice(5));
    else throw invalidArgument(field, `each part must start with xsub= or xpub=, got ${JSON.stringify(p)}`);
  }
  if (xsub.length === 0 || xpub.length === 0)
    throw invalidArgument(field, `needs at least one xsub and one xpub endpoint, got ${JSON.stringify(url)}`);
  for (const e of [...xsub, ...xpub])
    if (!ENDPOINT.test(e)) throw invalidArgument(field, `not a ZMQ endpoint: ${JSON.stringify(e)}`);
  return { xsub, xpub };
}

/** docs/configuration.md semantics: the URL wins; else `enabled` means discovery; else direct mode (null). */
export function brokerSetting(o: {
  url: string | null | undefined;
  enabled: boolean;
}): ZmqBrokerSetting | null {
  if (o.url) return parseBrokerUrl(o.url);
  return o.enabled ? 'discovery' : null;
}

export const brokerChannelKey = (namespace: string, instanceId: bigint): string =>
  eventChannelKey(namespace, BROKER_COMPONENT, BROKER_TOPIC, instanceId);

export const brokerChannelsPrefix = (namespace: string): string =>
  eventChannelsPrefix(namespace, BROKER_COMPONENT, BROKER_TOPIC);

export function encodeBrokerChannel(e: ZmqBrokerEndpoints): string {
  return JSON.stringify({ transport: 'zmq_broker', xsub_endpoints: e.xsub, xpub_endpoints: e.xpub });
}

/** Null for anything else (discovery is shared; a foreign value is ignored, not fatal). */
export function parseBrokerChannel(value: string): ZmqBrokerEndpoints | null {
  let o: unknown;
  try {
    o = JSON.parse(value);
  } catch {
    return null;
  }
  const r = (typeof o === 'object' && o !== null ? o : {}) as Record<string, unknown>;
  const ok = (v: unknown): v is string[] =>
    Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === 'string' && ENDPOINT.test(x));
  if (r.transport !== 'zmq_broker' || !ok(r.xsub_endpoints) || !ok(r.xpub_endpoints)) return null;
  return { xsub: r.xsub_endpoints, xpub: r.xpub_endpoints };
}

export interface ZmqBrokerOptions {
  /** XSUB bind address (publishers connect here); default `tcp://127.0.0.1:0`. */
  xsubBind?: string;
  /** XPUB bind address (subscribers connect here); default `tcp://127.0.0.1:0`. */
  xpubBind?: string;
  /** Host put into advertised endpoints when binding a wildcard address; default the first non-internal IPv4. */
  advertiseHost?: string;
  /** Register in discovery (for `DYN_ZMQ_BROKER_ENABLED=true` clients) under these namespaces. */
  discovery?: (ChannelDiscovery & { readonly leaseId: bigint }) | null;
  namespaces?: readonly string[];
  /** Messages queued per peer before the proxy drops (default 100 000). */
  highWaterMark?: number;
  onError?: (err: unknown) => void;
}

/**
 * The XSUB/XPUB proxy; its loop runs on a libzmq worker thread (zeromq's `Proxy`), so relaying costs
 * the Node event loop nothing. Can run inside any process or as `pnpm --filter @kvrouter/kv-events broker`.
 */
export class ZmqBroker {
  private closed = false;

  private constructor(
    private readonly proxy: Proxy<XSubscriber, XPublisher>,
    private readonly running: Promise<void>,
    readonly endpoints: ZmqBrokerEndpoints,
    private readonly keys: string[],
    private readonly opts: ZmqBrokerOptions,
  ) {}

  static async start(o: ZmqBrokerOptions = {}): Promise<ZmqBroker> {
    const xsubBind = o.xsubBind ?? 'tcp://127.0.0.1:0';
    const xpubBind = o.xpubBind ?? 'tcp://127.0.0.1:0';
    if (!ENDPOINT.test(xsubBind))
      throw invalidArgument('xsubBind', `not a ZMQ endpoint: ${JSON.stringify(xsubBind)}`);
    if (!ENDPOINT.test(xpubBind))
      throw invalidArgument('xpubBind', `not a ZMQ endpoint: ${JSON.stringify(xpubBind)}`);
    const hwm = o.highWaterMark ?? 100_000;
    const xsub = new XSubscriber({ receiveHighWaterMark: hwm, linger: 0 });
    const xpub = new XPublisher({ sendHighWaterMark: hwm, linger: 0 });
    try {
      await xsub.bind(xsubBind);
      await xpub.bind(xpubBind);
    } catch (e) {
      xsub.close();
      xpub.close();
      throw invalidArgument('bind', `broker cannot bind ${xsubBind} / ${xpubBind}: ${errorMessage(e)}`);
    }
    const host = o.advertiseHost ?? advertiseHost();
    const endpoints = {
      xsub: [advertised(xsub.lastEndpoint!, host)],
      xpub: [advertised(xpub.lastEndpoint!, host)],
    };
    const proxy = new Proxy(xsub, xpub);
    const running = proxy.run().catch((e: unknown) =>
      o.onError?.(
        new KvrError('kv_events_failed', `zmq broker stopped: ${errorMessage(e)}`, undefined, undefined, {
          cause: e,
        }),
      ),
    );
    const keys: string[] = [];
    const broker = new ZmqBroker(proxy, running, endpoints, keys, o);
    try {
      if (o.discovery)
        for (const ns of o.namespaces ?? []) {
          const key = brokerChannelKey(ns, o.discovery.leaseId);
          await o.discovery.put(key, encodeBrokerChannel(endpoints));
          keys.push(key);
        }
    } catch (e) {
      await broker.close();
      throw e;
    }
    return broker;
  }

  /** The `DYN_ZMQ_BROKER_URL` value that reaches this broker. */
  get url(): string {
    return `xsub=${this.endpoints.xsub.join(';')} , xpub=${this.endpoints.xpub.join(';')}`;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const d = this.opts.discovery;
    if (d) await Promise.all(this.keys.map((k) => d.delete(k).catch(() => undefined)));
    this.proxy.terminate();
    await this.running;
  }
}

/** `tcp://0.0.0.0:5555` → `tcp://{host}:5555`; concrete addresses stay as they are. */
function advertised(bound: string, host: string): string {
  return bound.replace(/^tcp:\/\/(0\.0\.0\.0|\*|\[::\]|::):/, `tcp://${host}:`);
}

function advertiseHost(): string {
  for (const list of Object.values(networkInterfaces()))
    for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  return '127.0.0.1';
}
