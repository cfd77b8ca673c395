/**
 * vLLM ZMQ `KVEventBatch` decoder (docs/protocol.md §4): multipart and replay framing, batch and event
 * decoding, and the group classification of hybrid models (`VllmGroupFilter`; removals are applied
 * when in doubt). Conversion to KV event data and the stateful decoder are in `./vllm-convert.js`.
 *
 * vLLM's `vllm/distributed/kv_events.py` changed shape across releases; every variant is accepted:
 * array (`array_like`) or map batches, trailing defaults omitted, tagged-array or tagged-map events,
 * int (signed or unsigned) or bytes block hashes, extra positional fields and unknown map keys ignored,
 * hybrid-model `group_idx` / `kv_cache_spec_*` metadata.
 */
import { DecodeError } from '../errors.js';
import { xxh3_64 } from '../hash/index.js';
import { U64_MAX, type ExternalSequenceBlockHash } from '../ids.js';
import { mmExtraInfo } from './codec.js';
import type { BlockExtraInfo } from './types.js';
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
