import { KvrError, invalidArgument } from '@kvrouter/protocols';

import { EtcdDiscovery } from './etcd.js';
import { FileDiscovery } from './file.js';
import { MemDiscoveryHub, defaultMemHub } from './mem.js';
import type { Discovery } from './types.js';

export type DiscoveryBackend = 'mem' | 'file' | 'etcd' | 'kubernetes';

export interface CreateDiscoveryOptions {
  /** `--discovery-backend` / `DYN_DISCOVERY_BACKEND`. */
  backend: DiscoveryBackend;
  ttlSec?: number;
  /** mem: the shared store; default the process-wide hub. */
  hub?: MemDiscoveryHub;
  /** file: root directory; default `DYN_FILE_KV`. */
  fileRoot?: string;
  filePollMs?: number;
  /** etcd: default `ETCD_ENDPOINTS`. */
  etcdEndpoints?: string | string[];
}

/** Opens the process's discovery handle (and so its lease) on the configured backend. */
export async function createDiscovery(opts: CreateDiscoveryOptions): Promise<Discovery> {
  switch (opts.backend) {
    case 'mem':
      return (opts.hub ?? defaultMemHub()).connect({ ttlSec: opts.ttlSec });
    case 'file':
      return FileDiscovery.open({ root: opts.fileRoot, ttlSec: opts.ttlSec, pollMs: opts.filePollMs });
    case 'etcd':
      return EtcdDiscovery.connect({ endpoints: opts.etcdEndpoints, ttlSec: opts.ttlSec });
    case 'kubernetes':
      throw new KvrError(
        'not_supported',
        'discovery backend "kubernetes" is not supported yet (docs/protocol.md §6.2 leaves it to a later milestone); use etcd, file or mem',
        400,
        { field: 'discovery_backend' },
      );
    default:
      throw invalidArgument(
        'discovery_backend',
        `must be one of mem, file, etcd, kubernetes; got ${JSON.stringify(opts.backend)}`,
      );
  }
}
