import type { NatsConnection } from '@nats-io/transport-node';
import { invalidArg } from '../errors.js';
import type { ChannelDiscovery } from './channels.js';
import { InprocEventBus, InprocEventPlane } from './inproc.js';
import { NatsEventPlane } from './nats.js';
import type { EventPlane, EventPlaneKind, PlaneOptions } from './types.js';
import { ZmqEventPlane, type ZmqPlaneOptions } from './zmq.js';

export type EventPlaneChoice = EventPlaneKind | 'auto';

/** `--event-plane auto` (FLAGS.md): zmq for file/mem discovery, nats for etcd/kubernetes. */
export function resolveEventPlaneKind(
  choice: EventPlaneChoice | undefined,
  discoveryBackend: 'mem' | 'file' | 'etcd' | 'kubernetes',
): EventPlaneKind {
  const c = choice ?? 'auto';
  if (c === 'nats' || c === 'zmq' || c === 'inproc') return c;
  if (c !== 'auto')
    throw invalidArg('event_plane', `must be one of auto, nats, zmq, inproc; got ${JSON.stringify(c)}`);
  if (discoveryBackend === 'mem' || discoveryBackend === 'file') return 'zmq';
  if (discoveryBackend === 'etcd' || discoveryBackend === 'kubernetes') return 'nats';
  throw invalidArg(
    'discovery_backend',
    `must be one of mem, file, etcd, kubernetes; got ${JSON.stringify(discoveryBackend)}`,
  );
}

export interface CreateEventPlaneOptions extends PlaneOptions {
  kind: EventPlaneChoice;
  discoveryBackend: 'mem' | 'file' | 'etcd' | 'kubernetes';
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
      if (!o.nc) throw invalidArg('nc', 'the nats event plane needs a NATS connection (connectNats)');
      return new NatsEventPlane({ ...base, nc: o.nc, discovery: o.discovery ?? null });
    case 'zmq':
      if (!o.discovery)
        throw invalidArg('discovery', 'the zmq event plane needs discovery to find publishers');
      return new ZmqEventPlane({ ...base, ...o.zmq, discovery: o.discovery });
    case 'inproc':
      return new InprocEventPlane(o.bus ?? defaultBus(), base);
  }
}

let bus: InprocEventBus | null = null;
const defaultBus = (): InprocEventBus => (bus ??= new InprocEventBus());
