/**
 * vLLM ZMQ `KVEventBatch` decoder and conversion to KV event data (docs/protocol.md §4).
 *
 * vLLM's `vllm/distributed/kv_events.py` changed shape across releases; every variant is accepted:
 * array (`array_like`) or map batches, trailing defaults omitted, tagged-array or tagged-map events,
 * int (signed or unsigned) or bytes block hashes, extra positional fields and unknown map keys ignored,
 * hybrid-model `group_idx` / `kv_cache_spec_*` metadata. Event ids are not assigned here: the publisher
 * numbers what this module returns (§3.3).
 */
import { DecodeError } from '../errors.js';
import { localBlockHashes, xxh3_64 } from '../hash/index.js';
import { U64_MAX, type DpRank, type ExternalSequenceBlockHash } from '../ids.js';
import { mmExtraInfo } from './codec.js';
import type { BlockExtraInfo, KvCacheEventData, KvCacheStoredBlockData, StorageTier } from './types.js';
import { arr, at, describe, fail, finite, isObj, join, strOrNull, u32, u32OrNull } from './validate.js';
import { type DecodeLimits, decodeMsgpack, resolveLimits } from './wire.js';
import { readBeU64 } from './envelope.js';

// ---------------------------------------------------------------------------------------------------
// Raw (decoded, not yet converted) events

export interface VllmBlockStored {
  type: 'BlockStored';
  block_hashes: ExternalSequenceBlockHash[];
  parent_block_hash: ExternalSequenceBlockHash | null;
  /** Flat token ids; the Eagle pair form is already flattened (all firsts + the last pair's second). */
  token_ids: Uint32Array;
  is_eagle: boolean;
  block_size: number;
  medium: string | null;
  lora_name: string | null;
  /** Per block multimodal objects (from `block_mm_infos`, else from `extra_keys`); null = none at all. */
  block_mm_infos: Array<BlockExtraInfo | null> | null;
  group_idx: number | null;
  kv_cache_spec_kind: string | null;
  kv_cache_spec_sliding_window: number | null;
}

export interface VllmBlockRemoved {
  type: 'BlockRemoved';
  block_hashes: ExternalSequenceBlockHash[];
  medium: string | null;
  group_idx: number | null;
  kv_cache_spec_kind: string | null;
}

export interface VllmAllBlocksCleared {
  type: 'AllBlocksCleared';
}

export type VllmRawEvent = VllmBlockStored | VllmBlockRemoved | VllmAllBlocksCleared;

export interface VllmEventBatch {
  ts: number;
  events: VllmRawEvent[];
  /** Overrides the configured rank when not null. */
  data_parallel_rank: number | null;
}

// ---------------------------------------------------------------------------------------------------
// Multipart framing: [topic, seq (8 B BE), payload]; replay replies [seq, payload]

export interface VllmMessage {
  topic: string;
  /** The engine's own sequence number (gap detection, replay); not an event id. */
  seq: bigint;
  payload: Uint8Array;
}

export function parseVllmMultipart(frames: readonly Uint8Array[]): VllmMessage {
  if (!Array.isArray(frames) || frames.length !== 3)
    throw new DecodeError(`vllm_message: expected 3 frames [topic, seq, payload], got ${describe(frames)}`, {
      field: 'frames',
    });
  const [topic, seq, payload] = frames as [Uint8Array, Uint8Array, Uint8Array];
  if (!(topic instanceof Uint8Array))
    throw new DecodeError('frames[0].topic: expected bytes', { field: 'frames[0]' });
  if (!(payload instanceof Uint8Array))
    throw new DecodeError('frames[2].payload: expected bytes', { field: 'frames[2]' });
  let t: string;
  try {
    t = utf8.decode(topic);
  } catch {
    throw new DecodeError('frames[0].topic: invalid UTF-8', { field: 'frames[0]' });
  }
  return { topic: t, seq: readBeU64(seq, 'frames[1].seq'), payload };
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Replay request: the first wanted sequence number, 8 bytes big-endian. */
export function encodeVllmReplayRequest(startSeq: bigint): Uint8Array {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, BigInt.asUintN(64, startSeq));
  return b;
}

/** vLLM ends a replay with seq −1 (all ones) and an empty payload. */
export const VLLM_REPLAY_END_SEQ = (1n << 64n) - 1n;

/**
 * One replay reply: `[seq, payload]` (REQ socket) or `['', seq, payload]` (DEALER keeps the empty
 * delimiter). Returns null for the end marker.
 */
export function parseVllmReplayReply(
  frames: readonly Uint8Array[],
): { seq: bigint; payload: Uint8Array } | null {
  let f = frames;
  if (f.length === 3 && f[0] instanceof Uint8Array && f[0].length === 0) f = f.slice(1);
  if (f.length !== 2)
    throw new DecodeError(`vllm_replay: expected 2 frames [seq, payload], got ${frames.length}`, {
      field: 'frames',
    });
  const seq = readBeU64(f[0], 'frames[0].seq');
  const payload = f[1];
  if (!(payload instanceof Uint8Array))
    throw new DecodeError('frames[1].payload: expected bytes', { field: 'frames[1]' });
  if (seq === VLLM_REPLAY_END_SEQ) return null;
  return { seq, payload };
}

// ---------------------------------------------------------------------------------------------------
// Batch decoding

export function decodeVllmBatch(payload: Uint8Array, limits?: DecodeLimits): VllmEventBatch {
  const lim = resolveLimits(limits);
  const v = decodeMsgpack(payload, 'batch', lim.maxBytes);
  let ts: unknown, events: unknown, rank: unknown;
  if (Array.isArray(v)) {
    if (v.length < 2) fail('batch', '[ts, events, data_parallel_rank?]', v);
    ts = v[0] as unknown;
    events = v[1] as unknown;
    rank = v[2] as unknown;
  } else if (isObj(v)) {
    ts = v.ts;
    events = v.events;
    rank = v.data_parallel_rank !== undefined ? v.data_parallel_rank : v.dp_rank;
  } else return fail('batch', 'array or map', v);
  const list = arr(events, 'batch.events');
  const out = new Array<VllmRawEvent>(list.length);
  for (let i = 0; i < list.length; i++) out[i] = decodeEvent(list[i], at('batch.events', i), lim.maxBlocks);
  return {
    ts: finite(ts, 'batch.ts'),
    events: out,
    data_parallel_rank: u32OrNull(rank, 'batch.data_parallel_rank'),
  };
}

function decodeEvent(v: unknown, path: string, maxBlocks: number): VllmRawEvent {
  if (Array.isArray(v)) {
    const a = v as unknown[];
    const tag = a[0];
    if (typeof tag !== 'string') fail(at(path, 0), 'event type name', tag);
    return fromArray(tag, a, path, maxBlocks);
  }
  if (isObj(v)) {
    const tag = v.type;
    if (typeof tag !== 'string') fail(join(path, 'type'), 'event type name', tag);
    return fromMap(tag, v, path, maxBlocks);
  }
  return fail(path, 'tagged array or tagged map', v);
}

const STORED_ARRAY_TRAILER = 9;
const REMOVED_ARRAY_TRAILER = 3;
const TRAILER_SLOTS = 3;

function fromArray(tag: string, a: unknown[], path: string, maxBlocks: number): VllmRawEvent {
  switch (tag) {
    case 'BlockStored': {
      // [tag, block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium, lora_name,
      //  extra_keys, group_idx, kv_cache_spec_kind, kv_cache_spec_sliding_window, ...]
      if (a.length < 5)
        fail(path, 'BlockStored with block_hashes, parent_block_hash, token_ids, block_size', a);
      const ev = stored(
        a[1],
        a[2],
        a[3],
        a[4],
        a[6],
        a[7],
        a[8],
        null,
        {
          hashes: at(path, 1),
          parent: at(path, 2),
          tokens: at(path, 3),
          size: at(path, 4),
          medium: at(path, 6),
          lora: at(path, 7),
          extra: at(path, 8),
          mm: '',
        },
        maxBlocks,
      );
      readTrailer(a, STORED_ARRAY_TRAILER, path, ev);
      return ev;
    }
    case 'BlockRemoved': {
      // [tag, block_hashes, medium, group_idx, ...]
      if (a.length < 2) fail(path, 'BlockRemoved with block_hashes', a);
      const ev: VllmBlockRemoved = {
        type: 'BlockRemoved',
        block_hashes: hashes(a[1], at(path, 1), maxBlocks),
        // A medium that is no string: unknown tier (device), not a reason to drop the removal.
        medium: typeof a[2] === 'string' ? a[2] : null,
        group_idx: null,
        kv_cache_spec_kind: null,
      };
      if (a[2] != null && typeof a[2] !== 'string') return ev; // an unknown layout: applied as is
      readRemovedTrailer(a, ev);
      return ev;
    }
    case 'AllBlocksCleared':
      return { type: 'AllBlocksCleared' };
    default:
      return fail(at(path, 0), `unknown event kind "${tag}"`);
  }
}

/**
 * Positional fields after the fixed ones differ by producer: vLLM writes `group_idx, kind, window`;
 * some producers put `block_mm_infos` first. They are told apart by type: a list is block_mm_infos, a
 * string is the spec kind, an int is group_idx unless the kind came first (then it is the window).
 */
function readTrailer(a: unknown[], from: number, path: string, ev: VllmBlockStored | VllmBlockRemoved): void {
  const end = Math.min(a.length, from + TRAILER_SLOTS);
  let sawInt = false;
  let sawMm = false;
  for (let i = from; i < end; i++) {
    const x = a[i];
    if (x === null || x === undefined) continue;
    if (typeof x === 'string') {
      if (ev.kv_cache_spec_kind === null) ev.kv_cache_spec_kind = x;
    } else if (typeof x === 'number' || typeof x === 'bigint') {
      const n = u32(x, at(path, i));
      if (!sawInt && ev.kv_cache_spec_kind === null) ev.group_idx = n;
      else if (ev.type === 'BlockStored') ev.kv_cache_spec_sliding_window = n;
      sawInt = true;
    } else if (Array.isArray(x) && ev.type === 'BlockStored' && !sawMm) {
      // Explicit per-block objects win over ids recovered from extra_keys, as in the map form.
      ev.block_mm_infos = mmInfos(x, at(path, i));
      sawMm = true;
    }
  }
}

/**
 * `[.., medium, group_idx, kind, ...]` of a Removed. Removals are applied when in doubt: any value
 * that is not a u32 group index or a known spec kind clears the metadata (the filter then applies
 * the removal) instead of failing the batch or marking the removal as another group's.
 */
function readRemovedTrailer(a: unknown[], ev: VllmBlockRemoved): void {
  const end = Math.min(a.length, REMOVED_ARRAY_TRAILER + TRAILER_SLOTS);
  for (let i = REMOVED_ARRAY_TRAILER; i < end; i++) {
    const x = a[i];
    if (x === null || x === undefined) continue;
    const n = looseU32(x);
    if (n !== null && ev.group_idx === null && ev.kv_cache_spec_kind === null) ev.group_idx = n;
    else if (n !== null && ev.kv_cache_spec_kind !== null)
      continue; // a window after the kind
    else if (typeof x === 'string' && ev.kv_cache_spec_kind === null && isKnownKind(x))
      ev.kv_cache_spec_kind = x;
    else return clearGroup(ev);
  }
}

function clearGroup(ev: VllmBlockRemoved): void {
  ev.group_idx = null;
  ev.kv_cache_spec_kind = null;
}

function fromMap(tag: string, m: Record<string, unknown>, path: string, maxBlocks: number): VllmRawEvent {
  switch (tag) {
    case 'BlockStored': {
      for (const k of ['block_hashes', 'token_ids', 'block_size'])
        if (m[k] === undefined) fail(join(path, k), 'required field missing');
      return stored(
        m.block_hashes,
        m.parent_block_hash,
        m.token_ids,
        m.block_size,
        m.medium,
        m.lora_name,
        m.extra_keys,
        m.block_mm_infos,
        {
          hashes: join(path, 'block_hashes'),
          parent: join(path, 'parent_block_hash'),
          tokens: join(path, 'token_ids'),
          size: join(path, 'block_size'),
          medium: join(path, 'medium'),
          lora: join(path, 'lora_name'),
          extra: join(path, 'extra_keys'),
          mm: join(path, 'block_mm_infos'),
        },
        maxBlocks,
        m.group_idx,
        m.kv_cache_spec_kind,
        m.kv_cache_spec_sliding_window,
        path,
      );
    }
    case 'BlockRemoved': {
      if (m.block_hashes === undefined) fail(join(path, 'block_hashes'), 'required field missing');
      const ev: VllmBlockRemoved = {
        type: 'BlockRemoved',
        block_hashes: hashes(m.block_hashes, join(path, 'block_hashes'), maxBlocks),
        medium: typeof m.medium === 'string' ? m.medium : null,
        group_idx: looseU32(m.group_idx),
        kv_cache_spec_kind: typeof m.kv_cache_spec_kind === 'string' ? m.kv_cache_spec_kind : null,
      };
      // Metadata a removal cannot be sure of clears it all (the removal is then applied), not fatal.
      const badGroup = m.group_idx != null && ev.group_idx === null;
      const kind = m.kv_cache_spec_kind;
      const badKind = kind != null && (typeof kind !== 'string' || !isKnownKind(kind));
      if (badGroup || badKind) clearGroup(ev);
      return ev;
    }
    case 'AllBlocksCleared':
      return { type: 'AllBlocksCleared' };
    default:
      return fail(join(path, 'type'), `unknown event kind "${tag}"`);
  }
}

interface StoredPaths {
  hashes: string;
  parent: string;
  tokens: string;
  size: string;
  medium: string;
  lora: string;
  extra: string;
  mm: string;
}

function stored(
  hs: unknown,
  parent: unknown,
  tokens: unknown,
  size: unknown,
  medium: unknown,
  lora: unknown,
  extraKeys: unknown,
  mm: unknown,
  p: StoredPaths,
  maxBlocks: number,
  group?: unknown,
  kind?: unknown,
  window?: unknown,
  path?: string,
): VllmBlockStored {
  const block_hashes = hashes(hs, p.hashes, maxBlocks);
  const block_size = u32(size, p.size);
  const [token_ids, is_eagle] = tokenIds(tokens, p.tokens);
  let block_mm_infos: Array<BlockExtraInfo | null> | null = null;
  if (mm !== null && mm !== undefined) block_mm_infos = mmInfos(mm, p.mm);
  // block_mm_infos (exact objects) wins over extra_keys (ids only), as upstream does.
  if (block_mm_infos === null && extraKeys !== null && extraKeys !== undefined)
    block_mm_infos = extraKeysToMm(extraKeys, p.extra);
  return {
    type: 'BlockStored',
    block_hashes,
    parent_block_hash: parent === null || parent === undefined ? null : blockHash(parent, p.parent),
    token_ids,
    is_eagle,
    block_size,
    medium: strOrNull(medium, p.medium),
    lora_name: strOrNull(lora, p.lora),
    block_mm_infos,
    group_idx: path === undefined ? null : u32OrNull(group, join(path, 'group_idx')),
    kv_cache_spec_kind: path === undefined ? null : strOrNull(kind, join(path, 'kv_cache_spec_kind')),
    kv_cache_spec_sliding_window:
      path === undefined ? null : u32OrNull(window, join(path, 'kv_cache_spec_sliding_window')),
  };
}

const I64_MIN = -(1n << 63n);

/** int (signed i64 reinterpreted bit for bit, or u64) or bytes (XXH3-64, seed 0: stable per content). */
function blockHash(v: unknown, path: string): ExternalSequenceBlockHash {
  if (typeof v === 'number') {
    if (Number.isSafeInteger(v)) return BigInt.asUintN(64, BigInt(v)) as ExternalSequenceBlockHash;
  } else if (typeof v === 'bigint') {
    if (v >= I64_MIN && v <= U64_MAX) return BigInt.asUintN(64, v) as ExternalSequenceBlockHash;
  } else if (v instanceof Uint8Array) {
    return xxh3_64(v, 0n) as ExternalSequenceBlockHash;
  }
  return fail(path, 'int or bytes block hash', v);
}

function hashes(v: unknown, path: string, maxBlocks: number): ExternalSequenceBlockHash[] {
  const list = arr(v, path, maxBlocks, 'blocks');
  const out = new Array<ExternalSequenceBlockHash>(list.length);
  for (let i = 0; i < list.length; i++) out[i] = blockHash(list[i], at(path, i));
  return out;
}

const isU32 = (x: unknown): x is number =>
  typeof x === 'number' && Number.isInteger(x) && x >= 0 && x <= 0xffffffff;

/** A u32 as a number or bigint, else null (no error). */
function looseU32(x: unknown): number | null {
  if (isU32(x)) return x;
  return typeof x === 'bigint' && x >= 0n && x <= 0xffffffffn ? Number(x) : null;
}

/** Flat `[u32]`, or Eagle `[(u32, u32)]` flattened to every first element plus the last second. */
function tokenIds(v: unknown, path: string): [Uint32Array, boolean] {
  const list = arr(v, path);
  if (list.length > 0 && Array.isArray(list[0])) {
    const out = new Uint32Array(list.length + 1);
    for (let i = 0; i < list.length; i++) {
      const pair = list[i];
      if (!Array.isArray(pair) || pair.length !== 2) fail(at(path, i), '(u32, u32) token pair', pair);
      out[i] = isU32(pair[0]) ? pair[0] : u32(pair[0], at(at(path, i), 0));
      const second = isU32(pair[1]) ? pair[1] : u32(pair[1], at(at(path, i), 1));
      if (i === list.length - 1) out[list.length] = second;
    }
    return [out, true];
  }
  const out = new Uint32Array(list.length);
  for (let i = 0; i < list.length; i++) {
    const x = list[i];
    out[i] = isU32(x) ? x : u32(x, at(path, i));
  }
  return [out, false];
}

function mmInfos(v: unknown, path: string): Array<BlockExtraInfo | null> | null {
  const list = arr(v, path);
  const out = list.map((x, i) => mmExtraInfo(x, at(path, i), true));
  return out.some((x) => x !== null) ? out : null;
}

const HEX64 = /^[0-9a-fA-F]{64}$/;

/**
 * `extra_keys[i]` mixes multimodal ids with LoRA names, cache salts and prompt-embedding hashes; only a
 * 64-hex-char string (or the `[hash, offset]` pair of vLLM >= 0.19) is a multimodal id, read as the u64
 * of its first 16 hex chars. Offsets are not hashed (§2.1), so they are not kept.
 */
function extraKeysToMm(v: unknown, path: string): Array<BlockExtraInfo | null> | null {
  const list = arr(v, path);
  let any = false;
  const out = new Array<BlockExtraInfo | null>(list.length);
  for (let i = 0; i < list.length; i++) {
    const keys = list[i];
    out[i] = null;
    if (keys === null || keys === undefined) continue;
    const items = arr(keys, at(path, i));
    let objs: BlockExtraInfo['mm_objects'] | null = null;
    for (const item of items) {
      const s: unknown =
        typeof item === 'string' ? item : Array.isArray(item) && item.length === 2 ? item[0] : undefined;
      if (typeof s !== 'string' || !HEX64.test(s)) continue;
      (objs ??= []).push({ mm_hash: BigInt('0x' + s.slice(0, 16)), offsets: [] });
    }
    if (objs) {
      out[i] = { mm_objects: objs };
      any = true;
    }
  }
  return any ? out : null;
}

// ---------------------------------------------------------------------------------------------------
// Group filtering (hybrid models)

/** Spec kinds whose blocks form the prefix cache the router indexes. */
const MAIN_ATTENTION_KINDS = new Set(['full_attention', 'mla_attention', 'sink_full_attention']);

/** vLLM's spec kinds of groups the router does not index (`KVCacheSpec` subclasses). */
const OTHER_GROUP_KINDS = new Set([
  'sliding_window',
  'sliding_window_mla',
  'chunked_local_attention',
  'mamba',
  'cross_attention',
  'encoder_only_attention',
]);

const isKnownKind = (k: string): boolean => MAIN_ATTENTION_KINDS.has(k) || OTHER_GROUP_KINDS.has(k);

/**
 * Decides which events belong to the full-attention KV cache group. Stored events carry the group's
 * spec kind, so the filter learns `group_idx -> main?` from them and applies it to Removed events,
 * which carry only `group_idx`; an unlearned group's Stored events count as main iff it is group 0.
 *
 * Removals are applied when in doubt (issue 17): a dropped removal leaves a block in the index that
 * the engine no longer has, an unneeded one costs nothing. A Removed is skipped only when positively
 * identified as another group's: its kind is one of `OTHER_GROUP_KINDS`, or its group_idx was
 * learned as such. An unrecognised kind, an unlearned group or no metadata: applied. Stored events
 * with an unrecognised kind are not indexed, but teach nothing about their group.
 */
export class VllmGroupFilter {
  private readonly main = new Map<number, boolean>();
  /** Events dropped because they belong to a sliding-window or other non-full-attention group. */
  skipped = 0;

  accepts(ev: VllmRawEvent): boolean {
    if (ev.type === 'AllBlocksCleared') return true;
    let ok: boolean;
    if (ev.type === 'BlockRemoved') {
      const kind = ev.kv_cache_spec_kind;
      if (kind !== null && OTHER_GROUP_KINDS.has(kind)) ok = false;
      else if (kind !== null)
        ok = true; // main attention, or a kind nobody told us about
      else ok = ev.group_idx === null || this.main.get(ev.group_idx) !== false;
    } else if (ev.kv_cache_spec_kind !== null) {
      ok = MAIN_ATTENTION_KINDS.has(ev.kv_cache_spec_kind);
      const known = ok || OTHER_GROUP_KINDS.has(ev.kv_cache_spec_kind);
      if (ev.group_idx !== null && known) this.main.set(ev.group_idx, ok);
    } else if (ev.type === 'BlockStored' && ev.kv_cache_spec_sliding_window !== null) {
      ok = false;
      if (ev.group_idx !== null) this.main.set(ev.group_idx, false);
    } else if (ev.group_idx === null) ok = true;
    else ok = this.main.get(ev.group_idx) ?? ev.group_idx === 0;
    if (!ok) this.skipped++;
    return ok;
  }
}

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
