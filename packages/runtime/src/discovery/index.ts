export * from './types.js';
export { MemDiscovery, MemDiscoveryHub, defaultMemHub } from './mem.js';
export { FileDiscovery, defaultFileRoot, type FileDiscoveryOptions } from './file.js';
export { EtcdDiscovery, etcdEndpointsFromEnv, type EtcdDiscoveryOptions } from './etcd.js';
export { createDiscovery, type CreateDiscoveryOptions, type DiscoveryBackend } from './create.js';
