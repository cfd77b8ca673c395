/**
 * Validation of what an engine hands the publisher. Everything is checked before any state
 * changes, and a bad field is named in the error (`invalid_argument`, detail.field).
 */
import {
  STORAGE_TIERS,
  type KvCacheEventData,
  type KvCacheStoredBlockData,
  type StorageTier,
  invalidArgument,
  describeValue as describe,
} from '@kvrouter/protocols';
import { checkU32, checkU64 } from '../errors.js';

/** One engine-side KV event before the publisher numbers it. */
export interface EngineKvInput {
  /** Default 0. */
  dp_rank?: number;
  /** Default `device`. */
  storage_tier?: StorageTier;
  data: KvCacheEventData;
}

export interface CheckedInput {
  rank: number;
  tier: StorageTier;
  data: KvCacheEventData;
}

const TIERS = new Set<unknown>(STORAGE_TIERS);
const MAX_BLOCKS_PER_EVENT = 65_536;

export function checkInput(ev: EngineKvInput): CheckedInput {
  if (typeof ev !== 'object' || ev === null)
    throw invalidArgument('event', `must be an object, got ${describe(ev)}`);
  const rank = ev.dp_rank === undefined ? 0 : checkU32(ev.dp_rank, 'dp_rank');
  const tier = ev.storage_tier ?? 'device';
  if (!TIERS.has(tier))
    throw invalidArgument(
      'storage_tier',
      `must be one of ${STORAGE_TIERS.join(', ')}, got ${describe(tier)}`,
    );
  const d = ev.data;
  if (d === 'cleared') return { rank, tier, data: d };
  if (typeof d !== 'object' || d === null)
    throw invalidArgument('data', `must be {stored}, {removed} or "cleared", got ${describe(d)}`);
  if ('stored' in d) {
    const s = d.stored;
    if (typeof s !== 'object' || s === null) throw invalidArgument('data.stored', 'must be an object');
    if (s.parent_hash !== null) checkU64(s.parent_hash, 'data.stored.parent_hash');
    const sp = s.start_position ?? null;
    if (sp !== null) checkU32(sp, 'data.stored.start_position');
    if (!Array.isArray(s.blocks)) throw invalidArgument('data.stored.blocks', 'must be an array');
    if (s.blocks.length > MAX_BLOCKS_PER_EVENT)
      throw invalidArgument(
        'data.stored.blocks',
        `holds ${s.blocks.length} blocks, limit ${MAX_BLOCKS_PER_EVENT}`,
      );
    for (let i = 0; i < s.blocks.length; i++) {
      const b = s.blocks[i] as KvCacheStoredBlockData | undefined;
      if (typeof b !== 'object' || b === null)
        throw invalidArgument(`data.stored.blocks[${i}]`, 'must be an object');
      checkU64(b.block_hash, `data.stored.blocks[${i}].block_hash`);
      checkU64(b.tokens_hash, `data.stored.blocks[${i}].tokens_hash`);
      const mm = b.mm_extra_info ?? null;
      if (mm !== null && (typeof mm !== 'object' || !Array.isArray(mm.mm_objects)))
        throw invalidArgument(
          `data.stored.blocks[${i}].mm_extra_info`,
          'must be null or {mm_objects: [...]}',
        );
    }
    return { rank, tier, data: d };
  }
  if ('removed' in d) {
    const r = d.removed;
    if (typeof r !== 'object' || r === null || !Array.isArray(r.block_hashes))
      throw invalidArgument('data.removed.block_hashes', 'must be an array');
    if (r.block_hashes.length > MAX_BLOCKS_PER_EVENT)
      throw invalidArgument(
        'data.removed.block_hashes',
        `holds ${r.block_hashes.length} hashes, limit ${MAX_BLOCKS_PER_EVENT}`,
      );
    for (let i = 0; i < r.block_hashes.length; i++)
      checkU64(r.block_hashes[i], `data.removed.block_hashes[${i}]`);
    return { rank, tier, data: d };
  }
  throw invalidArgument('data', 'must have a "stored" or "removed" key, or be "cleared"');
}
