/**
 * Worker registration in discovery (docs/protocol.md §6.1, §6.3): instance records and event channels
 * under the process lease, removal on shutdown, and watchers that yield typed changes.
 */
import {
  DecodeError,
  KvrError,
  eventChannelKey,
  eventChannelsPrefix,
  instanceKey,
  instancesPrefix,
  parseDiscoveryKey,
  parseJson,
  stringifyJson,
  type ParsedDiscoveryKey,
} from '@kvrouter/protocols';
import type { Discovery, DiscoveryWatch, NamespaceFilter, WatchEvent } from './discovery/types.js';
import type { Transport } from './rpc/types.js';
import { decodeFail, inputFail, obj, oneOf, str, u64, type Fail } from './validate.js';

export type DeviceType = 'cpu' | 'cuda';
export const DEVICE_TYPES: readonly DeviceType[] = ['cpu', 'cuda'];

/** §6.3; `instance_id` is the registering process's lease id. */
export interface Instance {
  namespace: string;
  component: string;
  endpoint: string;
  instance_id: bigint;
  transport: Transport;
  /** Absent counts as non-CPU. */
  device_type?: DeviceType;
}

const TRANSPORT_KINDS = ['tcp', 'nats_tcp', 'http', 'inproc'] as const;

function transport(v: unknown, field: string, f: Fail): Transport {
  const o = obj(v, field, f);
  const keys = Object.keys(o);
  if (keys.length !== 1)
    throw f(field, `expected exactly one of ${TRANSPORT_KINDS.join('|')}, got keys [${keys.join(', ')}]`);
  const k = oneOf(keys[0], field, f, TRANSPORT_KINDS);
  return { [k]: str(o[k], `${field}.${k}`, f) } as Transport;
}

function instanceFrom(v: unknown, f: Fail): Instance {
  const o = obj(v, 'instance', f);
  const out: Instance = {
    namespace: str(o.namespace, 'namespace', f),
    component: str(o.component, 'component', f),
    endpoint: str(o.endpoint, 'endpoint', f),
    instance_id: u64(o.instance_id, 'instance_id', f),
    transport: transport(o.transport, 'transport', f),
  };
  if (o.device_type !== undefined && o.device_type !== null)
    out.device_type = oneOf(o.device_type, 'device_type', f, DEVICE_TYPES);
  return out;
}

/** Instance JSON with the id as exact digits (§1). */
export function encodeInstance(i: Instance): string {
  const v = instanceFrom(i, inputFail);
  return stringifyJson(v);
}

/** Parses and validates instance JSON; with `key`, the key's levels and id must match the record. */
export function parseInstance(text: string, key?: string): Instance {
  const inst = instanceFrom(parseText(text, 'instance'), decodeFail);
  if (key !== undefined) {
    const k = parseDiscoveryKey(key);
    if (
      !k ||
      k.kind !== 'instances' ||
      k.namespace !== inst.namespace ||
      k.component !== inst.component ||
      k.endpoint !== inst.endpoint ||
      k.instance_id !== inst.instance_id
    )
      throw new DecodeError(`instance: record does not match its key ${key}`, { field: 'key' });
  }
  return inst;
}

function parseText(text: string, what: string): unknown {
  if (typeof text !== 'string') throw new DecodeError(`${what}: expected JSON text`, { field: what });
  try {
    return parseJson(text);
  } catch (e) {
    throw new DecodeError(`${what}: ${e instanceof Error ? e.message : String(e)}`, { field: what });
  }
}

/** A record this process wrote; `unregister` deletes it (the lease would on exit anyway). */
export interface Registration<T> {
  readonly key: string;
  readonly record: T;
  unregister(): Promise<void>;
}

function registration<T>(d: Discovery, key: string, record: T): Registration<T> {
  let done = false;
  return {
    key,
    record,
    unregister: async () => {
      if (done) return;
      done = true;
      await d.delete(key);
    },
  };
}

export interface RegisterInstanceOptions {
  namespace: string;
  component: string;
  endpoint: string;
  transport: Transport;
  device_type?: DeviceType;
}

/** Publishes `v1/instances/{ns}/{component}/{endpoint}/{lease:hex}` under the process lease. */
export async function registerInstance(
  d: Discovery,
  o: RegisterInstanceOptions,
): Promise<Registration<Instance>> {
  const inst = instanceFrom({ ...o, instance_id: d.leaseId }, inputFail);
  const key = instanceKey(inst.namespace, inst.component, inst.endpoint, inst.instance_id);
  await d.put(key, stringifyJson(inst));
  return registration(d, key, inst);
}

// ---------------------------------------------------------------------------------------------------
// Event channels (§5.2, §6.1)

export type EventTransport = { nats: string } | { zmq: string };

/** Where one publisher's events of one topic can be received. */
export interface EventChannel {
  namespace: string;
  component: string;
  topic: string;
  instance_id: bigint;
  transport: EventTransport;
}

function eventChannelFrom(v: unknown, f: Fail): EventChannel {
  const o = obj(v, 'event_channel', f);
  const t = obj(o.transport, 'transport', f);
  const keys = Object.keys(t);
  if (keys.length !== 1)
    throw f('transport', `expected exactly one of nats|zmq, got keys [${keys.join(', ')}]`);
  const k = oneOf(keys[0], 'transport', f, ['nats', 'zmq'] as const);
  return {
    namespace: str(o.namespace, 'namespace', f),
    component: str(o.component, 'component', f),
    topic: str(o.topic, 'topic', f),
    instance_id: u64(o.instance_id, 'instance_id', f),
    transport: { [k]: str(t[k], `transport.${k}`, f) } as EventTransport,
  };
}

export function parseEventChannel(text: string): EventChannel {
  return eventChannelFrom(parseText(text, 'event_channel'), decodeFail);
}

export interface RegisterEventChannelOptions {
  namespace: string;
  component: string;
  topic: string;
  transport: EventTransport;
}

/** Publishes `v1/event_channels/{ns}/{component}/{topic}/{lease:hex}` under the process lease. */
export async function registerEventChannel(
  d: Discovery,
  o: RegisterEventChannelOptions,
): Promise<Registration<EventChannel>> {
  const ch = eventChannelFrom({ ...o, instance_id: d.leaseId }, inputFail);
  const key = eventChannelKey(ch.namespace, ch.component, ch.topic, ch.instance_id);
  await d.put(key, stringifyJson(ch));
  return registration(d, key, ch);
}

// ---------------------------------------------------------------------------------------------------
// Typed watches

/** Key levels of a deleted record: all a consumer needs to drop it. */
export type KeyParts = Omit<ParsedDiscoveryKey, 'kind'>;

export type TypedChange<T> =
  | { type: 'put'; key: string; value: T }
  | { type: 'delete'; key: string; parts: KeyParts }
  | { type: 'synced' }
  /** A record that failed to parse; the watch goes on. */
  | { type: 'invalid'; key: string; error: KvrError };

export interface TypedWatch<T> extends AsyncIterableIterator<TypedChange<T>> {
  close(): void;
}

export interface WatchScope extends NamespaceFilter {
  component?: string;
  /** Endpoint (instances, cards) or topic (event channels). */
  endpoint?: string;
}

class MappedWatch<T> implements TypedWatch<T> {
  constructor(
    private readonly w: DiscoveryWatch,
    private readonly kind: ParsedDiscoveryKey['kind'],
    private readonly scope: WatchScope,
    private readonly parse: (key: string, value: string) => T,
  ) {}

  /** Skips keys of other kinds or outside the component/endpoint scope. */
  private inScope(key: string): ParsedDiscoveryKey | null {
    const k = parseDiscoveryKey(key);
    if (!k || k.kind !== this.kind) return null;
    if (this.scope.component !== undefined && k.component !== this.scope.component) return null;
    if (this.scope.endpoint !== undefined && k.endpoint !== this.scope.endpoint) return null;
    return k;
  }

  private map(e: WatchEvent): TypedChange<T> | null {
    if (e.type === 'synced') return e;
    const k = this.inScope(e.key);
    if (!k) return null;
    if (e.type === 'delete') {
      const { kind: _kind, ...parts } = k;
      return { type: 'delete', key: e.key, parts };
    }
    try {
      return { type: 'put', key: e.key, value: this.parse(e.key, e.value) };
    } catch (err) {
      if (err instanceof KvrError) return { type: 'invalid', key: e.key, error: err };
      throw err;
    }
  }

  async next(): Promise<IteratorResult<TypedChange<T>>> {
    for (;;) {
      const r = await this.w.next();
      if (r.done) return { value: undefined, done: true };
      const m = this.map(r.value);
      if (m) return { value: m, done: false };
    }
  }

  async return(): Promise<IteratorResult<TypedChange<T>>> {
    this.w.close();
    return { value: undefined, done: true };
  }

  close(): void {
    this.w.close();
  }

  [Symbol.asyncIterator](): this {
    return this;
  }
}

/**
 * The narrowest key prefix for a scope: an exact namespace (and no namespace prefix) lets the
 * backend scan only that subtree; otherwise the namespace filter and key parsing do the narrowing.
 */
export function scopedWatch<T>(
  d: Discovery,
  kind: ParsedDiscoveryKey['kind'],
  prefixOf: (ns?: string, comp?: string, ep?: string) => string,
  scope: WatchScope,
  parse: (key: string, value: string) => T,
): TypedWatch<T> {
  const exact = scope.namespacePrefix === undefined ? scope.namespace : undefined;
  let prefix: string;
  if (exact === undefined) prefix = prefixOf();
  else if (scope.component === undefined) prefix = prefixOf(exact);
  else prefix = prefixOf(exact, scope.component, scope.endpoint);
  const w = d.watch(prefix, { namespace: scope.namespace, namespacePrefix: scope.namespacePrefix });
  return new MappedWatch(w, kind, scope, parse);
}

/** Instances (e.g. of `{ns}/{comp}/generate`), initial listing first, as typed changes. */
export function watchInstances(d: Discovery, scope: WatchScope = {}): TypedWatch<Instance> {
  return scopedWatch(d, 'instances', instancesPrefix, scope, (key, value) => parseInstance(value, key));
}

export function watchEventChannels(d: Discovery, scope: WatchScope = {}): TypedWatch<EventChannel> {
  return scopedWatch(d, 'event_channels', eventChannelsPrefix, scope, (_key, value) =>
    parseEventChannel(value),
  );
}
