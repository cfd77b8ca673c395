export * from './types.js';
export { parseJson, stringifyJson } from './json.js';
export {
  type Codec,
  type DecodeLimits,
  DEFAULT_MAX_BLOCKS,
  DEFAULT_MAX_BYTES,
  decodeMsgpack,
  encodeMsgpack,
} from './wire.js';
export {
  ActiveLoadCodec,
  ActiveSequenceEventCodec,
  LocalIndexerQueryRequestCodec,
  LocalIndexerQueryResponseCodec,
  RemoteIndexerQueryCodec,
  RemoteIndexerQueryResponseCodec,
  RemoteIndexerRecordRequestCodec,
  RemoteIndexerRecordResponseCodec,
  RouterEventCodec,
  RouterEventListCodec,
  WireOverlapScoresCodec,
  decodeRouterEvent,
  decodeRouterEventJson,
  encodeRouterEvent,
  encodeRouterEventJson,
} from './codec.js';
export * from './envelope.js';
export * from './vllm.js';
export * from './vllm-convert.js';
