/**
 * Validating codecs (JSON and msgpack) for the KV event model and the other event-plane and indexer
 * messages (docs/protocol.md §3.1, §3.5, §5.4, §5.5, §7.1, §7.7). Optional wire fields take their §3.1
 * defaults; unknown fields are ignored (forward compatibility); unknown kinds, wrong types and missing
 * required fields are `DecodeError`s naming the field path. Nothing partial is ever returned.
 */
import type {
  EventId,
  ExternalSequenceBlockHash,
  LocalBlockHash,
  RouterId,
  SequenceHash,
  WorkerId,
  WorkerWithDpRank,
} from '../ids.js';
import type {
  ActiveLoad,
  ActiveSequenceEvent,
  ActiveSequenceEventData,
  AddRequestData,
  BlockExtraInfo,
  KvCacheEvent,
  KvCacheEventData,
  KvCacheStoredBlockData,
  LocalIndexerQueryRequest,
  LocalIndexerQueryResponse,
  PrefillLoadHint,
  RemoteIndexerQuery,
  RemoteIndexerQueryResponse,
  RemoteIndexerRecordRequest,
  RemoteIndexerRecordResponse,
  RouterEvent,
  StorageTier,
  WireOverlapScores,
} from './types.js';
import { STORAGE_TIERS } from './types.js';
import {
  arr,
  at,
  bool,
  count,
  countOrNull,
  fail,
  join,
  obj,
  str,
  tagOf,
  u32,
  u32OrNull,
  u64,
  u64OrNull,
} from './validate.js';
import {
  type Codec,
  type DecodeLimits,
  type ResolvedLimits,
  makeCodec,
  u64Out,
  u64OutOrNull,
} from './wire.js';

// ---------------------------------------------------------------------------------------------------
// RouterEvent

const TIERS = new Map<unknown, StorageTier>(STORAGE_TIERS.map((t) => [t, t]));

function storageTier(v: unknown, path: string): StorageTier {
  if (v === undefined || v === null) return 'device';
  const t = TIERS.get(v);
  if (t === undefined) fail(path, 'one of device, host_pinned, disk, external', v);
  return t;
}

/** `mm_extra_info` / vLLM `block_mm_infos[i]`: null or `{mm_objects: [{mm_hash, offsets}]}`. */
export function mmExtraInfo(v: unknown, path: string, signed: boolean): BlockExtraInfo | null {
  if (v === null || v === undefined) return null;
  const o = obj(v, path);
  const objsPath = join(path, 'mm_objects');
  const list = arr(o.mm_objects, objsPath);
  const mm_objects = new Array<BlockExtraInfo['mm_objects'][number]>(list.length);
  for (let i = 0; i < list.length; i++) {
    const p = at(objsPath, i);
    const m = obj(list[i], p);
    const offPath = join(p, 'offsets');
    const offs = m.offsets === undefined || m.offsets === null ? [] : arr(m.offsets, offPath);
    const offsets = new Array<[number, number]>(offs.length);
    for (let j = 0; j < offs.length; j++) {
      const pp = at(offPath, j);
      const pair = arr(offs[j], pp);
      if (pair.length !== 2) fail(pp, '[start, end] pair', pair);
      offsets[j] = [count(pair[0], at(pp, 0)), count(pair[1], at(pp, 1))];
    }
    mm_objects[i] = { mm_hash: u64(m.mm_hash, join(p, 'mm_hash'), signed), offsets };
  }
  return { mm_objects };
}

function storedBlock(v: unknown, base: string, i: number, signed: boolean): KvCacheStoredBlockData {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) fail(at(base, i), 'object', v);
  const o = v as Record<string, unknown>;
  const bh = o.block_hash;
  const th = o.tokens_hash;
  // Fast path: safe integers (the common msgpack/JSON shape); anything else goes through full checks.
  const block_hash = (
    typeof bh === 'number' && Number.isSafeInteger(bh) && bh >= 0
      ? BigInt(bh)
      : u64(bh, `${at(base, i)}.block_hash`, signed)
  ) as ExternalSequenceBlockHash;
  const tokens_hash = (
    typeof th === 'number' && Number.isSafeInteger(th) && th >= 0
      ? BigInt(th)
      : u64(th, `${at(base, i)}.tokens_hash`, signed)
  ) as LocalBlockHash;
  const mm = o.mm_extra_info;
  return {
    block_hash,
    tokens_hash,
    mm_extra_info:
      mm === null || mm === undefined ? null : mmExtraInfo(mm, `${at(base, i)}.mm_extra_info`, signed),
  };
}

function hashList(v: unknown, path: string, lim: ResolvedLimits, signed: boolean): bigint[] {
  const list = arr(v, path, lim.maxBlocks, 'blocks');
  const out = new Array<bigint>(list.length);
  for (let i = 0; i < list.length; i++) {
    const x = list[i];
    out[i] =
      typeof x === 'number' && Number.isSafeInteger(x) && x >= 0 ? BigInt(x) : u64(x, at(path, i), signed);
  }
  return out;
}

function eventData(v: unknown, path: string, lim: ResolvedLimits, signed: boolean): KvCacheEventData {
  const tag = tagOf(v, path, ['cleared'], ['stored', 'removed']);
  if (tag === 'cleared') return 'cleared';
  const bodyPath = join(path, tag);
  const body = obj((v as Record<string, unknown>)[tag], bodyPath);
  if (tag === 'removed') {
    return {
      removed: {
        block_hashes: hashList(
          body.block_hashes,
          join(bodyPath, 'block_hashes'),
          lim,
          signed,
        ) as ExternalSequenceBlockHash[],
      },
    };
  }
  const blocksPath = join(bodyPath, 'blocks');
  const list = arr(body.blocks, blocksPath, lim.maxBlocks, 'blocks');
  const blocks = new Array<KvCacheStoredBlockData>(list.length);
  for (let i = 0; i < list.length; i++) blocks[i] = storedBlock(list[i], blocksPath, i, signed);
  return {
    stored: {
      parent_hash: u64OrNull(
        body.parent_hash,
        join(bodyPath, 'parent_hash'),
        signed,
      ) as ExternalSequenceBlockHash | null,
      start_position: u32OrNull(body.start_position, join(bodyPath, 'start_position')),
      blocks,
    },
  };
}

function kvCacheEvent(v: unknown, path: string, lim: ResolvedLimits, signed: boolean): KvCacheEvent {
  const o = obj(v, path);
  return {
    event_id: u64(o.event_id, join(path, 'event_id')) as EventId,
    data: eventData(o.data, join(path, 'data'), lim, signed),
    dp_rank: o.dp_rank === undefined || o.dp_rank === null ? 0 : u32(o.dp_rank, join(path, 'dp_rank')),
  };
}

const routerEventFrom = (v: unknown, path: string, lim: ResolvedLimits, signed: boolean): RouterEvent => {
  const o = obj(v, path);
  return {
    worker_id: u64(o.worker_id, join(path, 'worker_id')) as WorkerId,
    storage_tier: storageTier(o.storage_tier, join(path, 'storage_tier')),
    event: kvCacheEvent(o.event, join(path, 'event'), lim, signed),
  };
};

function mmExtraInfoOut(m: BlockExtraInfo | null): unknown {
  if (m === null) return null;
  return { mm_objects: m.mm_objects.map((o) => ({ mm_hash: u64Out(o.mm_hash), offsets: o.offsets })) };
}

function eventDataOut(d: KvCacheEventData): unknown {
  if (d === 'cleared') return 'cleared';
  if ('stored' in d) {
    const s = d.stored;
    const blocks = new Array<unknown>(s.blocks.length);
    for (let i = 0; i < blocks.length; i++) {
      const b = s.blocks[i];
      blocks[i] = {
        block_hash: u64Out(b.block_hash),
        tokens_hash: u64Out(b.tokens_hash),
        mm_extra_info: mmExtraInfoOut(b.mm_extra_info),
      };
    }
    return { stored: { parent_hash: u64OutOrNull(s.parent_hash), start_position: s.start_position, blocks } };
  }
  return { removed: { block_hashes: d.removed.block_hashes.map(u64Out) } };
}

const routerEventTo = (e: RouterEvent): unknown => ({
  worker_id: u64Out(e.worker_id),
  storage_tier: e.storage_tier,
  event: { event_id: u64Out(e.event.event_id), data: eventDataOut(e.event.data), dp_rank: e.event.dp_rank },
});

export const RouterEventCodec: Codec<RouterEvent> = makeCodec<RouterEvent>(
  'router_event',
  routerEventFrom,
  routerEventTo,
);

/** A JSON array of RouterEvents: tree dumps (§3.7) and the JetStream snapshot object (§5.3). */
export const RouterEventListCodec: Codec<RouterEvent[]> = makeCodec<RouterEvent[]>(
  'router_events',
  (v, path, lim, signed) => {
    const list = arr(v, path);
    const out = new Array<RouterEvent>(list.length);
    for (let i = 0; i < list.length; i++) out[i] = routerEventFrom(list[i], at(path, i), lim, signed);
    return out;
  },
  (l) => l.map(routerEventTo),
);

/** msgpack `RouterEvent` (event-plane payload, §5.1). */
export const encodeRouterEvent = (e: RouterEvent): Uint8Array => RouterEventCodec.encodeMsgpack(e);
export const decodeRouterEvent = (b: Uint8Array, limits?: DecodeLimits): RouterEvent =>
  RouterEventCodec.decodeMsgpack(b, limits);
/** JSON `RouterEvent` (JetStream durable mode, HTTP, dumps). */
export const encodeRouterEventJson = (e: RouterEvent): string => RouterEventCodec.encodeJson(e);
export const decodeRouterEventJson = (t: string | Uint8Array, limits?: DecodeLimits): RouterEvent =>
  RouterEventCodec.decodeJson(t, limits);

// ---------------------------------------------------------------------------------------------------
// WorkerWithDpRank

function workerWithDpRank(v: unknown, path: string): WorkerWithDpRank {
  const o = obj(v, path);
  return {
    worker_id: u64(o.worker_id, join(path, 'worker_id')) as WorkerId,
    dp_rank: o.dp_rank === undefined || o.dp_rank === null ? 0 : u32(o.dp_rank, join(path, 'dp_rank')),
  };
}

const workerOut = (w: WorkerWithDpRank): unknown => ({ worker_id: u64Out(w.worker_id), dp_rank: w.dp_rank });

// ---------------------------------------------------------------------------------------------------
// §5.4 ActiveSequenceEvent

function prefillHint(v: unknown, path: string): PrefillLoadHint | null {
  if (v === null || v === undefined) return null;
  const o = obj(v, path);
  let d: PrefillLoadHint['expected_prefill_duration'] = null;
  const dv = o.expected_prefill_duration;
  if (dv !== null && dv !== undefined) {
    const dp = join(path, 'expected_prefill_duration');
    const dur = obj(dv, dp);
    const nanos = u32(dur.nanos, join(dp, 'nanos'));
    if (nanos >= 1_000_000_000) fail(join(dp, 'nanos'), 'nanos below 1e9', nanos);
    d = { secs: count(dur.secs, join(dp, 'secs')), nanos };
  }
  return {
    initial_effective_prefill_tokens: count(
      o.initial_effective_prefill_tokens,
      join(path, 'initial_effective_prefill_tokens'),
    ),
    expected_prefill_duration: d,
  };
}

function activeSeqData(v: unknown, path: string, lim: ResolvedLimits): ActiveSequenceEventData {
  const tag = tagOf(v, path, ['Free', 'MarkPrefillCompleted'], ['AddRequest']);
  if (tag !== 'AddRequest') return tag as 'Free' | 'MarkPrefillCompleted';
  const bp = join(path, 'AddRequest');
  const b = obj((v as Record<string, unknown>).AddRequest, bp);
  let token_sequence: SequenceHash[] | null = null;
  if (b.token_sequence !== null && b.token_sequence !== undefined) {
    // A prompt's hash chain is bounded by the byte limit, not by maxBlocks (that limit is per KV event).
    token_sequence = hashList(
      b.token_sequence,
      join(bp, 'token_sequence'),
      { ...lim, maxBlocks: lim.maxBytes },
      false,
    ) as SequenceHash[];
  }
  const add: AddRequestData = {
    token_sequence,
    track_prefill_tokens:
      b.track_prefill_tokens === undefined || b.track_prefill_tokens === null
        ? true
        : bool(b.track_prefill_tokens, join(bp, 'track_prefill_tokens')),
    expected_output_tokens: u32OrNull(b.expected_output_tokens, join(bp, 'expected_output_tokens')),
    prefill_load_hint: prefillHint(b.prefill_load_hint, join(bp, 'prefill_load_hint')),
  };
  return { AddRequest: add };
}

export const ActiveSequenceEventCodec: Codec<ActiveSequenceEvent> = makeCodec<ActiveSequenceEvent>(
  'active_sequence_event',
  (v, path, lim) => {
    const o = obj(v, path);
    const ev: ActiveSequenceEvent = {
      request_id: str(o.request_id, join(path, 'request_id')),
      worker: workerWithDpRank(o.worker, join(path, 'worker')),
      data: activeSeqData(o.data, join(path, 'data'), lim),
      router_id: u64(o.router_id, join(path, 'router_id')) as RouterId,
    };
    if (o.lora_name !== undefined && o.lora_name !== null)
      ev.lora_name = str(o.lora_name, join(path, 'lora_name'));
    return ev;
  },
  (e) => {
    let data: unknown = e.data;
    if (typeof e.data === 'object') {
      const a = e.data.AddRequest;
      data = {
        AddRequest: {
          token_sequence: a.token_sequence === null ? null : a.token_sequence.map(u64Out),
          track_prefill_tokens: a.track_prefill_tokens,
          expected_output_tokens: a.expected_output_tokens,
          prefill_load_hint: a.prefill_load_hint,
        },
      };
    }
    return {
      request_id: e.request_id,
      worker: workerOut(e.worker),
      data,
      router_id: u64Out(e.router_id),
      lora_name: e.lora_name,
    };
  },
);

// ---------------------------------------------------------------------------------------------------
// §5.5 ActiveLoad

export const ActiveLoadCodec: Codec<ActiveLoad> = makeCodec<ActiveLoad>(
  'active_load',
  (v, path) => {
    const o = obj(v, path);
    return {
      worker_id: u64(o.worker_id, join(path, 'worker_id')) as WorkerId,
      dp_rank: o.dp_rank === undefined || o.dp_rank === null ? 0 : u32(o.dp_rank, join(path, 'dp_rank')),
      active_decode_blocks: countOrNull(o.active_decode_blocks, join(path, 'active_decode_blocks')),
      active_prefill_tokens: countOrNull(o.active_prefill_tokens, join(path, 'active_prefill_tokens')),
      kv_used_blocks: countOrNull(o.kv_used_blocks, join(path, 'kv_used_blocks')),
    };
  },
  (l) => ({
    worker_id: u64Out(l.worker_id),
    dp_rank: l.dp_rank,
    active_decode_blocks: l.active_decode_blocks,
    active_prefill_tokens: l.active_prefill_tokens,
    kv_used_blocks: l.kv_used_blocks,
  }),
);

// ---------------------------------------------------------------------------------------------------
// §3.5 Local indexer query

export const LocalIndexerQueryRequestCodec: Codec<LocalIndexerQueryRequest> =
  makeCodec<LocalIndexerQueryRequest>(
    'local_indexer_query',
    (v, path) => {
      const o = obj(v, path);
      return {
        worker_id: u64(o.worker_id, join(path, 'worker_id')) as WorkerId,
        start_event_id: u64OrNull(o.start_event_id, join(path, 'start_event_id')) as EventId | null,
        end_event_id: u64OrNull(o.end_event_id, join(path, 'end_event_id')) as EventId | null,
      };
    },
    (r) => ({
      worker_id: u64Out(r.worker_id),
      start_event_id: u64OutOrNull(r.start_event_id),
      end_event_id: u64OutOrNull(r.end_event_id),
    }),
  );

function eventList(v: unknown, path: string, lim: ResolvedLimits, signed: boolean): RouterEvent[] {
  const list = arr(v, path);
  const out = new Array<RouterEvent>(list.length);
  for (let i = 0; i < list.length; i++) out[i] = routerEventFrom(list[i], at(path, i), lim, signed);
  return out;
}

export const LocalIndexerQueryResponseCodec: Codec<LocalIndexerQueryResponse> =
  makeCodec<LocalIndexerQueryResponse>(
    'local_indexer_response',
    (v, path, lim, signed) => {
      const tag = tagOf(v, path, [], ['Events', 'TreeDump', 'TooNew', 'InvalidRange', 'Error']);
      const bp = join(path, tag);
      const body = (v as Record<string, unknown>)[tag];
      switch (tag) {
        case 'Error':
          return { Error: str(body, bp) };
        case 'TooNew': {
          const o = obj(body, bp);
          return {
            TooNew: {
              requested_start: u64OrNull(o.requested_start, join(bp, 'requested_start')) as EventId | null,
              requested_end: u64OrNull(o.requested_end, join(bp, 'requested_end')) as EventId | null,
              newest_available: u64(o.newest_available, join(bp, 'newest_available')) as EventId,
            },
          };
        }
        case 'InvalidRange': {
          const o = obj(body, bp);
          return {
            InvalidRange: {
              start_id: u64(o.start_id, join(bp, 'start_id')) as EventId,
              end_id: u64(o.end_id, join(bp, 'end_id')) as EventId,
            },
          };
        }
        default: {
          const o = obj(body, bp);
          const r = {
            events: eventList(o.events, join(bp, 'events'), lim, signed),
            last_event_id: u64(o.last_event_id, join(bp, 'last_event_id')) as EventId,
          };
          return tag === 'Events' ? { Events: r } : { TreeDump: r };
        }
      }
    },
    (r) => {
      if ('Events' in r)
        return {
          Events: {
            events: r.Events.events.map(routerEventTo),
            last_event_id: u64Out(r.Events.last_event_id),
          },
        };
      if ('TreeDump' in r)
        return {
          TreeDump: {
            events: r.TreeDump.events.map(routerEventTo),
            last_event_id: u64Out(r.TreeDump.last_event_id),
          },
        };
      if ('TooNew' in r)
        return {
          TooNew: {
            requested_start: u64OutOrNull(r.TooNew.requested_start),
            requested_end: u64OutOrNull(r.TooNew.requested_end),
            newest_available: u64Out(r.TooNew.newest_available),
          },
        };
      if ('InvalidRange' in r)
        return {
          InvalidRange: { start_id: u64Out(r.InvalidRange.start_id), end_id: u64Out(r.InvalidRange.end_id) },
        };
      return { Error: r.Error };
    },
  );

// ---------------------------------------------------------------------------------------------------
// §7.1 WireOverlapScores and §7.7 remote indexer

function workerPairs(
  v: unknown,
  path: string,
  value: (x: unknown, p: string) => number,
): Array<[WorkerWithDpRank, number]> {
  const list = arr(v, path);
  const out = new Array<[WorkerWithDpRank, number]>(list.length);
  for (let i = 0; i < list.length; i++) {
    const p = at(path, i);
    const pair = arr(list[i], p);
    if (pair.length !== 2) fail(p, '[worker, value] pair', pair);
    out[i] = [workerWithDpRank(pair[0], at(p, 0)), value(pair[1], at(p, 1))];
  }
  return out;
}

function overlapScoresFrom(v: unknown, path: string): WireOverlapScores {
  const o = obj(v, path);
  const fp = join(path, 'frequencies');
  const freqs = o.frequencies === undefined || o.frequencies === null ? [] : arr(o.frequencies, fp);
  return {
    scores: workerPairs(o.scores, join(path, 'scores'), u32),
    frequencies: freqs.map((f, i) => count(f, at(fp, i))),
    tree_sizes: workerPairs(o.tree_sizes, join(path, 'tree_sizes'), count),
  };
}

const overlapScoresTo = (s: WireOverlapScores): unknown => ({
  scores: s.scores.map(([w, n]) => [workerOut(w), n]),
  frequencies: s.frequencies,
  tree_sizes: s.tree_sizes.map(([w, n]) => [workerOut(w), n]),
});

export const WireOverlapScoresCodec: Codec<WireOverlapScores> = makeCodec<WireOverlapScores>(
  'overlap_scores',
  overlapScoresFrom,
  overlapScoresTo,
);

export const RemoteIndexerQueryCodec: Codec<RemoteIndexerQuery> = makeCodec<RemoteIndexerQuery>(
  'remote_indexer_query',
  (v, path, lim) => {
    const o = obj(v, path);
    return {
      model_name: str(o.model_name, join(path, 'model_name')),
      block_hashes: hashList(
        o.block_hashes,
        join(path, 'block_hashes'),
        { ...lim, maxBlocks: lim.maxBytes },
        false,
      ) as LocalBlockHash[],
    };
  },
  (q) => ({ model_name: q.model_name, block_hashes: q.block_hashes.map(u64Out) }),
);

export const RemoteIndexerQueryResponseCodec: Codec<RemoteIndexerQueryResponse> =
  makeCodec<RemoteIndexerQueryResponse>(
    'remote_indexer_response',
    (v, path) => {
      const tag = tagOf(v, path, [], ['Scores', 'Error']);
      const body = (v as Record<string, unknown>)[tag];
      return tag === 'Error'
        ? { Error: str(body, join(path, 'Error')) }
        : { Scores: overlapScoresFrom(body, join(path, 'Scores')) };
    },
    (r) => ('Error' in r ? { Error: r.Error } : { Scores: overlapScoresTo(r.Scores) }),
  );

export const RemoteIndexerRecordRequestCodec: Codec<RemoteIndexerRecordRequest> =
  makeCodec<RemoteIndexerRecordRequest>(
    'remote_indexer_record',
    (v, path, lim) => {
      const o = obj(v, path);
      const big = { ...lim, maxBlocks: lim.maxBytes };
      const r: RemoteIndexerRecordRequest = {
        model_name: str(o.model_name, join(path, 'model_name')),
        worker: workerWithDpRank(o.worker, join(path, 'worker')),
        local_hashes: hashList(o.local_hashes, join(path, 'local_hashes'), big, false) as LocalBlockHash[],
        sequence_hashes: hashList(
          o.sequence_hashes,
          join(path, 'sequence_hashes'),
          big,
          false,
        ) as SequenceHash[],
      };
      if (r.local_hashes.length !== r.sequence_hashes.length)
        fail(
          join(path, 'sequence_hashes'),
          `${r.local_hashes.length} hashes (one per local hash)`,
          o.sequence_hashes,
        );
      return r;
    },
    (r) => ({
      model_name: r.model_name,
      worker: workerOut(r.worker),
      local_hashes: r.local_hashes.map(u64Out),
      sequence_hashes: r.sequence_hashes.map(u64Out),
    }),
  );

export const RemoteIndexerRecordResponseCodec: Codec<RemoteIndexerRecordResponse> =
  makeCodec<RemoteIndexerRecordResponse>(
    'remote_indexer_record_response',
    (v, path) => {
      const tag = tagOf(v, path, ['Recorded'], ['Error']);
      return tag === 'Recorded'
        ? 'Recorded'
        : { Error: str((v as Record<string, unknown>).Error, join(path, 'Error')) };
    },
    (r) => r,
  );
