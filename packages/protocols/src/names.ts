/**
 * Subjects, endpoint names, discovery keys and JetStream names (docs/protocol.md §5.1, §5.3, §6.1). Every
 * component that talks to another builds its names here, so they cannot drift apart.
 */
import { KvrError } from './errors.js';
import { u64FromHex, u64ToHex } from './ids.js';

// ---------------------------------------------------------------------------------------------------
// Endpoint names (§5.1)

export const GENERATE_ENDPOINT = 'generate';
export const ROUTER_DISCOVERY_ENDPOINT = 'router-discovery';
export const KV_INDEXER_QUERY_ENDPOINT = 'kv_indexer_query';
export const KV_INDEXER_RECORD_ENDPOINT = 'kv_indexer_record_routing_decision';
export const SESSION_CONTROL_ENDPOINT = 'session_control';
export const WORKER_KV_INDEXER_QUERY_PREFIX = 'worker_kv_indexer_query_dp';

/** Worker local indexer query endpoint of one dp rank (§3.5). */
export function workerKvIndexerQueryEndpoint(dpRank: number): string {
  if (!Number.isInteger(dpRank) || dpRank < 0 || dpRank > 0xffffffff)
    throw invalid('dp_rank', `must be a u32, got ${dpRank}`);
  return `${WORKER_KV_INDEXER_QUERY_PREFIX}${dpRank}`;
}

/** The dp rank of a `worker_kv_indexer_query_dp{rank}` endpoint name, or null for any other name. */
export function parseWorkerKvIndexerQueryEndpoint(name: string): number | null {
  if (!name.startsWith(WORKER_KV_INDEXER_QUERY_PREFIX)) return null;
  const s = name.slice(WORKER_KV_INDEXER_QUERY_PREFIX.length);
  if (!/^(0|[1-9][0-9]{0,9})$/.test(s)) return null;
  const n = Number(s);
  return n <= 0xffffffff ? n : null;
}

// ---------------------------------------------------------------------------------------------------
// Event-plane subjects (§5.1)

export const KV_EVENTS_TOPIC = 'kv-events';
export const ACTIVE_SEQUENCES_TOPIC = 'active_sequences_events';
export const KV_METRICS_TOPIC = 'kv_metrics';

export const componentSubject = (ns: string, component: string): string =>
  `namespace.${seg('namespace', ns)}.component.${seg('component', component)}`;

/** `namespace.{ns}.component.{comp}.kv-events` */
export const kvEventsSubject = (ns: string, component: string): string =>
  `${componentSubject(ns, component)}.${KV_EVENTS_TOPIC}`;

/** `namespace.{ns}.component.{comp}.active_sequences_events` (replica sync, §5.4) */
export const activeSequencesSubject = (ns: string, component: string): string =>
  `${componentSubject(ns, component)}.${ACTIVE_SEQUENCES_TOPIC}`;

/** `namespace.{ns}.kv_metrics` (ActiveLoad, §5.5) */
export const kvMetricsSubject = (ns: string): string =>
  `namespace.${seg('namespace', ns)}.${KV_METRICS_TOPIC}`;

// ---------------------------------------------------------------------------------------------------
// Discovery keys (§6.1): ids in lowercase hex without padding

export const INSTANCES_ROOT = 'v1/instances';
export const MDC_ROOT = 'v1/mdc';
export const EVENT_CHANNELS_ROOT = 'v1/event_channels';

/** `v1/instances/{ns}/{component}/{endpoint}/{id:hex}` */
export function instanceKey(ns: string, component: string, endpoint: string, instanceId: bigint): string {
  return `${INSTANCES_ROOT}/${path3(ns, component, endpoint)}/${hexId(instanceId)}`;
}

/** Watch prefix for instances; each given level narrows it. Ends with `/` so `gen` never matches `generate`. */
export function instancesPrefix(ns?: string, component?: string, endpoint?: string): string {
  return prefix(INSTANCES_ROOT, ns, component, endpoint);
}

/** `v1/mdc/{ns}/{component}/{endpoint}/{id:hex}[/{suffix}]` (suffix e.g. a LoRA name) */
export function mdcKey(
  ns: string,
  component: string,
  endpoint: string,
  instanceId: bigint,
  suffix?: string,
): string {
  const base = `${MDC_ROOT}/${path3(ns, component, endpoint)}/${hexId(instanceId)}`;
  if (suffix === undefined) return base;
  if (suffix.length === 0) throw invalid('suffix', 'must be non-empty when given');
  return `${base}/${suffix}`;
}

export function mdcPrefix(ns?: string, component?: string, endpoint?: string): string {
  return prefix(MDC_ROOT, ns, component, endpoint);
}

/** `v1/event_channels/{ns}/{component}/{topic}/{id:hex}` */
export function eventChannelKey(ns: string, component: string, topic: string, instanceId: bigint): string {
  return `${EVENT_CHANNELS_ROOT}/${seg('namespace', ns)}/${seg('component', component)}/${seg('topic', topic)}/${hexId(instanceId)}`;
}

export function eventChannelsPrefix(ns?: string, component?: string, topic?: string): string {
  return prefix(EVENT_CHANNELS_ROOT, ns, component, topic);
}

export interface ParsedDiscoveryKey {
  kind: 'instances' | 'mdc' | 'event_channels';
  namespace: string;
  component: string;
  /** Endpoint for instances and mdc keys, topic for event channels. */
  endpoint: string;
  instance_id: bigint;
  /** mdc only: the part after the id (may contain `/`). */
  suffix?: string;
}

/** Parses any of the three key kinds; null when `key` is not one of them (e.g. a foreign key under v1/). */
export function parseDiscoveryKey(key: string): ParsedDiscoveryKey | null {
  const parts = key.split('/');
  if (parts.length < 6 || parts[0] !== 'v1') return null;
  const kind = parts[1];
  if (kind !== 'instances' && kind !== 'mdc' && kind !== 'event_channels') return null;
  const [, , namespace, component, endpoint, hex] = parts as [string, string, string, string, string, string];
  if (!namespace || !component || !endpoint) return null;
  if (parts.length > 6 && kind !== 'mdc') return null;
  let instance_id: bigint;
  try {
    instance_id = u64FromHex(hex);
  } catch {
    return null;
  }
  const out: ParsedDiscoveryKey = { kind, namespace, component, endpoint, instance_id };
  if (parts.length > 6) {
    const suffix = parts.slice(6).join('/');
    if (!suffix) return null;
    out.suffix = suffix;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------
// JetStream durable mode (§5.3)

/** Lowercase; every char outside `[a-z0-9_-]` becomes `_`; then every `_` becomes `-`. */
export function slugify(s: string): string {
  let out = '';
  for (const ch of s.toLowerCase()) {
    const c = ch.charCodeAt(0);
    const keep = (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c === 0x2d;
    out += keep && ch.length === 1 ? ch : '-';
  }
  return out;
}

/** e.g. `namespace-dynamo-component-backend-kv-events` */
export const jetStreamName = (ns: string, component: string): string =>
  slugify(kvEventsSubject(ns, component));
/** Subjects bound to the stream. */
export const jetStreamSubjects = (stream: string): string => `${stream}.*`;
/** Where workers publish JSON RouterEvents. */
export const jetStreamPublishSubject = (stream: string): string => `${stream}.${KV_EVENTS_TOPIC}`;
/** Object-store bucket of the radix snapshot. */
export const radixBucketName = (ns: string, component: string): string =>
  slugify(`${componentSubject(ns, component)}-radix-bucket`);
export const RADIX_STATE_OBJECT = 'radix-state';
/** Durable pull consumer of one router: its instance id in lowercase hex. */
export const durableConsumerName = (routerId: bigint): string => hexId(routerId);

// ---------------------------------------------------------------------------------------------------

function invalid(field: string, msg: string): KvrError {
  return new KvrError('invalid_name', `${field} ${msg}`, 400, { field });
}

/**
 * A name segment: non-empty; no `/` (would shift key levels), whitespace or NATS wildcards. `.` is
 * allowed: upstream namespaces may be dotted, and slugify flattens it for JetStream.
 */
function seg(field: string, v: string): string {
  if (typeof v !== 'string' || v.length === 0) throw invalid(field, 'must be a non-empty string');
  if (/[/\s*>]/.test(v)) throw invalid(field, `must not contain '/', whitespace, '*' or '>', got "${v}"`);
  return v;
}

function path3(ns: string, component: string, endpoint: string): string {
  return `${seg('namespace', ns)}/${seg('component', component)}/${seg('endpoint', endpoint)}`;
}

function hexId(id: bigint): string {
  if (typeof id !== 'bigint' || id < 0n || id >= 1n << 64n)
    throw invalid('instance_id', `must be a u64 bigint, got ${String(id)}`);
  return u64ToHex(id);
}

function prefix(root: string, a?: string, b?: string, c?: string): string {
  let p = `${root}/`;
  if (a === undefined) return p;
  p += `${seg('namespace', a)}/`;
  if (b === undefined) return p;
  p += `${seg('component', b)}/`;
  if (c === undefined) return p;
  return `${p}${seg('endpoint', c)}/`;
}
