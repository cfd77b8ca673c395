/**
 * Fuzzing the vLLM KV event decoder (issue 17): random batches in both layouts (positional arrays and
 * maps, with random trailing fields), their cuts and byte edits, and random multipart/replay frames.
 * The decoder returns events or throws `DecodeError` naming a field, and a failed batch changes none
 * of its state; a removal is dropped only when positively another group's (applied when in doubt).
 */
import fc from 'fast-check';
import { encode as mpEncode } from '@msgpack/msgpack';
import { describe, expect, it } from 'vitest';
import { fuzzParams, fuzzTimeout, mutatedBytes, truncatedBytes, wireValue } from '@kvrouter/testkit';
import { DecodeError } from '../errors.js';
import { decodeVllmBatch, parseVllmMultipart, parseVllmReplayReply } from './vllm.js';
import { VllmKvEventDecoder } from './vllm-convert.js';

const mp = (v: unknown): Uint8Array => mpEncode(v, { useBigInt64: true });
const T = fuzzTimeout(60_000);
const BS = 4;

function decodeOrDecodeError<R>(f: () => R): R | undefined {
  try {
    return f();
  } catch (e) {
    if (!(e instanceof DecodeError)) throw e;
    const field = e.detail?.field;
    expect(typeof field === 'string' && field.length > 0, `no field in "${e.message}"`).toBe(true);
    return undefined;
  }
}

const u64 = fc.bigInt({ min: 0n, max: (1n << 64n) - 1n });
const hashes = fc.array(fc.oneof(u64, fc.integer({ min: 0, max: 1000 })), { minLength: 1, maxLength: 4 });
const KINDS = [
  'full_attention',
  'sliding_window',
  'mamba',
  'mla_attention',
  'chunked_local_attention',
  'weird_kind',
];
const OTHER_GROUP_KINDS = new Set([
  'sliding_window',
  'sliding_window_mla',
  'chunked_local_attention',
  'mamba',
  'cross_attention',
  'encoder_only_attention',
]);
const trailerValue = fc.oneof(
  fc.constant(null),
  fc.nat({ max: 3 }),
  fc.constantFrom(...KINDS),
  fc.integer({ min: -5, max: 5000 }),
  wireValue(),
);
const stored = fc
  .tuple(
    hashes,
    fc.oneof(fc.constant(null), u64),
    fc.constantFrom(BS, 8),
    fc.array(trailerValue, { maxLength: 6 }),
  )
  .map(([hs, parent, size, trailer]) => [
    'BlockStored',
    hs,
    parent,
    Array.from({ length: hs.length * size }, (_, i) => i),
    size,
    null,
    'GPU',
    null,
    null,
    ...trailer,
  ]);
const removed = fc
  .tuple(
    hashes,
    fc.oneof(fc.constant('GPU'), fc.constant(null), wireValue()),
    fc.array(trailerValue, { maxLength: 4 }),
  )
  .map(([hs, medium, trailer]) => ['BlockRemoved', hs, medium, ...trailer]);
const removedMap = fc
  .tuple(
    hashes,
    fc.dictionary(fc.constantFrom('medium', 'group_idx', 'kv_cache_spec_kind', 'x'), trailerValue),
  )
  .map(([hs, extra]) => ({ ...extra, type: 'BlockRemoved', block_hashes: hs }));
const event = fc.oneof(stored, removed, removedMap, fc.constant(['AllBlocksCleared']));
const batch = fc
  .tuple(
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.array(event, { maxLength: 5 }),
    fc.oneof(fc.constant(null), fc.nat({ max: 7 })),
  )
  .map((b) => mp(b));

describe('vLLM KV event decoding under fuzzing', () => {
  it(
    'random batches, their cuts and edits: events or a DecodeError, and a failure changes nothing',
    { timeout: T },
    () => {
      fc.assert(
        fc.property(
          fc.array(
            fc.oneof(
              batch,
              batch.chain(truncatedBytes),
              batch.chain(mutatedBytes),
              fc.uint8Array({ maxLength: 40 }),
            ),
            {
              minLength: 1,
              maxLength: 6,
            },
          ),
          (payloads) => {
            const d = new VllmKvEventDecoder({ kvBlockSize: BS, dpRank: 1 });
            for (const p of payloads) {
              const before = JSON.stringify(d.stats);
              const out = decodeOrDecodeError(() => d.decodePayload(p));
              if (out === undefined) expect(JSON.stringify(d.stats)).toBe(before);
              else for (const e of out) expect(e.dp_rank).toBeGreaterThanOrEqual(0);
            }
          },
        ),
        fuzzParams(400, 40_000),
      );
    },
  );

  it('a removal with readable hashes is applied unless it names another group kind', { timeout: T }, () => {
    fc.assert(
      fc.property(fc.oneof(removed, removedMap), (ev) => {
        const d = new VllmKvEventDecoder({ kvBlockSize: BS });
        const out = d.decodePayload(mp([0, [ev]]));
        const isArray = Array.isArray(ev);
        const hs = (isArray ? ev[1] : (ev as { block_hashes: unknown[] }).block_hashes) as Array<
          bigint | number
        >;
        const named = isArray
          ? (ev as unknown[]).slice(2).some((x) => typeof x === 'string' && OTHER_GROUP_KINDS.has(x))
          : ((k) => typeof k === 'string' && OTHER_GROUP_KINDS.has(k))(
              (ev as Record<string, unknown>).kv_cache_spec_kind,
            );
        if (named) return; // may be skipped: positively another group's
        expect(out).toHaveLength(1);
        expect(out[0]!.data).toEqual({ removed: { block_hashes: hs.map((h) => BigInt(h)) } });
      }),
      fuzzParams(500, 50_000),
    );
  });

  it('a batch above the size limit is a DecodeError', () => {
    const p = mp([0, [['AllBlocksCleared']], null]);
    expect(() => decodeVllmBatch(p, { maxBytes: p.length - 1 })).toThrow(DecodeError);
  });

  it('random multipart and replay frames: parsed or a DecodeError', { timeout: T }, () => {
    const frame = fc.oneof(
      fc.uint8Array({ maxLength: 12 }),
      fc.constant(new Uint8Array(8)),
      fc.constant(new Uint8Array(8).fill(0xff)),
    );
    fc.assert(
      fc.property(fc.array(frame, { maxLength: 5 }), (frames) => {
        const m = decodeOrDecodeError(() => parseVllmMultipart(frames));
        if (m !== undefined) expect(frames).toHaveLength(3);
        const r = decodeOrDecodeError(() => parseVllmReplayReply(frames));
        if (r !== undefined) expect(frames.length === 2 || frames.length === 3).toBe(true);
      }),
      fuzzParams(500, 50_000),
    );
  });
});
