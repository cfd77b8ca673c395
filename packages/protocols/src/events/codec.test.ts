import { encode as mpEncode } from '@msgpack/msgpack';
import { describe, expect, it } from 'vitest';
import {
  RouterEventCodec,
  RouterEventListCodec,
  decodeRouterEvent,
  decodeRouterEventJson,
  encodeRouterEvent,
  encodeRouterEventJson,
} from './codec.js';
import { eventKind } from './types.js';
import { stringifyJson } from './json.js';
import { ABOVE_2_53, U64_MAX, cleared, expectDecodeError, mp, removed, stored } from './test-helpers.js';

describe('RouterEvent JSON', () => {
  it('decodes the docs/protocol.md §3.1 example exactly', () => {
    const text = `{"worker_id": 7587872800778374919, "storage_tier": "device",
 "event": {"event_id": 42, "dp_rank": 0,
   "data": {"stored": {"parent_hash": 1111, "start_position": null,
     "blocks": [{"block_hash": 2222, "tokens_hash": 14643705804678351452, "mm_extra_info": null},
                {"block_hash": 3333, "tokens_hash": 9143094415614847814, "mm_extra_info": null}]}}}}`;
    expect(decodeRouterEventJson(text)).toEqual({
      worker_id: 7587872800778374919n,
      storage_tier: 'device',
      event: {
        event_id: 42n,
        dp_rank: 0,
        data: {
          stored: {
            parent_hash: 1111n,
            start_position: null,
            blocks: [
              { block_hash: 2222n, tokens_hash: 14643705804678351452n, mm_extra_info: null },
              { block_hash: 3333n, tokens_hash: 9143094415614847814n, mm_extra_info: null },
            ],
          },
        },
      },
    });
  });

  it('decodes the §3.1 removal and clear forms', () => {
    const base =
      '{"worker_id": 5, "storage_tier": "device", "event": {"event_id": 43, "dp_rank": 0, "data": ';
    const r = decodeRouterEventJson(base + '{"removed": {"block_hashes": [2222, 3333]}}}}');
    expect(r.event.data).toEqual({ removed: { block_hashes: [2222n, 3333n] } });
    expect(eventKind(r.event.data)).toBe('removed');
    const c = decodeRouterEventJson(base + '"cleared"}}');
    expect(c.event.data).toBe('cleared');
    expect(eventKind(c.event.data)).toBe('cleared');
  });

  it('applies a removal whatever unknown fields it carries (issue 17: removals are applied when in doubt)', () => {
    const base =
      '{"worker_id": 5, "storage_tier": "device", "event": {"event_id": 44, "dp_rank": 0, "data": ';
    const extra = '"group_idx": "x", "kv_cache_spec_kind": "sliding_window", "trailer": [1, -2, null]';
    const r = decodeRouterEventJson(base + `{"removed": {"block_hashes": [2222], ${extra}}}}}`);
    expect(r.event.data).toEqual({ removed: { block_hashes: [2222n] } });
    const bin = decodeRouterEvent(
      mpEncode({
        worker_id: 5,
        storage_tier: 'device',
        event: {
          event_id: 45,
          dp_rank: 0,
          data: { removed: { block_hashes: [7], group_idx: -1, junk: 'x' } },
        },
      }),
    );
    expect(bin.event.data).toEqual({ removed: { block_hashes: [7n] } });
  });

  it('writes full digits and round-trips u64 above 2^53 and at 2^64−1', () => {
    const text = encodeRouterEventJson(stored);
    expect(text).toContain('"worker_id":18446744073709551615');
    expect(text).toContain('"event_id":9007199254740993');
    for (const e of [stored, removed, cleared])
      expect(decodeRouterEventJson(encodeRouterEventJson(e))).toEqual(e);
  });

  it('accepts decimal strings for u64 and UTF-8 bytes as input', () => {
    const text =
      '{"worker_id": "18446744073709551615", "event": {"event_id": "9007199254740993", "data": {"removed": {"block_hashes": ["7"]}}}}';
    const e = decodeRouterEventJson(new TextEncoder().encode(text));
    expect(e.worker_id).toBe(U64_MAX);
    expect(e.event.event_id).toBe(ABOVE_2_53);
    expect(e.event.data).toEqual({ removed: { block_hashes: [7n] } });
  });

  it('fills the §3.1 defaults: storage_tier device, dp_rank 0, parent_hash and start_position null', () => {
    const e = decodeRouterEventJson(
      '{"worker_id": 1, "event": {"event_id": 2, "data": {"stored": {"blocks": [{"block_hash": 3, "tokens_hash": 4}]}}}}',
    );
    expect(e).toEqual({
      worker_id: 1n,
      storage_tier: 'device',
      event: {
        event_id: 2n,
        dp_rank: 0,
        data: {
          stored: {
            parent_hash: null,
            start_position: null,
            blocks: [{ block_hash: 3n, tokens_hash: 4n, mm_extra_info: null }],
          },
        },
      },
    });
  });

  it('ignores unknown fields', () => {
    const e = decodeRouterEventJson(
      '{"worker_id": 1, "future": [1], "event": {"event_id": 2, "x": {}, "data": "cleared"}}',
    );
    expect(e.event.data).toBe('cleared');
  });
});

describe('RouterEvent msgpack', () => {
  it('round-trips u64 above 2^53 and at 2^64−1', () => {
    for (const e of [stored, removed, cleared]) expect(decodeRouterEvent(encodeRouterEvent(e))).toEqual(e);
  });

  it('writes small u64 values in compact integer formats', () => {
    const bytes = encodeRouterEvent(cleared);
    // cleared: worker_id 2^53+1 needs uint64 (0xcf + 8 bytes); event_id 1 is a positive fixint (0x01).
    const key = new TextEncoder().encode('event_id');
    const i = indexOf(bytes, key);
    expect(bytes[i + key.length]).toBe(0x01);
    const w = indexOf(bytes, new TextEncoder().encode('worker_id'));
    expect(bytes[w + 9]).toBe(0xcf);
  });

  it('accepts any integer width and normalises', () => {
    // worker_id as uint8, event_id as uint64 bigint 5, dp_rank as uint16, hashes mixed.
    const v = {
      worker_id: 200,
      storage_tier: 'external',
      event: {
        event_id: 5n,
        dp_rank: 300,
        data: { removed: { block_hashes: [1, 70000, 2n ** 40n, U64_MAX] } },
      },
    };
    const e = decodeRouterEvent(mp(v));
    expect(e.worker_id).toBe(200n);
    expect(e.event.event_id).toBe(5n);
    expect(e.event.dp_rank).toBe(300);
    expect(e.event.data).toEqual({ removed: { block_hashes: [1n, 70000n, 1099511627776n, U64_MAX] } });
  });

  it('reinterprets signed i64 hashes bit for bit', () => {
    // −1 → 2^64 − 1; −2 → 2^64 − 2; −2^63 → 2^63.
    const v = {
      worker_id: 1,
      event: {
        event_id: 1,
        data: {
          stored: {
            parent_hash: -2,
            blocks: [
              {
                block_hash: -1,
                tokens_hash: -(2n ** 63n),
                mm_extra_info: { mm_objects: [{ mm_hash: -1, offsets: [] }] },
              },
            ],
          },
        },
      },
    };
    const d = decodeRouterEvent(mp(v)).event.data as unknown as {
      stored: { parent_hash: bigint; blocks: Array<Record<string, unknown>> };
    };
    expect(d.stored.parent_hash).toBe(18446744073709551614n);
    expect(d.stored.blocks[0]).toEqual({
      block_hash: U64_MAX,
      tokens_hash: 9223372036854775808n,
      mm_extra_info: { mm_objects: [{ mm_hash: U64_MAX, offsets: [] }] },
    });
  });

  it('does not reinterpret negative ids (only engine hashes are signed)', () => {
    expectDecodeError(
      () => decodeRouterEvent(mp({ worker_id: 1, event: { event_id: -1, data: 'cleared' } })),
      'event.event_id: expected u64',
      'event.event_id',
    );
    expectDecodeError(
      () => decodeRouterEvent(mp({ worker_id: -5, event: { event_id: 1, data: 'cleared' } })),
      'worker_id: expected u64',
    );
  });
});

describe('RouterEvent validation', () => {
  const good = {
    worker_id: 1,
    storage_tier: 'device',
    event: {
      event_id: 1,
      dp_rank: 0,
      data: {
        stored: {
          parent_hash: null,
          start_position: null,
          blocks: [
            { block_hash: 1, tokens_hash: 1, mm_extra_info: null },
            { block_hash: 2, tokens_hash: 2, mm_extra_info: null },
            { block_hash: 3, tokens_hash: 3, mm_extra_info: null },
            { block_hash: 4, tokens_hash: 4, mm_extra_info: null },
          ],
        },
      },
    },
  };
  const mutate = (f: (v: typeof good & Record<string, unknown>) => void): typeof good => {
    const v = structuredClone(good) as typeof good & Record<string, unknown>;
    f(v);
    return v;
  };
  const blocks = (v: typeof good) => v.event.data.stored.blocks as unknown as Array<Record<string, unknown>>;

  it('rejects a truncated msgpack buffer', () => {
    const bytes = mp(good);
    for (const cut of [1, 10, bytes.length - 1])
      expectDecodeError(() => decodeRouterEvent(bytes.subarray(0, cut)), 'router_event: malformed msgpack');
    expectDecodeError(() => decodeRouterEvent(new Uint8Array(0)), 'router_event: empty input');
  });

  it('rejects trailing bytes after the message', () => {
    const bytes = mp(good);
    const more = new Uint8Array(bytes.length + 1);
    more.set(bytes);
    expectDecodeError(() => decodeRouterEvent(more), 'router_event: malformed msgpack');
  });

  it('rejects malformed JSON text', () => {
    expectDecodeError(() => decodeRouterEventJson('{"worker_id": 1, "event": '), 'router_event: json:');
    expectDecodeError(
      () => decodeRouterEventJson(new Uint8Array([0x7b, 0xff, 0x7d])),
      'router_event: invalid UTF-8',
    );
  });

  it('names the path of a wrong type deep inside', () => {
    const v = mutate((x) => (blocks(x)[3].tokens_hash = 'abc'));
    const f = 'event.data.stored.blocks[3].tokens_hash';
    expectDecodeError(() => decodeRouterEvent(mp(v)), `${f}: expected u64`, f);
    expectDecodeError(() => decodeRouterEventJson(JSON.stringify(v)), `${f}: expected u64`, f);
  });

  it.each([
    [
      'block hash above 2^64−1',
      (x: typeof good) => (blocks(x)[0].block_hash = 2n ** 64n),
      'event.data.stored.blocks[0].block_hash: expected u64',
    ],
    ['fractional id', (x: typeof good) => (x.event.event_id = 1.5), 'event.event_id: expected u64'],
    ['dp_rank above u32', (x: typeof good) => (x.event.dp_rank = 2 ** 32), 'event.dp_rank: expected u32'],
    [
      'negative start_position',
      (x: typeof good) => ((x.event.data.stored as Record<string, unknown>).start_position = -1),
      'event.data.stored.start_position: expected u32',
    ],
    [
      'unknown tier',
      (x: typeof good) => (x.storage_tier = 'gpu'),
      'storage_tier: expected one of device, host_pinned, disk, external',
    ],
    [
      'prototype key as tier',
      (x: typeof good) => (x.storage_tier = 'constructor'),
      'storage_tier: expected one of',
    ],
    [
      'blocks not an array',
      (x: typeof good) => ((x.event.data.stored as Record<string, unknown>).blocks = {}),
      'event.data.stored.blocks: expected array',
    ],
    [
      'block not an object',
      (x: typeof good) => ((x.event.data.stored.blocks as unknown[])[1] = 5),
      'event.data.stored.blocks[1]: expected object',
    ],
    [
      'mm_extra_info without mm_objects',
      (x: typeof good) => (blocks(x)[2].mm_extra_info = {}),
      'event.data.stored.blocks[2].mm_extra_info.mm_objects: expected array',
    ],
  ])('rejects %s', (_name, f, prefix) => {
    // JSON carries every case exactly (the msgpack encoder would wrap 2^64 to 0).
    const v = mutate(f);
    expectDecodeError(() => decodeRouterEventJson(stringifyJson(v)), prefix);
    if (!_name.includes('2^64')) expectDecodeError(() => decodeRouterEvent(mp(v)), prefix);
  });

  it.each([
    ['worker_id', (x: Record<string, unknown>) => delete x.worker_id, 'worker_id: expected u64, got nothing'],
    ['event', (x: Record<string, unknown>) => delete x.event, 'event: expected object, got nothing'],
    [
      'event.event_id',
      (x: Record<string, unknown>) => delete (x.event as Record<string, unknown>).event_id,
      'event.event_id: expected u64',
    ],
    [
      'event.data',
      (x: Record<string, unknown>) => delete (x.event as Record<string, unknown>).data,
      'event.data: expected one of cleared, stored, removed',
    ],
    [
      'blocks',
      (x: Record<string, unknown>) =>
        delete ((x.event as typeof good.event).data.stored as Record<string, unknown>).blocks,
      'event.data.stored.blocks: expected array',
    ],
    [
      'block_hash',
      (x: Record<string, unknown>) => delete blocks(x as typeof good)[0].block_hash,
      'event.data.stored.blocks[0].block_hash: expected u64',
    ],
  ])('rejects a missing required field %s', (_name, f, prefix) => {
    expectDecodeError(() => decodeRouterEvent(mp(mutate(f))), prefix);
  });

  it('rejects unknown event kinds and ambiguous variants', () => {
    expectDecodeError(
      () =>
        decodeRouterEvent(mp(mutate((x) => ((x.event as Record<string, unknown>).data = { evicted: {} })))),
      'event.data: unknown kind "evicted"',
      'event.data',
    );
    expectDecodeError(
      () => decodeRouterEvent(mp(mutate((x) => ((x.event as Record<string, unknown>).data = 'flushed')))),
      'event.data: unknown kind "flushed"',
    );
    expectDecodeError(
      () =>
        decodeRouterEvent(
          mp(
            mutate(
              (x) =>
                ((x.event as Record<string, unknown>).data = {
                  stored: { blocks: [] },
                  removed: { block_hashes: [] },
                }),
            ),
          ),
        ),
      'event.data: exactly one variant key',
    );
    expectDecodeError(
      () => decodeRouterEvent(mp(mutate((x) => ((x.event as Record<string, unknown>).data = 'stored')))),
      'event.data: variant "stored" needs a body',
    );
  });

  it('rejects a u64 that JSON.parse-style lossy producers would send', () => {
    // 1e19 is a float in JSON and not an exact integer of our range; 2^60 written as a double is not safe.
    expectDecodeError(
      () => decodeRouterEventJson('{"worker_id": 1e19, "event": {"event_id": 1, "data": "cleared"}}'),
      'worker_id: expected u64',
    );
    expectDecodeError(
      () => decodeRouterEvent(mp({ worker_id: 2 ** 60, event: { event_id: 1, data: 'cleared' } })),
      'worker_id: expected u64',
    );
  });

  it('enforces maxBlocks per event (stored blocks and removed hashes)', () => {
    expectDecodeError(
      () => decodeRouterEvent(mp(good), { maxBlocks: 3 }),
      'event.data.stored.blocks: too many blocks (4 > limit 3)',
    );
    expect(decodeRouterEvent(mp(good), { maxBlocks: 4 }).event.event_id).toBe(1n);
    const rm = { worker_id: 1, event: { event_id: 1, data: { removed: { block_hashes: [1, 2, 3] } } } };
    expectDecodeError(
      () => decodeRouterEventJson(JSON.stringify(rm), { maxBlocks: 2 }),
      'event.data.removed.block_hashes: too many blocks',
    );
  });

  it('enforces the default maxBlocks of 65536', () => {
    const many = {
      worker_id: 1,
      event: { event_id: 1, data: { removed: { block_hashes: new Array<number>(65_537).fill(1) } } },
    };
    expectDecodeError(
      () => decodeRouterEvent(mp(many)),
      'event.data.removed.block_hashes: too many blocks (65537 > limit 65536)',
    );
  });

  it('enforces the byte limit before decoding', () => {
    const bytes = mp(good);
    expectDecodeError(
      () => decodeRouterEvent(bytes, { maxBytes: bytes.length - 1 }),
      `router_event: input too large (${bytes.length} >`,
    );
    expect(decodeRouterEvent(bytes, { maxBytes: bytes.length }).worker_id).toBe(1n);
    expectDecodeError(
      () => decodeRouterEventJson(JSON.stringify(good), { maxBytes: 10 }),
      'router_event: input too large',
    );
  });

  it('rejects an array length header larger than the input', () => {
    // fixmap(1) "worker_id" → 1, then key "event" → array32 claiming 2^32−1 elements with nothing after.
    const head = mp({ worker_id: 1 });
    const bytes = new Uint8Array([
      0x82,
      ...head.subarray(1),
      0xa5,
      ...new TextEncoder().encode('event'),
      0xdd,
      0xff,
      0xff,
      0xff,
      0xff,
    ]);
    expectDecodeError(() => decodeRouterEvent(bytes), 'router_event: malformed msgpack');
  });
});

describe('RouterEvent lists (dumps, snapshots)', () => {
  it('round-trips a JSON array and names the index of a bad element', () => {
    const list = [stored, removed, cleared];
    expect(RouterEventListCodec.decodeJson(RouterEventListCodec.encodeJson(list))).toEqual(list);
    const bad = JSON.parse(RouterEventListCodec.encodeJson([cleared, cleared])) as Array<
      Record<string, unknown>
    >;
    (bad[1].event as Record<string, unknown>).event_id = 'x';
    expectDecodeError(
      () => RouterEventListCodec.decodeJson(JSON.stringify(bad)),
      '[1].event.event_id: expected u64',
    );
  });
});

describe('codec.fromValue', () => {
  it('validates an already decoded tree (request-plane payloads)', () => {
    expect(RouterEventCodec.fromValue({ worker_id: 1n, event: { event_id: 2, data: 'cleared' } })).toEqual({
      worker_id: 1n,
      storage_tier: 'device',
      event: { event_id: 2n, dp_rank: 0, data: 'cleared' },
    });
    expectDecodeError(() => RouterEventCodec.fromValue(null), '<root>: expected object');
  });
});

function indexOf(hay: Uint8Array, needle: Uint8Array): number {
  outer: for (let i = 0; i + needle.length <= hay.length; i++) {
    for (let j = 0; j < needle.length; j++) if (hay[i + j] !== needle[j]) continue outer;
    return i;
  }
  return -1;
}
