/**
 * Conversion of decoded vLLM events to KV event data (docs/protocol.md §4 "Conversion") and the
 * stateful per-connection decoder. Frame and batch decoding and the group classification rules are in
 * `./vllm.js`. Event ids are not assigned here: the publisher numbers what this module returns (§3.3).
 */
import { localBlockHashes } from '../hash/index.js';
import type { DpRank } from '../ids.js';
import type { KvCacheEventData, KvCacheStoredBlockData, StorageTier } from './types.js';
import type { DecodeLimits } from './wire.js';
import { VllmGroupFilter, type VllmRawEvent, decodeVllmBatch, parseVllmMultipart } from './vllm.js';

// ---------------------------------------------------------------------------------------------------
// Conversion to KvCacheEvent data (§4 "Conversion")

const MEDIUM_TIERS = new Map<string, StorageTier>([
  ['GPU', 'device'],
  ['DEVICE', 'device'],
  ['CPU', 'host_pinned'],
  ['CPU_PINNED', 'host_pinned'],
  ['CPU_TIER1', 'host_pinned'],
  ['CPU_TIER2', 'disk'],
  ['DISK', 'disk'],
  ['NVME', 'disk'],
  ['EXTERNAL', 'external'],
  ['NETWORK', 'external'],
  ['REMOTE', 'external'],
  ['SHARED', 'external'],
]);

/** `medium` -> tier; null or an unrecognised medium is the device tier (upstream's default). */
export function mediumToTier(medium: string | null): StorageTier {
  return (medium !== null && MEDIUM_TIERS.get(medium)) || 'device';
}

export type VllmConversionIssue =
  /** A duplicate hash in the batch, or a block equal to its parent: replaced by an empty Removed. */
  | { kind: 'self_reference' }
  /** Blocks from `block_index` on were not converted: their block_size is not the worker's. */
  | { kind: 'block_size_mismatch'; block_index: number; block_size: number; expected: number }
  /** Blocks from `block_index` on were not converted: token_ids ran out (`needed` > `available`). */
  | { kind: 'tokens_exhausted'; block_index: number; needed: number; available: number };

export interface VllmConvertedEvent {
  /** The batch's `data_parallel_rank` when given, else the configured rank. */
  dp_rank: DpRank;
  storage_tier: StorageTier;
  data: KvCacheEventData;
  issue: VllmConversionIssue | null;
}

export interface VllmConvertOptions {
  /** The worker's `kv_cache_block_size` (§6.4). */
  kvBlockSize: number;
  /** Rank used when the batch does not name one. Default 0. */
  dpRank?: DpRank;
}

export function convertVllmEvent(
  ev: VllmRawEvent,
  opts: VllmConvertOptions,
  batchRank: number | null = null,
): VllmConvertedEvent {
  const bs = opts.kvBlockSize;
  if (!Number.isInteger(bs) || bs < 1)
    throw new RangeError(`kvBlockSize must be a positive integer, got ${bs}`);
  const dp_rank = batchRank ?? opts.dpRank ?? 0;
  if (ev.type === 'AllBlocksCleared')
    return { dp_rank, storage_tier: 'device', data: 'cleared', issue: null };
  const storage_tier = mediumToTier(ev.medium);
  if (ev.type === 'BlockRemoved')
    return { dp_rank, storage_tier, data: { removed: { block_hashes: ev.block_hashes } }, issue: null };

  const n = ev.block_hashes.length;
  const seen = new Set<bigint>();
  if (ev.parent_block_hash !== null) seen.add(ev.parent_block_hash);
  for (const h of ev.block_hashes) {
    if (seen.has(h))
      // A self-loop would corrupt the chain; an empty Removed is a no-op that still uses an event id.
      return {
        dp_rank,
        storage_tier,
        data: { removed: { block_hashes: [] } },
        issue: { kind: 'self_reference' },
      };
    seen.add(h);
  }

  let count = n;
  let issue: VllmConversionIssue | null = null;
  const extra = ev.is_eagle ? 1 : 0;
  if (n > 0 && ev.block_size !== bs) {
    count = 0;
    issue = { kind: 'block_size_mismatch', block_index: 0, block_size: ev.block_size, expected: bs };
  } else {
    // Block k reads tokens [k·bs, k·bs + bs + extra): Eagle windows overlap the next block by one token.
    const fit = Math.max(0, Math.floor((ev.token_ids.length - extra) / bs));
    if (fit < n) {
      count = fit;
      issue = {
        kind: 'tokens_exhausted',
        block_index: fit,
        needed: fit * bs + bs + extra,
        available: ev.token_ids.length,
      };
    }
  }

  const blocks = new Array<KvCacheStoredBlockData>(count);
  if (count > 0) {
    const mm = ev.block_mm_infos;
    const local = localBlockHashes(ev.token_ids.subarray(0, count * bs + extra), bs, {
      loraName: ev.lora_name ?? undefined,
      mmHashes: mm === null ? undefined : mm.slice(0, count).map((x) => x?.mm_objects.map((o) => o.mm_hash)),
      isEagle: ev.is_eagle,
    });
    for (let i = 0; i < count; i++)
      blocks[i] = { block_hash: ev.block_hashes[i], tokens_hash: local[i], mm_extra_info: mm?.[i] ?? null };
  }
  return {
    dp_rank,
    storage_tier,
    data: { stored: { parent_hash: ev.parent_block_hash, start_position: null, blocks } },
    issue,
  };
}

// ---------------------------------------------------------------------------------------------------
// Stateful decoder for one engine connection

export interface VllmDecoderOptions extends VllmConvertOptions {
  limits?: DecodeLimits;
  /** Receives at most `maxWarnings` messages about blocks that could not be converted. */
  onWarning?: (message: string) => void;
  /** Default 3 (upstream logs this condition at most 3 times). */
  maxWarnings?: number;
}

export interface VllmDecoderStats {
  batches: number;
  events: number;
  /** Events of non-full-attention groups (sliding window, mamba, ...), not converted. */
  skippedGroupEvents: number;
  selfReferenceStores: number;
  truncatedStores: number;
}

/**
 * Decodes and converts the messages of one vLLM publisher (one dp rank's ZMQ socket), keeping the
 * group filter and counters across messages. Malformed input throws `DecodeError` and changes nothing.
 */
export class VllmKvEventDecoder {
  readonly filter = new VllmGroupFilter();
  private readonly opts: VllmDecoderOptions;
  private warnings = 0;
  private readonly counters = { batches: 0, events: 0, selfReferenceStores: 0, truncatedStores: 0 };

  constructor(opts: VllmDecoderOptions) {
    if (!Number.isInteger(opts.kvBlockSize) || opts.kvBlockSize < 1)
      throw new RangeError(`kvBlockSize must be a positive integer, got ${opts.kvBlockSize}`);
    this.opts = opts;
  }

  get stats(): VllmDecoderStats {
    return { ...this.counters, skippedGroupEvents: this.filter.skipped };
  }

  /** 3-frame message `[topic, seq, payload]` -> sequence number and converted events. */
  decodeMultipart(frames: readonly Uint8Array[]): {
    topic: string;
    seq: bigint;
    events: VllmConvertedEvent[];
  } {
    const m = parseVllmMultipart(frames);
    return { topic: m.topic, seq: m.seq, events: this.decodePayload(m.payload) };
  }

  decodePayload(payload: Uint8Array): VllmConvertedEvent[] {
    // Everything that can throw happens before any state changes.
    const batch = decodeVllmBatch(payload, this.opts.limits);
    this.counters.batches++;
    const out: VllmConvertedEvent[] = [];
    for (const ev of batch.events) {
      this.counters.events++;
      if (!this.filter.accepts(ev)) continue;
      const c = convertVllmEvent(ev, this.opts, batch.data_parallel_rank);
      if (c.issue !== null) this.note(c.issue);
      out.push(c);
    }
    return out;
  }

  private note(issue: VllmConversionIssue): void {
    if (issue.kind === 'self_reference') {
      this.counters.selfReferenceStores++;
      return;
    }
    this.counters.truncatedStores++;
    if (this.opts.onWarning && this.warnings < (this.opts.maxWarnings ?? 3)) {
      this.warnings++;
      this.opts.onWarning(
        issue.kind === 'block_size_mismatch'
          ? `vLLM block not published: block size must be ${issue.expected} tokens, got ${issue.block_size}`
          : `vLLM block ${issue.block_index} not published: token_ids too short (need ${issue.needed}, got ${issue.available})`,
      );
    }
  }
}
