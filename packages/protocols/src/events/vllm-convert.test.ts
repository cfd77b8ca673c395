import { encode as mpEncode } from '@msgpack/msgpack';
import { xxh3 } from '@node-rs/xxhash';
import { describe, expect, it } from 'vitest';
import { type KvCacheEventData, type KvCacheStoreData, isStored } from './types.js';
import { type VllmRawEvent, decodeVllmBatch } from './vllm.js';
import { VllmKvEventDecoder, convertVllmEvent, mediumToTier } from './vllm-convert.js';

// Expected local hashes: docs/protocol.md §2.4 test vectors (bs = 4).
const H_1234 = 14643705804678351452n; // tokens [1,2,3,4]
const H_0123 = 9143094415614847814n; // tokens [0,1,2,3]
const H_4567 = 12124091508212882195n; // tokens [4,5,6,7]
const H_1234_LORA = 15671544057904749233n; // tokens [1,2,3,4], lora "my-lora"
const H_1234_MM = 6295130183325757331n; // tokens [1,2,3,4] + mm hashes {42, 7}

const mp = (v: unknown): Uint8Array => mpEncode(v, { useBigInt64: true });

/** Independent reference (Rust xxhash via N-API): XXH3-64 of the tokens as u32 LE, seed 1337 (§2.1). */
function refLocalHash(tokens: number[]): bigint {
  const b = new Uint8Array(tokens.length * 4);
  const dv = new DataView(b.buffer);
  tokens.forEach((t, i) => dv.setUint32(i * 4, t, true));
  return xxh3.xxh64(b, 1337n);
}

function storedOf(d: KvCacheEventData | undefined): KvCacheStoreData {
  if (d === undefined || !isStored(d)) throw new Error(`expected a stored event, got ${JSON.stringify(d)}`);
  return d.stored;
}

const decoder = (kvBlockSize = 4, dpRank = 0) => new VllmKvEventDecoder({ kvBlockSize, dpRank });

describe('vLLM medium -> storage tier', () => {
  it.each([
    ['GPU', 'device'],
    ['DEVICE', 'device'],
    ['CPU_PINNED', 'host_pinned'],
    ['CPU_TIER1', 'host_pinned'],
    ['CPU_TIER2', 'disk'],
    ['DISK', 'disk'],
    ['NVME', 'disk'],
    ['EXTERNAL', 'external'],
    ['NETWORK', 'external'],
    ['REMOTE', 'external'],
    ['SHARED', 'external'],
  ])('%s -> %s', (medium, tier) => {
    expect(mediumToTier(medium)).toBe(tier);
    const out = decoder().decodePayload(mp([0, [['BlockRemoved', [1], medium]]]));
    expect(out[0].storage_tier).toBe(tier);
  });

  it('null, unknown media and prototype keys are the device tier', () => {
    expect(mediumToTier(null)).toBe('device');
    expect(mediumToTier('QUANTUM')).toBe('device');
    expect(mediumToTier('constructor')).toBe('device');
  });
});

describe('vLLM token ids: Eagle pairs, LoRA, multimodal extra_keys', () => {
  it('flattens Eagle (u32, u32) pairs and hashes windows of bs+1 tokens', () => {
    // 8 pairs (t, t+1) for t = 10..17 -> flat [10..18] (9 tokens); bs = 4 -> floor((9−1)/4) = 2 blocks:
    // block 0 = tokens [10,11,12,13,14], block 1 = [14,15,16,17,18] (windows overlap by one token).
    const pairs = Array.from({ length: 8 }, (_, i) => [10 + i, 11 + i]);
    const batch = decodeVllmBatch(mp([0, [['BlockStored', [1, 2], null, pairs, 4, null, null, null]]]));
    const raw = batch.events[0] as Extract<VllmRawEvent, { type: 'BlockStored' }>;
    expect(raw.is_eagle).toBe(true);
    expect([...raw.token_ids]).toEqual([10, 11, 12, 13, 14, 15, 16, 17, 18]);
    const c = convertVllmEvent(raw, { kvBlockSize: 4 });
    expect(c.issue).toBeNull();
    expect(storedOf(c.data).blocks.map((b) => b.tokens_hash)).toEqual([
      refLocalHash([10, 11, 12, 13, 14]),
      refLocalHash([14, 15, 16, 17, 18]),
    ]);
  });

  it('seeds with the LoRA name; an empty name is no LoRA', () => {
    const ev = (lora: string | null) => ['BlockStored', [1], null, [1, 2, 3, 4], 4, 99, null, lora];
    const out = decoder().decodePayload(mp([0, [ev('my-lora'), ev(''), ev(null)]]));
    const th = out.map((e) => storedOf(e.data).blocks[0].tokens_hash);
    expect(th).toEqual([H_1234_LORA, H_1234, H_1234]);
  });

  it('reads multimodal ids from extra_keys: 64-hex strings and [hash, offset] pairs, first 16 hex chars', () => {
    const hex42 = '000000000000002a' + 'f'.repeat(48); // first 16 hex chars = 42
    const hex7 = '0000000000000007' + 'AB'.repeat(24); // = 7, upper case accepted
    const extraKeys = [
      [hex42, 'my-lora', 'salt-xyz', [hex7, 3], 12345, 'abc'], // lora names, salts and ints are not mm ids
      null,
    ];
    const payload = mp([
      0,
      [['BlockStored', [1, 2], null, [1, 2, 3, 4, 0, 1, 2, 3], 4, null, null, null, extraKeys]],
    ]);
    const [e] = decoder().decodePayload(payload);
    const blocks = storedOf(e.data).blocks;
    expect(blocks[0]).toEqual({
      block_hash: 1n,
      tokens_hash: H_1234_MM,
      mm_extra_info: {
        mm_objects: [
          { mm_hash: 42n, offsets: [] },
          { mm_hash: 7n, offsets: [] },
        ],
      },
    });
    expect(blocks[1]).toEqual({ block_hash: 2n, tokens_hash: H_0123, mm_extra_info: null });
  });

  it('extra_keys without any multimodal id change nothing', () => {
    const payload = mp([
      0,
      [['BlockStored', [1], null, [1, 2, 3, 4], 4, null, null, null, [['my-lora', 'x'.repeat(63)]]]],
    ]);
    const [e] = decoder().decodePayload(payload);
    expect(storedOf(e.data).blocks[0]).toEqual({
      block_hash: 1n,
      tokens_hash: H_1234,
      mm_extra_info: null,
    });
  });

  it('prefers explicit block_mm_infos (map key or trailing list) over extra_keys', () => {
    const infos = [
      {
        mm_objects: [
          { mm_hash: 42, offsets: [[0, 2]] },
          { mm_hash: 7, offsets: [] },
        ],
      },
    ];
    const ignored = [['0000000000000001' + '0'.repeat(48)]];
    const fromMap = {
      type: 'BlockStored',
      block_hashes: [1],
      token_ids: [1, 2, 3, 4],
      block_size: 4,
      extra_keys: ignored,
      block_mm_infos: infos,
    };
    const fromArr = ['BlockStored', [1], null, [1, 2, 3, 4], 4, null, null, null, ignored, infos];
    for (const ev of [fromMap, fromArr]) {
      const [e] = decoder().decodePayload(mp([0, [ev]]));
      expect(storedOf(e.data).blocks[0]).toEqual({
        block_hash: 1n,
        tokens_hash: H_1234_MM,
        mm_extra_info: {
          mm_objects: [
            { mm_hash: 42n, offsets: [[0, 2]] },
            { mm_hash: 7n, offsets: [] },
          ],
        },
      });
    }
  });
});

describe('vLLM conversion rules (§4 "Conversion")', () => {
  it('turns duplicate hashes or a self-parent into an empty Removed', () => {
    const d = decoder();
    const out = d.decodePayload(
      mp([
        0,
        [
          ['BlockStored', [5, 6, 5], null, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], 4],
          ['BlockStored', [8], 8, [1, 2, 3, 4], 4],
        ],
      ]),
    );
    expect(out).toEqual([
      {
        dp_rank: 0,
        storage_tier: 'device',
        data: { removed: { block_hashes: [] } },
        issue: { kind: 'self_reference' },
      },
      {
        dp_rank: 0,
        storage_tier: 'device',
        data: { removed: { block_hashes: [] } },
        issue: { kind: 'self_reference' },
      },
    ]);
    expect(d.stats.selfReferenceStores).toBe(2);
  });

  it('stops where the tokens run out and reports it', () => {
    // 3 blocks of 4 need 12 tokens; 9 given -> blocks 0 and 1 convert, block 2 needs tokens [8, 12).
    const [e] = decoder().decodePayload(
      mp([0, [['BlockStored', [1, 2, 3], null, [0, 1, 2, 3, 4, 5, 6, 7, 8], 4]]]),
    );
    expect(e.issue).toEqual({ kind: 'tokens_exhausted', block_index: 2, needed: 12, available: 9 });
    expect(storedOf(e.data).blocks.map((b) => b.tokens_hash)).toEqual([H_0123, H_4567]);
  });

  it('converts no block whose block_size differs from the worker kv_cache_block_size, and warns at most 3 times', () => {
    const warnings: string[] = [];
    const d = new VllmKvEventDecoder({ kvBlockSize: 4, onWarning: (m) => warnings.push(m) });
    const ev = ['BlockStored', [1, 2], 77, [0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7], 8];
    for (let i = 0; i < 5; i++) {
      const [e] = d.decodePayload(mp([0, [ev]]));
      expect(e.issue).toEqual({ kind: 'block_size_mismatch', block_index: 0, block_size: 8, expected: 4 });
      expect(e.data).toEqual({ stored: { parent_hash: 77n, start_position: null, blocks: [] } });
    }
    expect(warnings).toHaveLength(3);
    expect(warnings[0]).toBe('vLLM block not published: block size must be 4 tokens, got 8');
    expect(d.stats.truncatedStores).toBe(5);
  });

  it('does not assign event ids: the result carries data, rank and tier only', () => {
    const [e] = decoder().decodePayload(mp([0, [['AllBlocksCleared']]]));
    expect(Object.keys(e).sort()).toEqual(['data', 'dp_rank', 'issue', 'storage_tier']);
  });

  it('rejects a non-positive block size configuration', () => {
    expect(() => new VllmKvEventDecoder({ kvBlockSize: 0 })).toThrow(RangeError);
  });
});
