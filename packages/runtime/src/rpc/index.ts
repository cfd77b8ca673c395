export * from './types.js';
export { encodeFrame, TCP_MAX_FRAME, NATS_MAX_MESSAGE, type RpcMsg } from './wire.js';
export { ServerCore, type ServerCoreOptions, type Sink } from './server-core.js';
export {
  TcpRequestServer,
  TcpRequestClient,
  tcpPortFromEnv,
  type TcpServerOptions,
  type TcpClientOptions,
} from './tcp.js';
export {
  NatsRequestServer,
  NatsRequestClient,
  type NatsServerOptions,
  type NatsClientOptions,
} from './nats.js';
export { InprocHub, InprocRequestServer, InprocRequestClient, defaultInprocHub } from './inproc.js';
export { MultiTransportClient } from './multi.js';
