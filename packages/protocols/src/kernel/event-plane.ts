/**
 * `--event-plane` "auto" (docs/configuration.md): zmq for file/mem discovery, nats for etcd/kubernetes. The config
 * table's `eventPlane` row is computed with this rule, so a resolved config never holds "auto"; the
 * kv-events factory applies it for API callers that pass `auto`.
 */
export type DiscoveryBackendKind = 'mem' | 'file' | 'etcd' | 'kubernetes';

export function defaultEventPlane(discoveryBackend: DiscoveryBackendKind): 'nats' | 'zmq' {
  return discoveryBackend === 'etcd' || discoveryBackend === 'kubernetes' ? 'nats' : 'zmq';
}
