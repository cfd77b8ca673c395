import { defaultEventPlane, invalidArgument, type DiscoveryBackendKind } from '@kvrouter/protocols';
import type { NatsConnection } from '@nats-io/transport-node';
import type { ChannelDiscovery } from './channels.js';
import { InprocEventBus, InprocEventPlane } from './inproc.js';
import { NatsEventPlane } from './nats.js';
import type { EventPlane, EventPlaneKind, PlaneOptions } from './types.js';
import { ZmqEventPlane, type ZmqPlaneOptions } from './zmq.js';

export type EventPlaneChoice = EventPlaneKind | 'auto';

/** `--event-plane auto` resolves by the kernel's rule (`defaultEventPlane`); explicit kinds pass through. */
export function resolveEventPlaneKind(
  choice: EventPlaneChoice | undefined,
  discoveryBackend: DiscoveryBackendKind,
): EventPlaneKind {
  const c = choice ?? 'auto';
  if (c === 'nats' || c === 'zmq' || c === 'inproc') return c;
  if (c !== 'auto')
    throw invalidArgument('event_plane', `must be one of auto, nats, zmq, inproc; got ${JSON.stringify(c)}`);
  if (!['mem', 'file', 'etcd', 'kubernetes'].includes(discoveryBackend))
    throw invalidArgument(
      'discovery_backend',
      `must be one of mem, file, etcd, kubernetes; got ${JSON.stringify(discoveryBackend)}`,
    );
  return defaultEventPlane(discoveryBackend);
}

export interface CreateEventPlaneOptions extends PlaneOptions {
  kind: EventPlaneChoice;
  discoveryBackend: DiscoveryBackendKind;
  discovery?: ChannelDiscovery | null;
  /** Needed for nats. */
  nc?: NatsConnection | null;
  /** Needed for inproc. */
  bus?: InprocEventBus | null;
  zmq?: Omit<ZmqPlaneOptions, keyof PlaneOptions | 'discovery'>;
}

export function createEventPlane(o: CreateEventPlaneOptions): EventPlane {
  const kind = resolveEventPlaneKind(o.kind, o.discoveryBackend);
  const base: PlaneOptions = { publisherId: o.publisherId, now: o.now, onError: o.onError };
  switch (kind) {
    case 'nats':
      if (!o.nc) throw invalidArgument('nc', 'the nats event plane needs a NATS connection (connectNats)');
      return new NatsEventPlane({ ...base, nc: o.nc, discovery: o.discovery ?? null });
    case 'zmq':
      if (!o.discovery)
        throw invalidArgument('discovery', 'the zmq event plane needs discovery to find publishers');
      return new ZmqEventPlane({ ...base, ...o.zmq, discovery: o.discovery });
    case 'inproc':
      return new InprocEventPlane(o.bus ?? defaultBus(), base);
  }
}

let bus: InprocEventBus | null = null;
const defaultBus = (): InprocEventBus => (bus ??= new InprocEventBus());
