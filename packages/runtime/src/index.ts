export * from './errors.js';
export { Channel } from './channel.js';
export * from './discovery/index.js';
export * from './rpc/index.js';
export {
  connectNats,
  natsUrlFromEnv,
  type ConnectNatsOptions,
  type NatsConnection,
} from './nats-connection.js';
export {
  DEVICE_TYPES,
  encodeInstance,
  parseInstance,
  registerInstance,
  watchInstances,
  parseEventChannel,
  registerEventChannel,
  watchEventChannels,
  type DeviceType,
  type Instance,
  type EventChannel,
  type EventTransport,
  type Registration,
  type RegisterInstanceOptions,
  type RegisterEventChannelOptions,
  type KeyParts,
  type TypedChange,
  type TypedWatch,
  type WatchScope,
} from './registration.js';
export * from './model-card.js';
export { readTextDir, type TextDirEntry } from './text-dir.js';
export * from './model-files.js';
export * from './health.js';
