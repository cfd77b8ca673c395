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
