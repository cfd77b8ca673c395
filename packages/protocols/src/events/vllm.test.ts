import { encode as mpEncode } from '@msgpack/msgpack';
import { xxh3 } from '@node-rs/xxhash';
import { describe, expect, it } from 'vitest';
import { DecodeError } from '../errors.js';
import { type KvCacheEventData, type KvCacheStoreData, isStored } from './types.js';
import {
  VLLM_REPLAY_END_SEQ,
  VllmGroupFilter,
  type VllmRawEvent,
  decodeVllmBatch,
  encodeVllmReplayRequest,
  parseVllmMultipart,
  parseVllmReplayReply,
} from './vllm.js';
import { VllmKvEventDecoder } from './vllm-convert.js';

// Expected local hashes: docs/protocol.md §2.4 test vectors (bs = 4).
const H_1234 = 14643705804678351452n; // tokens [1,2,3,4]
const H_0123 = 9143094415614847814n; // tokens [0,1,2,3]
const H_4567 = 12124091508212882195n; // tokens [4,5,6,7]
const U64_MAX = 18446744073709551615n;

const mp = (v: unknown): Uint8Array => mpEncode(v, { useBigInt64: true });

function storedOf(d: KvCacheEventData | undefined): KvCacheStoreData {
  if (d === undefined || !isStored(d)) throw new Error(`expected a stored event, got ${JSON.stringify(d)}`);
  return d.stored;
}

function expectDecodeError(f: () => unknown, prefix: string): void {
  let err: unknown;
  try {
    f();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(DecodeError);
  const m = (err as DecodeError).message;
  expect(m.startsWith(prefix), `"${m}" should start with "${prefix}"`).toBe(true);
}

const decoder = (kvBlockSize = 4, dpRank = 0) => new VllmKvEventDecoder({ kvBlockSize, dpRank });

describe('vLLM batch shapes', () => {
  it('decodes an old array batch with the oldest BlockStored layout (no medium, no lora_name)', () => {
    // [ts, [event...]] — data_parallel_rank omitted; event = [tag, hashes, parent, tokens, block_size, lora_id]
    const payload = mp([1.5, [['BlockStored', [11, 12], null, [0, 1, 2, 3, 4, 5, 6, 7], 4, null]]]);
    const out = decoder(4, 5).decodePayload(payload);
    expect(out).toEqual([
      {
        dp_rank: 5,
        storage_tier: 'device',
        issue: null,
        data: {
          stored: {
            parent_hash: null,
            start_position: null,
            blocks: [
              { block_hash: 11n, tokens_hash: H_0123, mm_extra_info: null },
              { block_hash: 12n, tokens_hash: H_4567, mm_extra_info: null },
            ],
          },
        },
      },
    ]);
  });

  it('decodes a map batch with map events; a non-null data_parallel_rank overrides the configured one', () => {
    const payload = mp({
      ts: 2,
      events: [
        {
          type: 'BlockStored',
          block_hashes: [7],
          parent_block_hash: 3,
          token_ids: [1, 2, 3, 4],
          block_size: 4,
          lora_id: null,
          medium: 'GPU',
          lora_name: null,
        },
      ],
      data_parallel_rank: 3,
    });
    const [e] = decoder(4, 1).decodePayload(payload);
    expect(e.dp_rank).toBe(3);
    expect(e.data).toEqual({
      stored: {
        parent_hash: 3n,
        start_position: null,
        blocks: [{ block_hash: 7n, tokens_hash: H_1234, mm_extra_info: null }],
      },
    });
  });

  it('uses the configured rank when the rank is null or omitted (array and map)', () => {
    const ev = ['BlockRemoved', [1], null];
    expect(decoder(4, 2).decodePayload(mp([0, [ev], null]))[0].dp_rank).toBe(2);
    expect(decoder(4, 2).decodePayload(mp({ ts: 0, events: [ev] }))[0].dp_rank).toBe(2);
    // Upstream also accepts the short alias dp_rank in the map form.
    expect(decoder(4, 2).decodePayload(mp({ ts: 0, events: [ev], dp_rank: 6 }))[0].dp_rank).toBe(6);
  });

  it('accepts a tagged-array event and the same event as a tagged map', () => {
    const arr = ['BlockStored', [9], null, [1, 2, 3, 4], 4, null, null, null];
    const map = {
      type: 'BlockStored',
      block_hashes: [9],
      parent_block_hash: null,
      token_ids: [1, 2, 3, 4],
      block_size: 4,
    };
    const a = decoder().decodePayload(mp([0, [arr]]));
    const m = decoder().decodePayload(mp([0, [map]]));
    expect(a).toEqual(m);
    expect(a[0].data).toEqual({
      stored: {
        parent_hash: null,
        start_position: null,
        blocks: [{ block_hash: 9n, tokens_hash: H_1234, mm_extra_info: null }],
      },
    });
  });

  it('ignores trailing extra positional fields, unknown map keys and extra batch elements', () => {
    const arr = [
      'BlockStored',
      [9],
      null,
      [1, 2, 3, 4],
      4,
      null,
      null,
      null,
      null,
      0,
      'full_attention',
      null,
      'future',
      { x: 1 },
      [1, 2],
    ];
    const map = { type: 'BlockRemoved', block_hashes: [9], medium: null, brand_new: [1, 2, 3] };
    const out = decoder().decodePayload(
      mp([0, [arr, map, ['AllBlocksCleared', 'extra', 1]], 0, 'future-batch-field']),
    );
    expect(out.map((e) => e.data)).toEqual([
      {
        stored: {
          parent_hash: null,
          start_position: null,
          blocks: [{ block_hash: 9n, tokens_hash: H_1234, mm_extra_info: null }],
        },
      },
      { removed: { block_hashes: [9n] } },
      'cleared',
    ]);
  });

  it('decodes BlockRemoved and AllBlocksCleared in both forms', () => {
    const out = decoder().decodePayload(
      mp([0, [['BlockRemoved', [1, 2]], { type: 'AllBlocksCleared' }, ['AllBlocksCleared']]]),
    );
    expect(out.map((e) => e.data)).toEqual([{ removed: { block_hashes: [1n, 2n] } }, 'cleared', 'cleared']);
    expect(out[1].storage_tier).toBe('device');
  });
});

describe('vLLM block hashes', () => {
  it('takes unsigned 64-bit ints exactly and reinterprets signed ones bit for bit', () => {
    // −1 → 2^64−1; −2 → 2^64−2; −2^63 (int64) → 2^63; 2^64−1 (uint64) stays.
    const payload = mp([0, [['BlockRemoved', [-1, -2, -(2n ** 63n), U64_MAX, 2n ** 63n + 5n], null]]]);
    expect(decoder().decodePayload(payload)[0].data).toEqual({
      removed: { block_hashes: [U64_MAX, U64_MAX - 1n, 9223372036854775808n, U64_MAX, 9223372036854775813n] },
    });
  });

  it('maps bytes hashes (SHA-256, 32 bytes) to XXH3-64 seed 0, deterministically, parents included', () => {
    const h1 = new Uint8Array(32).map((_, i) => i);
    const h2 = new Uint8Array(32).map((_, i) => 255 - i);
    const parent = new Uint8Array(32).fill(7);
    const payload = mp([
      0,
      [['BlockStored', [h1, h2], parent, [0, 1, 2, 3, 4, 5, 6, 7], 4, null, null, null]],
    ]);
    const [e] = decoder().decodePayload(payload);
    const s = storedOf(e.data);
    expect(s.parent_hash).toBe(xxh3.xxh64(parent, 0n));
    expect(s.blocks.map((b) => b.block_hash)).toEqual([xxh3.xxh64(h1, 0n), xxh3.xxh64(h2, 0n)]);
    // The same bytes in a later Removed give the same key, so the removal finds the block.
    const [r] = decoder().decodePayload(mp([0, [['BlockRemoved', [h2.slice()], null]]]));
    expect(r.data).toEqual({ removed: { block_hashes: [xxh3.xxh64(h2, 0n)] } });
  });

  it('rejects floats, strings and out-of-range ints as hashes', () => {
    expectDecodeError(
      () => decodeVllmBatch(mp([0, [['BlockRemoved', [1, 1.5]]]])),
      'batch.events[0][1][1]: expected int or bytes block hash, got 1.5',
    );
    expectDecodeError(
      () => decodeVllmBatch(mp([0, [{ type: 'BlockRemoved', block_hashes: ['ab'] }]])),
      'batch.events[0].block_hashes[0]: expected int or bytes block hash',
    );
    expectDecodeError(
      () => decodeVllmBatch(mp([0, [['BlockStored', [1], 'p', [1, 2, 3, 4], 4]]])),
      'batch.events[0][2]: expected int or bytes block hash',
    );
  });
});

describe('vLLM hybrid models: group_idx and kv_cache_spec_*', () => {
  const stored = (hash: number, group: number | null, kind: string | null, window: number | null) => [
    'BlockStored',
    [hash],
    null,
    [1, 2, 3, 4],
    4,
    null,
    null,
    null,
    null,
    group,
    kind,
    window,
  ];

  it('skips and counts sliding-window groups, keeps full attention', () => {
    const d = decoder();
    const out = d.decodePayload(
      mp([
        0,
        [
          stored(1, 0, 'full_attention', null),
          stored(2, 1, 'sliding_window', 4096),
          stored(3, 2, 'mamba', null),
        ],
      ]),
    );
    expect(out).toHaveLength(1);
    expect(storedOf(out[0].data).blocks[0].block_hash).toBe(1n);
    expect(d.stats.skippedGroupEvents).toBe(2);
  });

  it('applies what Stored events taught about a group to Removed events (which carry only group_idx)', () => {
    const d = decoder();
    // Group 0 is sliding window and group 1 full attention: the reverse of the unlearned default.
    d.decodePayload(mp([0, [stored(1, 0, 'sliding_window', 128), stored(2, 1, 'mla_attention', null)]]));
    const out = d.decodePayload(
      mp([
        0,
        [
          ['BlockRemoved', [1], null, 0],
          ['BlockRemoved', [2], null, 1],
        ],
      ]),
    );
    expect(out.map((e) => e.data)).toEqual([{ removed: { block_hashes: [2n] } }]);
    expect(d.stats.skippedGroupEvents).toBe(2);
  });

  it('without knowledge, only group 0 (or no group) is indexed; removals of any unlearned group are applied', () => {
    const f = new VllmGroupFilter();
    const rm = (g: number | null): VllmRawEvent => ({
      type: 'BlockRemoved',
      block_hashes: [],
      medium: null,
      group_idx: g,
      kv_cache_spec_kind: null,
    });
    expect([f.accepts(rm(null)), f.accepts(rm(0)), f.accepts(rm(3))]).toEqual([true, true, true]);
    const st = (g: number): VllmRawEvent => ({
      type: 'BlockStored',
      block_hashes: [],
      parent_block_hash: null,
      token_ids: new Uint32Array(0),
      is_eagle: false,
      block_size: 4,
      medium: null,
      lora_name: null,
      block_mm_infos: null,
      group_idx: g,
      kv_cache_spec_kind: null,
      kv_cache_spec_sliding_window: null,
    });
    expect([f.accepts(st(0)), f.accepts(st(3))]).toEqual([true, false]);
    expect(f.skipped).toBe(1);
  });

  describe('removals are applied when in doubt (issue 17)', () => {
    const rmHashes = (out: { data: unknown }[]) =>
      out.map((e) => (e.data as { removed: { block_hashes: bigint[] } }).removed.block_hashes[0]);

    it('array form: an unrecognised trailing value keeps the removal, a known other-group one skips it', () => {
      const d = decoder();
      // Group 1 is learned as sliding window, group 2 as full attention.
      d.decodePayload(mp([0, [stored(1, 1, 'sliding_window', 128), stored(2, 2, 'full_attention', null)]]));
      expect(d.stats.skippedGroupEvents).toBe(1);
      const out = d.decodePayload(
        mp([
          0,
          [
            ['BlockRemoved', [10], null, 'not-a-kind'], // unrecognised string: applied
            ['BlockRemoved', [11], null, 1, 'mystery_attention'], // learned sliding group, unknown kind: applied
            ['BlockRemoved', [12], null, -1], // not a group index: applied (no DecodeError)
            ['BlockRemoved', [13], null, 1.5],
            ['BlockRemoved', [14], null, true],
            ['BlockRemoved', [15], null, { group: 1 }],
            ['BlockRemoved', [16], null, 1, 7], // a second int with no kind: unrecognised
            ['BlockRemoved', [17], null, 9], // a group nobody described: applied
            ['BlockRemoved', [18], null, 2], // learned full attention
            ['BlockRemoved', [19], null, 3, 'full_attention'],
            ['BlockRemoved', [20], 'GPU'], // no metadata
            ['BlockRemoved', [21], 1, 'sliding_window'], // a medium that is no string: unknown layout
            // Positively another group's: skipped.
            ['BlockRemoved', [30], null, 1], // learned sliding window
            ['BlockRemoved', [31], null, 1, 'sliding_window', 128],
            ['BlockRemoved', [32], null, null, 'mamba'],
            ['BlockRemoved', [33], null, 4, 'chunked_local_attention'],
          ],
        ]),
      );
      expect(rmHashes(out)).toEqual([10n, 11n, 12n, 13n, 14n, 15n, 16n, 17n, 18n, 19n, 20n, 21n]);
      expect(d.stats.skippedGroupEvents).toBe(1 + 4);
    });

    it('an unrecognised kind on a Stored event does not teach that its group is another one', () => {
      const d = decoder();
      const out1 = d.decodePayload(mp([0, [stored(1, 5, 'brand_new_attention', null)]]));
      expect(out1).toEqual([]); // the store is not indexed
      const out2 = d.decodePayload(mp([0, [['BlockRemoved', [1], null, 5]]]));
      expect(rmHashes(out2)).toEqual([1n]);
    });

    it('map form: bad or unknown metadata keeps the removal, known other-group metadata skips it', () => {
      const d = decoder();
      d.decodePayload(mp([0, [stored(1, 1, 'sliding_window', 128)]]));
      const out = d.decodePayload(
        mp([
          0,
          [
            { type: 'BlockRemoved', block_hashes: [10], group_idx: 1, kv_cache_spec_kind: 'mystery' },
            { type: 'BlockRemoved', block_hashes: [11], group_idx: 'one' },
            { type: 'BlockRemoved', block_hashes: [12], group_idx: 1, kv_cache_spec_kind: 7 },
            { type: 'BlockRemoved', block_hashes: [13], group_idx: -3 },
            { type: 'BlockRemoved', block_hashes: [14], group_idx: 8, medium: 42 },
            { type: 'BlockRemoved', block_hashes: [30], group_idx: 1 },
            { type: 'BlockRemoved', block_hashes: [31], kv_cache_spec_kind: 'sliding_window' },
          ],
        ]),
      );
      expect(rmHashes(out)).toEqual([10n, 11n, 12n, 13n, 14n]);
      expect(d.stats.skippedGroupEvents).toBe(1 + 2);
    });
  });

  it('reads the metadata from map events and from the trailing positions of array events', () => {
    const d = decoder();
    const out = d.decodePayload(
      mp([
        0,
        [
          {
            type: 'BlockStored',
            block_hashes: [5],
            token_ids: [1, 2, 3, 4],
            block_size: 4,
            group_idx: 1,
            kv_cache_spec_kind: 'sliding_window',
            kv_cache_spec_sliding_window: 512,
          },
          { type: 'BlockRemoved', block_hashes: [5], group_idx: 1 },
          // Kind without group, window in the last slot: [.., extra_keys, null, kind, window]
          stored(6, null, 'sliding_window', 1024),
        ],
      ]),
    );
    expect(out).toEqual([]);
    expect(d.stats.skippedGroupEvents).toBe(3);
    const b = decodeVllmBatch(mp([0, [stored(6, 3, 'chunked_local_attention', 64)]])).events[0];
    expect(b).toMatchObject({
      group_idx: 3,
      kv_cache_spec_kind: 'chunked_local_attention',
      kv_cache_spec_sliding_window: 64,
    });
  });
});

describe('vLLM malformed input', () => {
  it.each([
    [
      'truncated payload',
      () => mp([0, [['BlockRemoved', [1, 2, 3]]]]).subarray(0, 6),
      'batch: malformed msgpack',
    ],
    ['batch not a container', () => mp(5), 'batch: expected array or map, got 5'],
    ['short array batch', () => mp([0]), 'batch: expected [ts, events, data_parallel_rank?]'],
    ['ts not a number', () => mp(['now', []]), 'batch.ts: expected number'],
    ['events not a list', () => mp({ ts: 0, events: 3 }), 'batch.events: expected array, got 3'],
    ['negative rank', () => mp([0, [], -1]), 'batch.data_parallel_rank: expected u32'],
    ['event not tagged', () => mp([0, [5]]), 'batch.events[0]: expected tagged array or tagged map'],
    ['tag not a string', () => mp([0, [[3, [1]]]]), 'batch.events[0][0]: expected event type name'],
    [
      'map without type',
      () => mp([0, [{ block_hashes: [1] }]]),
      'batch.events[0].type: expected event type name',
    ],
    [
      'unknown kind (array)',
      () => mp([0, [['BlockEvicted', [1]]]]),
      'batch.events[0][0]: unknown event kind "BlockEvicted"',
    ],
    [
      'unknown kind (map)',
      () => mp([0, [{ type: 'Evicted' }]]),
      'batch.events[0].type: unknown event kind "Evicted"',
    ],
    [
      'stored too short',
      () => mp([0, [['BlockStored', [1], null, [1, 2, 3, 4]]]]),
      'batch.events[0]: expected BlockStored with',
    ],
    [
      'missing block_size (map)',
      () => mp([0, [{ type: 'BlockStored', block_hashes: [1], token_ids: [] }]]),
      'batch.events[0].block_size: required field missing',
    ],
    [
      'missing block_hashes (map)',
      () => mp([0, [{ type: 'BlockRemoved' }]]),
      'batch.events[0].block_hashes: required field missing',
    ],
    [
      'negative token id',
      () => mp([0, [['BlockStored', [1], null, [1, 2, -3, 4], 4]]]),
      'batch.events[0][3][2]: expected u32, got -3',
    ],
    [
      'token id above u32',
      () => mp([0, [['BlockStored', [1], null, [2 ** 32], 4]]]),
      'batch.events[0][3][0]: expected u32',
    ],
    [
      'ragged Eagle pair',
      () => mp([0, [['BlockStored', [1], null, [[1, 2], [3]], 4]]]),
      'batch.events[0][3][1]: expected (u32, u32) token pair',
    ],
    [
      // (A Removed with such a medium is applied instead: removals are applied when in doubt.)
      'medium not a string (Stored)',
      () => mp([0, [['BlockStored', [1], null, [1, 2, 3, 4], 4, null, 5]]]),
      'batch.events[0][6]: expected string, got 5',
    ],
    [
      'extra_keys not a list',
      () => mp([0, [['BlockStored', [1], null, [1, 2, 3, 4], 4, null, null, null, 'x']]]),
      'batch.events[0][8]: expected array',
    ],
    [
      'too many blocks',
      () => mp([0, [['BlockRemoved', new Array<number>(65_537).fill(1)]]]),
      'batch.events[0][1]: too many blocks (65537 > limit 65536)',
    ],
  ])('%s', (_name, payload, prefix) => {
    expectDecodeError(() => decodeVllmBatch(payload()), prefix);
  });

  it('applies a byte limit', () => {
    const p = mp([0, [['BlockRemoved', [1, 2, 3]]]]);
    expectDecodeError(() => decodeVllmBatch(p, { maxBytes: p.length - 1 }), 'batch: input too large');
  });

  it('changes no decoder state on a bad batch', () => {
    const d = decoder();
    d.decodePayload(
      mp([0, [['BlockStored', [1], null, [1, 2, 3, 4], 4, null, null, null, null, 0, 'sliding_window', 8]]]),
    );
    const before = d.stats;
    // The first event would be skipped (counted), but the second is malformed: nothing may be counted.
    const bad = mp([
      0,
      [['BlockStored', [2], null, [1, 2, 3, 4], 4, null, null, null, null, 0, 'sliding_window', 8], ['Nope']],
    ]);
    expect(() => d.decodePayload(bad)).toThrow(DecodeError);
    expect(d.stats).toEqual(before);
  });
});

describe('vLLM multipart and replay framing', () => {
  const seq = (n: bigint) => {
    const b = new Uint8Array(8);
    new DataView(b.buffer).setBigUint64(0, n);
    return b;
  };

  it('accepts exactly 3 frames [topic, 8-byte big-endian seq, payload]', () => {
    const payload = mp([0, [['AllBlocksCleared']]]);
    const m = parseVllmMultipart([
      new TextEncoder().encode('kv'),
      new Uint8Array([0, 0, 0, 0, 0, 0, 1, 2]),
      payload,
    ]);
    expect(m).toEqual({ topic: 'kv', seq: 258n, payload }); // 1·256 + 2
    const out = decoder().decodeMultipart([new Uint8Array(), seq(U64_MAX - 1n), payload]);
    expect(out.seq).toBe(U64_MAX - 1n);
    expect(out.events.map((e) => e.data)).toEqual(['cleared']);
  });

  it('rejects other frame counts and bad seq frames', () => {
    const p = mp([0, []]);
    expectDecodeError(() => parseVllmMultipart([new Uint8Array(), p]), 'vllm_message: expected 3 frames');
    expectDecodeError(
      () => parseVllmMultipart([new Uint8Array(), seq(1n), p, p]),
      'vllm_message: expected 3 frames',
    );
    expectDecodeError(
      () => parseVllmMultipart([new Uint8Array(), new Uint8Array(7), p]),
      'frames[1].seq: expected 8 bytes, got 7',
    );
  });

  it('encodes replay requests and parses replies with the -1 end marker', () => {
    expect([...encodeVllmReplayRequest(258n)]).toEqual([0, 0, 0, 0, 0, 0, 1, 2]);
    const p = mp([0, []]);
    expect(parseVllmReplayReply([seq(5n), p])).toEqual({ seq: 5n, payload: p });
    expect(parseVllmReplayReply([new Uint8Array(), seq(6n), p])).toEqual({ seq: 6n, payload: p });
    // vLLM's END_SEQ is (-1).to_bytes(8, "big", signed=True) = eight 0xff bytes.
    expect(parseVllmReplayReply([new Uint8Array(8).fill(0xff), new Uint8Array()])).toBeNull();
    expect(VLLM_REPLAY_END_SEQ).toBe(U64_MAX);
    expectDecodeError(() => parseVllmReplayReply([p]), 'vllm_replay: expected 2 frames');
  });
});
