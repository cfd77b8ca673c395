export * from './plane/types.js';
export { EnvelopeBuilder } from './plane/envelope-seq.js';
export { EnvelopeQueue } from './plane/subscription.js';
export { InprocEventBus, InprocEventPlane } from './plane/inproc.js';
export { NatsEventPlane, type NatsPlaneOptions } from './plane/nats.js';
export { ZmqEventPlane, type ZmqPlaneOptions } from './plane/zmq.js';
export {
  BROKER_COMPONENT,
  ZmqBroker,
  brokerChannelKey,
  brokerChannelsPrefix,
  brokerSetting,
  encodeBrokerChannel,
  parseBrokerChannel,
  parseBrokerUrl,
  type ZmqBrokerEndpoints,
  type ZmqBrokerOptions,
  type ZmqBrokerSetting,
} from './plane/zmq-broker.js';
export {
  VllmZmqPublisher,
  readVllmReplay,
  type VllmPublishEvent,
  type VllmZmqPublisherOptions,
} from './plane/zmq-vllm.js';
export {
  channelKey,
  encodeChannel,
  parseChannel,
  type ChannelDiscovery,
  type ChannelRecord,
} from './plane/channels.js';
export {
  createEventPlane,
  resolveEventPlaneKind,
  type CreateEventPlaneOptions,
  type EventPlaneChoice,
} from './plane/create.js';
export { EventRing, DEFAULT_RING_SIZE } from './publisher/ring.js';
export { LocalIndexer } from './publisher/local-indexer.js';
export { checkInput, type EngineKvInput } from './publisher/input.js';
export {
  KvEventPublisher,
  planeSink,
  realTimers,
  MAX_BATCH_BLOCKS,
  MAX_BATCHING_TIMEOUT_MS,
  type KvPublisherOptions,
  type PublisherStats,
  type RouterEventSink,
} from './publisher/publisher.js';
export {
  InprocQueryHub,
  discoveryTransportResolver,
  requestPlaneQueryClient,
  serveLocalIndexer,
  type QueryClient,
  type QueryServer,
  type RequestPlaneQueryOptions,
} from './query.js';
export {
  KvEventSubscriber,
  type CursorState,
  type GapInfo,
  type KvSubscriberOptions,
  type RecoveryInfo,
  type RecoveryPhase,
  type SubscriberStats,
} from './subscriber/subscriber.js';
export {
  DurableKvConsumer,
  JetStreamEventSink,
  durableNames,
  ensureStream,
  DEFAULT_SNAPSHOT_THRESHOLD,
  DEFAULT_STREAM_MAX_AGE_SEC,
  type DurableConsumerOptions,
  type DurableNames,
  type DurableStats,
} from './jetstream/durable.js';
export { VllmZmqIngest, type VllmIngestOptions, type VllmIngestStats } from './vllm/ingest.js';
export {
  CoalescingLoadPublisher,
  LoadChannel,
  ReplicaLiveChannel,
  ReplicaSync,
  type LiveRequestList,
  type MessageSubscription,
  type SubscribeHooks,
} from './sync.js';
export { watchWorkers, workerInfoFromCard, type WatchWorkersOptions, type WorkerInfo } from './workers.js';
