/**
 * Event-plane envelope (docs/protocol.md §5.2) and the ZMQ-direct multipart framing around it. The
 * envelope is always msgpack: `{publisher_id, sequence, published_at, topic, payload: bin}`.
 */
import { DecodeError } from '../errors.js';
import type { EventEnvelope } from './types.js';
import { bytes, count, join, obj, str, u64 } from './validate.js';
import {
  type Codec,
  type DecodeLimits,
  decodeMsgpack,
  encodeMsgpack,
  resolveLimits,
  u64Out,
} from './wire.js';

const envelopeFrom = (v: unknown, path: string): EventEnvelope => {
  const o = obj(v, path);
  return {
    publisher_id: u64(o.publisher_id, join(path, 'publisher_id')),
    sequence: u64(o.sequence, join(path, 'sequence')),
    published_at: count(o.published_at, join(path, 'published_at')),
    topic: str(o.topic, join(path, 'topic')),
    payload: bytes(o.payload, join(path, 'payload')),
  };
};

const envelopeTo = (e: EventEnvelope): unknown => ({
  publisher_id: u64Out(e.publisher_id),
  sequence: u64Out(e.sequence),
  published_at: e.published_at,
  topic: e.topic,
  payload: e.payload,
});

/** The envelope has a binary payload, so it has no JSON form. */
export const EventEnvelopeCodec: Pick<
  Codec<EventEnvelope>,
  'name' | 'encodeMsgpack' | 'decodeMsgpack' | 'toValue' | 'fromValue'
> = {
  name: 'envelope',
  encodeMsgpack: (e) => encodeMsgpack(envelopeTo(e)),
  decodeMsgpack: (b, limits) =>
    envelopeFrom(decodeMsgpack(b, 'envelope', resolveLimits(limits).maxBytes), 'envelope'),
  toValue: envelopeTo,
  fromValue: (v) => envelopeFrom(v, 'envelope'),
};

export const encodeEnvelope = (e: EventEnvelope): Uint8Array => EventEnvelopeCodec.encodeMsgpack(e);
/** `payload` of the result is a view into `bytes`; copy it if `bytes` is reused. */
export const decodeEnvelope = (b: Uint8Array, limits?: DecodeLimits): EventEnvelope =>
  EventEnvelopeCodec.decodeMsgpack(b, limits);

// ---------------------------------------------------------------------------------------------------
// ZMQ direct: [topic, publisher_id (8 B BE), sequence (8 B BE), frame], frame = 0x01 ‖ u32 BE len ‖ envelope

export const ZMQ_FRAME_VERSION = 1;

/** `subject` goes in the topic frame (SUB prefix filtering); it defaults to the envelope's topic. */
export function encodeZmqEventFrames(
  env: EventEnvelope,
  subject: string = env.topic,
): [Uint8Array, Uint8Array, Uint8Array, Uint8Array] {
  const body = encodeEnvelope(env);
  const frame = new Uint8Array(5 + body.length);
  const dv = new DataView(frame.buffer);
  frame[0] = ZMQ_FRAME_VERSION;
  dv.setUint32(1, body.length);
  frame.set(body, 5);
  return [new TextEncoder().encode(subject), beU64(env.publisher_id), beU64(env.sequence), frame];
}

/** Checks the four frames against each other; returns the topic-frame subject and the envelope. */
export function decodeZmqEventFrames(
  frames: readonly Uint8Array[],
  limits?: DecodeLimits,
): { subject: string; envelope: EventEnvelope } {
  if (frames.length !== 4)
    throw new DecodeError(`zmq_event: expected 4 frames, got ${frames.length}`, { field: 'frames' });
  const [topicF, pubF, seqF, frame] = frames as [Uint8Array, Uint8Array, Uint8Array, Uint8Array];
  const publisher = readBeU64(pubF, 'frames[1].publisher_id');
  const sequence = readBeU64(seqF, 'frames[2].sequence');
  if (frame.length < 5)
    throw new DecodeError(`frames[3]: truncated frame header (${frame.length} bytes)`, {
      field: 'frames[3]',
    });
  if (frame[0] !== ZMQ_FRAME_VERSION)
    throw new DecodeError(`frames[3].version: expected ${ZMQ_FRAME_VERSION}, got ${frame[0]}`, {
      field: 'frames[3].version',
    });
  const len = new DataView(frame.buffer, frame.byteOffset, frame.byteLength).getUint32(1);
  if (len !== frame.length - 5)
    throw new DecodeError(`frames[3].length: header says ${len} bytes, frame holds ${frame.length - 5}`, {
      field: 'frames[3].length',
    });
  const env = decodeEnvelope(frame.subarray(5), limits);
  if (env.publisher_id !== publisher)
    throw new DecodeError('envelope.publisher_id: does not match frames[1]', {
      field: 'envelope.publisher_id',
    });
  if (env.sequence !== sequence)
    throw new DecodeError('envelope.sequence: does not match frames[2]', { field: 'envelope.sequence' });
  let subject: string;
  try {
    subject = new TextDecoder('utf-8', { fatal: true }).decode(topicF);
  } catch {
    throw new DecodeError('frames[0].topic: invalid UTF-8', { field: 'frames[0].topic' });
  }
  return { subject, envelope: env };
}

export function beU64(v: bigint): Uint8Array {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, BigInt.asUintN(64, v));
  return b;
}

export function readBeU64(b: Uint8Array, field: string): bigint {
  if (!(b instanceof Uint8Array) || b.length !== 8)
    throw new DecodeError(
      `${field}: expected 8 bytes, got ${b instanceof Uint8Array ? b.length : typeof b}`,
      { field },
    );
  return new DataView(b.buffer, b.byteOffset, 8).getBigUint64(0);
}
