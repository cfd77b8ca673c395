import { encode as mpEncode } from '@msgpack/msgpack';
import { describe, expect, it } from 'vitest';
import { DecodeError } from '../errors.js';
import type { EventId, WorkerId } from '../ids.js';
import { decodeRouterEvent, encodeRouterEvent } from './codec.js';
import {
  beU64,
  decodeEnvelope,
  decodeZmqEventFrames,
  encodeEnvelope,
  encodeZmqEventFrames,
  readBeU64,
} from './envelope.js';
import type { EventEnvelope, RouterEvent } from './types.js';

const U64_MAX = 18446744073709551615n;
const ev: RouterEvent = {
  worker_id: 7587872800778374919n as WorkerId,
  storage_tier: 'device',
  event: { event_id: 42n as EventId, dp_rank: 0, data: 'cleared' },
};
const env: EventEnvelope = {
  publisher_id: U64_MAX,
  sequence: 9007199254740993n,
  published_at: 1_700_000_000_123,
  topic: 'namespace.dynamo.component.backend.kv-events',
  payload: encodeRouterEvent(ev),
};

describe('event-plane envelope (§5.2)', () => {
  it('round-trips with u64 ids above 2^53 and carries the msgpack payload intact', () => {
    const back = decodeEnvelope(encodeEnvelope(env));
    expect(back.publisher_id).toBe(U64_MAX);
    expect(back.sequence).toBe(9007199254740993n);
    expect(back.published_at).toBe(1_700_000_000_123);
    expect(back.topic).toBe(env.topic);
    expect(decodeRouterEvent(back.payload)).toEqual(ev);
  });

  it('decodes a hand-built envelope map with any integer widths', () => {
    const bytes = mpEncode(
      { publisher_id: 7, sequence: 2n ** 63n, published_at: 5n, topic: 't', payload: new Uint8Array([1, 2]) },
      { useBigInt64: true },
    );
    expect(decodeEnvelope(bytes)).toEqual({
      publisher_id: 7n,
      sequence: 9223372036854775808n,
      published_at: 5,
      topic: 't',
      payload: new Uint8Array([1, 2]),
    });
  });

  it('names the missing or mistyped field', () => {
    const bad = (v: unknown) => () => decodeEnvelope(mpEncode(v, { useBigInt64: true }));
    expect(bad({ publisher_id: 1, sequence: 1, published_at: 1, topic: 't' })).toThrow(
      /^envelope\.payload: expected bytes, got nothing/,
    );
    expect(bad({ publisher_id: 1, sequence: 1, published_at: 1, topic: 't', payload: [1, 2] })).toThrow(
      /^envelope\.payload: expected bytes/,
    );
    expect(
      bad({ publisher_id: 1, sequence: 'x', published_at: 1, topic: 't', payload: new Uint8Array() }),
    ).toThrow(/^envelope\.sequence: expected u64/);
    expect(
      bad({ publisher_id: 1, sequence: 1, published_at: 1, topic: 3, payload: new Uint8Array() }),
    ).toThrow(/^envelope\.topic: expected string/);
    expect(() => decodeEnvelope(encodeEnvelope(env).subarray(0, 20))).toThrow(DecodeError);
  });
});

describe('ZMQ direct framing (§5.2)', () => {
  it('lays out [topic, publisher_id BE, sequence BE, 0x01 ‖ u32 BE length ‖ envelope]', () => {
    const frames = encodeZmqEventFrames({ ...env, publisher_id: 0x0102030405060708n, sequence: 9n });
    expect(new TextDecoder().decode(frames[0])).toBe(env.topic);
    expect([...frames[1]]).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect([...frames[2]]).toEqual([0, 0, 0, 0, 0, 0, 0, 9]);
    const f = frames[3];
    expect(f[0]).toBe(1);
    const len = (f[1] << 24) | (f[2] << 16) | (f[3] << 8) | f[4];
    expect(len).toBe(f.length - 5);
    expect(decodeEnvelope(f.subarray(5)).sequence).toBe(9n);
  });

  it('round-trips, with the subject in the topic frame', () => {
    const { subject, envelope } = decodeZmqEventFrames(encodeZmqEventFrames(env, 'subj'));
    expect(subject).toBe('subj');
    expect(envelope.publisher_id).toBe(U64_MAX);
    expect(decodeRouterEvent(envelope.payload)).toEqual(ev);
  });

  it('rejects wrong frame counts, versions, lengths and mismatched ids', () => {
    const frames = encodeZmqEventFrames(env);
    expect(() => decodeZmqEventFrames(frames.slice(0, 3))).toThrow(/^zmq_event: expected 4 frames, got 3/);
    expect(() => decodeZmqEventFrames([...frames, new Uint8Array()])).toThrow(/expected 4 frames, got 5/);
    const v2 = frames[3].slice();
    v2[0] = 2;
    expect(() => decodeZmqEventFrames([frames[0], frames[1], frames[2], v2])).toThrow(
      /^frames\[3\]\.version: expected 1, got 2/,
    );
    expect(() =>
      decodeZmqEventFrames([frames[0], frames[1], frames[2], frames[3].subarray(0, frames[3].length - 1)]),
    ).toThrow(/^frames\[3\]\.length: header says/);
    expect(() => decodeZmqEventFrames([frames[0], beU64(1n), frames[2], frames[3]])).toThrow(
      /^envelope\.publisher_id: does not match/,
    );
    expect(() => decodeZmqEventFrames([frames[0], frames[1], new Uint8Array(7), frames[3]])).toThrow(
      /^frames\[2\]\.sequence: expected 8 bytes, got 7/,
    );
  });

  it('reads big-endian u64 frames exactly', () => {
    expect(readBeU64(new Uint8Array([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]), 'x')).toBe(U64_MAX);
    expect(readBeU64(new Uint8Array([0, 0, 0, 0, 0, 0, 1, 2]), 'x')).toBe(258n); // 1·256 + 2
  });
});
