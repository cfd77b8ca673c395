/**
 * Event-channel records in discovery (`v1/event_channels/{ns}/{component}/{topic}/{id:hex}`, §6.1):
 * the key says who publishes what, the value how to reach it. Value format (implementation choice):
 * JSON `{"transport": "zmq", "endpoint": "tcp://host:port"}` or `{"transport": "nats", "subject": s}`;
 * a bare `tcp://…` string is read as a ZMQ endpoint.
 */
import { eventChannelKey } from '@kvrouter/protocols';
import type { Discovery } from '@kvrouter/runtime';
import type { EventTopic } from './types.js';

/** What the planes need from discovery; `@kvrouter/runtime`'s `Discovery` satisfies it. */
export type ChannelDiscovery = Pick<Discovery, 'put' | 'delete' | 'watch'>;

export type ChannelRecord = { transport: 'zmq'; endpoint: string } | { transport: 'nats'; subject: string };

export const channelKey = (topic: EventTopic, instanceId: bigint): string =>
  eventChannelKey(topic.namespace, topic.component, topic.topic, instanceId);

export function encodeChannel(r: ChannelRecord): string {
  return JSON.stringify(r);
}

/** Null for a value that names no usable channel (it is ignored, not fatal: discovery is shared). */
export function parseChannel(value: string): ChannelRecord | null {
  const v = value.trim();
  if (/^tcp:\/\/[^\s/]+:[0-9]+$/.test(v)) return { transport: 'zmq', endpoint: v };
  let o: unknown;
  try {
    o = JSON.parse(v);
  } catch {
    return null;
  }
  if (typeof o !== 'object' || o === null) return null;
  const r = o as Record<string, unknown>;
  if (r.transport === 'zmq' && typeof r.endpoint === 'string' && /^tcp:\/\/[^\s/]+:[0-9]+$/.test(r.endpoint))
    return { transport: 'zmq', endpoint: r.endpoint };
  if (r.transport === 'nats' && typeof r.subject === 'string' && r.subject.length > 0)
    return { transport: 'nats', subject: r.subject };
  return null;
}
