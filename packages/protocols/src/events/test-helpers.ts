// Shared by the codec tests (codec.test.ts, codec-messages.test.ts): 64-bit edge values, branded-id
// casts, msgpack encoding as the wire does it, the DecodeError assertion and three RouterEvents that
// reach the edges of every numeric field.
import { encode as mpEncode } from '@msgpack/msgpack';
import { expect } from 'vitest';
import { DecodeError } from '../errors.js';
import type { EventId, ExternalSequenceBlockHash, LocalBlockHash, WorkerId } from '../ids.js';
import type { RouterEvent } from './types.js';

export const U64_MAX = 18446744073709551615n; // 2^64 − 1
export const ABOVE_2_53 = 9007199254740993n; // 2^53 + 1

const ext = (v: bigint) => v as ExternalSequenceBlockHash;
export const loc = (v: bigint) => v as LocalBlockHash;
export const wid = (v: bigint) => v as WorkerId;
export const eid = (v: bigint) => v as EventId;

export const mp = (v: unknown): Uint8Array => mpEncode(v, { useBigInt64: true });

/** Asserts a DecodeError whose message starts with `prefix` and whose detail names `field`. */
export function expectDecodeError(f: () => unknown, prefix: string, field?: string): void {
  let err: unknown;
  try {
    f();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(DecodeError);
  const d = err as DecodeError;
  expect(d.message.startsWith(prefix), `"${d.message}" should start with "${prefix}"`).toBe(true);
  expect(d.code).toBe('decode_error');
  if (field !== undefined) expect(d.detail?.field).toBe(field);
}

export const stored: RouterEvent = {
  worker_id: wid(U64_MAX),
  storage_tier: 'host_pinned',
  event: {
    event_id: eid(ABOVE_2_53),
    dp_rank: 7,
    data: {
      stored: {
        parent_hash: ext(U64_MAX - 1n),
        start_position: 4294967295,
        blocks: [
          { block_hash: ext(0n), tokens_hash: loc(U64_MAX), mm_extra_info: null },
          {
            block_hash: ext(2n ** 63n),
            tokens_hash: loc(1n),
            mm_extra_info: { mm_objects: [{ mm_hash: U64_MAX, offsets: [[0, 3]] }] },
          },
        ],
      },
    },
  },
};
export const removed: RouterEvent = {
  worker_id: wid(1n),
  storage_tier: 'device',
  event: {
    event_id: eid(U64_MAX),
    dp_rank: 0,
    data: { removed: { block_hashes: [ext(U64_MAX), ext(ABOVE_2_53), ext(3n)] } },
  },
};
export const cleared: RouterEvent = {
  worker_id: wid(ABOVE_2_53),
  storage_tier: 'disk',
  event: { event_id: eid(1n), dp_rank: 4294967295, data: 'cleared' },
};
