/**
 * Replica sync (§5.4): this router's booking events out (`publishActiveSequenceEvent`) and other
 * routers' events applied to the load model. Events are checked whole before the tracker changes.
 *
 * Reconciliation (issue 18, a kvrouter addition beside the §5.4 events): a `Free` lost on the event
 * plane (a NATS restart, a dropped connection) would leave a peer's booking in this tracker until
 * the request expiry. So each router tells its peers every few seconds which of its requests are
 * still live (`liveList`); a peer booking that is not on its router's latest list, and was booked
 * before the list could have included it, is freed (`applyLive`). A router whose lists stop
 * (crashed, or cut off) has its bookings freed once its lists are `silentMs` late; routers that
 * never sent a list (e.g. Dynamo's) are left to the expiry as before.
 */
import type { MultiWorkerSequences } from '@kvrouter/core-cost';
import {
  invalidArgument,
  type ActiveSequenceEvent,
  type RouterId,
  type SequenceHash,
  type WorkerWithDpRank,
} from '@kvrouter/protocols';
import { EMPTY } from './intent.js';
import type { ResolvedOptions } from './options.js';

export interface ReplicaContext {
  readonly o: ResolvedOptions;
  readonly seqs: MultiWorkerSequences;
  report(e: unknown, context: string): void;
  /** A request id this router itself has decided (never touched by other routers' events). */
  owns(requestId: string): boolean;
  armMaintenance(): void;
  /** The tracker changed: parked requests may go now. */
  drain(): void;
  /** Request ids this router decided and has not seen freed. */
  ownIds(): Iterable<string>;
  /** A worker this router routes to (a booking on any other would resurrect a removed worker's load). */
  knowsWorker(workerId: bigint): boolean;
}

/** What a router says of itself in reconciliation: its request ids still live. */
export interface ReplicaLiveList {
  router_id: bigint;
  request_ids: string[];
}

/** A peer booking younger than this is kept even when absent from its router's list (the list may predate it). */
const LIVE_GRACE_MS = 1000;

interface Peer {
  /** Request id -> when this router booked it (ms). */
  readonly bookings: Map<string, number>;
  /** When its last list arrived (null: never sent one). */
  lastListAt: number | null;
}

/** What an own booking publishes (§5.4 `AddRequest`). */
export interface AddRequestFacts {
  requestId: string;
  worker: WorkerWithDpRank;
  loraName: string | undefined;
  tokenSequence: SequenceHash[] | null;
  trackPrefillTokens: boolean;
  expectedOutputTokens: number | null;
  /** Effective prefill tokens (isl − cached); 0 = no hint. */
  prefill: number;
  expectedPrefillMs: number | null;
}

export class ReplicaSync {
  private readonly peers = new Map<bigint, Peer>();

  constructor(private readonly c: ReplicaContext) {}

  private peer(routerId: bigint): Peer {
    let p = this.peers.get(routerId);
    if (!p) this.peers.set(routerId, (p = { bookings: new Map(), lastListAt: null }));
    return p;
  }

  /** This router's list for its peers (null without a router id). */
  liveList(): ReplicaLiveList | null {
    const id = this.c.o.routerId;
    return id === null ? null : { router_id: id, request_ids: [...this.c.ownIds()] };
  }

  /**
   * A peer's list: its bookings here that are not on it (and older than `LIVE_GRACE_MS`) are freed.
   * Returns how many were freed.
   */
  applyLive(list: ReplicaLiveList): number {
    if (!list || typeof list.router_id !== 'bigint')
      throw invalidArgument('router_id', 'must be a u64 bigint');
    if (!Array.isArray(list.request_ids) || list.request_ids.some((r) => typeof r !== 'string'))
      throw invalidArgument('request_ids', 'must be an array of strings');
    if (list.router_id === this.c.o.routerId) return 0;
    const now = this.c.o.clock.now();
    const p = this.peer(list.router_id);
    p.lastListAt = now;
    const live = new Set(list.request_ids);
    let freed = 0;
    for (const [id, at] of p.bookings) {
      if (live.has(id) || now - at < LIVE_GRACE_MS) continue;
      p.bookings.delete(id);
      if (!this.c.owns(id) && this.c.seqs.free(id, now)) freed++;
    }
    if (freed > 0) this.c.drain();
    return freed;
  }

  /**
   * Frees the bookings of peers whose lists stopped `silentMs` ago (and forgets peers with nothing
   * booked). Returns how many bookings were freed.
   */
  expireSilent(silentMs: number): number {
    const now = this.c.o.clock.now();
    let freed = 0;
    for (const [rid, p] of this.peers) {
      for (const id of p.bookings.keys()) if (!this.c.seqs.has(id)) p.bookings.delete(id);
      if (p.lastListAt !== null && now - p.lastListAt > silentMs) {
        for (const id of p.bookings.keys()) if (!this.c.owns(id) && this.c.seqs.free(id, now)) freed++;
        p.bookings.clear();
      }
      if (p.bookings.size === 0 && (p.lastListAt === null || now - p.lastListAt > silentMs))
        this.peers.delete(rid);
    }
    if (freed > 0) this.c.drain();
    return freed;
  }

  /** Peer bookings tracked for reconciliation (tests, diagnostics). */
  get peerBookings(): number {
    let n = 0;
    for (const p of this.peers.values()) n += p.bookings.size;
    return n;
  }

  /** Replica sync is on (a publisher is configured). */
  get publishing(): boolean {
    return !!this.c.o.ports.publishActiveSequenceEvent;
  }

  publish(requestId: string, worker: WorkerWithDpRank, data: 'Free' | 'MarkPrefillCompleted'): void {
    this.send({ request_id: requestId, worker, router_id: this.c.o.routerId as RouterId, data });
  }

  publishAdd(f: AddRequestFacts): void {
    const ms = f.expectedPrefillMs;
    this.send({
      request_id: f.requestId,
      worker: f.worker,
      router_id: this.c.o.routerId as RouterId,
      ...(f.loraName ? { lora_name: f.loraName } : {}),
      data: {
        AddRequest: {
          token_sequence: f.tokenSequence,
          track_prefill_tokens: f.trackPrefillTokens,
          expected_output_tokens: f.expectedOutputTokens,
          prefill_load_hint:
            f.prefill > 0
              ? {
                  initial_effective_prefill_tokens: f.prefill,
                  expected_prefill_duration:
                    ms === null
                      ? null
                      : { secs: Math.floor(ms / 1000), nanos: Math.round((ms % 1000) * 1e6) },
                }
              : null,
        },
      },
    });
  }

  private send(ev: ActiveSequenceEvent): void {
    const pub = this.c.o.ports.publishActiveSequenceEvent;
    if (!pub) return;
    try {
      pub(ev);
    } catch (e) {
      this.c.report(e, 'publishActiveSequenceEvent');
    }
  }

  /** Applies another router's booking event; own events (same router_id) are ignored. True if state changed. */
  apply(ev: ActiveSequenceEvent): boolean {
    if (!ev || typeof ev !== 'object') throw invalidArgument('event', 'must be an object');
    if (typeof ev.router_id !== 'bigint') throw invalidArgument('router_id', 'must be a u64 bigint');
    if (typeof ev.request_id !== 'string' || ev.request_id.length === 0)
      throw invalidArgument('request_id', 'must be a non-empty string');
    const w = ev.worker;
    if (!w || typeof w.worker_id !== 'bigint' || !Number.isSafeInteger(w.dp_rank) || w.dp_rank < 0)
      throw invalidArgument('worker', 'must be {worker_id: u64, dp_rank: u32}');
    const c = this.c;
    const routerId = c.o.routerId;
    if (c.o.mode !== 'kv' || (routerId !== null && ev.router_id === routerId)) return false;
    // A request id this router owns is never touched by another router's events.
    if (c.owns(ev.request_id)) return false;
    const now = c.o.clock.now();
    const seqs = c.seqs;
    let changed: boolean;
    const data = ev.data;
    if (data === 'Free') {
      changed = seqs.free(ev.request_id, now);
      this.peers.get(ev.router_id)?.bookings.delete(ev.request_id);
    } else if (data === 'MarkPrefillCompleted') changed = seqs.markPrefillCompleted(ev.request_id, now);
    else if (data && typeof data === 'object' && 'AddRequest' in data) {
      // A peer's booking on a worker this router removed (dead, or not yet known) is not load here.
      if (!c.knowsWorker(w.worker_id)) return false;
      const a = data.AddRequest;
      const hint = a.prefill_load_hint;
      const prefill = hint ? hint.initial_effective_prefill_tokens : 0;
      if (!Number.isSafeInteger(prefill) || prefill < 0)
        throw invalidArgument(
          'prefill_load_hint.initial_effective_prefill_tokens',
          'must be an integer >= 0',
          prefill,
        );
      const dur = hint?.expected_prefill_duration;
      const seq = a.token_sequence ? u64sToPairsChecked(a.token_sequence) : EMPTY;
      changed = seqs.addRequest(
        w,
        {
          requestId: ev.request_id,
          // Only the effective prefill travels; isl = that with nothing cached reproduces it.
          isl: prefill,
          cachedTokens: 0,
          seqHashes: seq,
          assumeKvReuse: true,
          trackPrefillTokens: a.track_prefill_tokens !== false && prefill > 0,
          expectedOutputTokens: a.expected_output_tokens ?? null,
          expectedPrefillDurationMs: dur ? dur.secs * 1000 + dur.nanos / 1e6 : null,
        },
        now,
      );
      if (changed) {
        this.peer(ev.router_id).bookings.set(ev.request_id, now);
        c.armMaintenance();
      }
    } else throw invalidArgument('data', 'must be AddRequest, Free or MarkPrefillCompleted');
    if (changed) c.drain();
    return changed;
  }
}

function u64sToPairsChecked(v: readonly bigint[]): Uint32Array {
  if (!Array.isArray(v)) throw invalidArgument('token_sequence', 'must be an array of u64');
  const out = new Uint32Array(2 * v.length);
  for (let i = 0; i < v.length; i++) {
    const x: unknown = v[i];
    if (typeof x !== 'bigint' || x < 0n || x > 0xffffffffffffffffn)
      throw invalidArgument(`token_sequence[${i}]`, 'must be a u64 bigint');
    out[2 * i] = Number(x & 0xffffffffn);
    out[2 * i + 1] = Number(x >> 32n);
  }
  return out;
}
