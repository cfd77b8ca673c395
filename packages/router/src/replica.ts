/**
 * Replica sync (§5.4): this router's booking events out (`publishActiveSequenceEvent`) and other
 * routers' events applied to the load model. Events are checked whole before the tracker changes.
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
  constructor(private readonly c: ReplicaContext) {}

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
    if (data === 'Free') changed = seqs.free(ev.request_id, now);
    else if (data === 'MarkPrefillCompleted') changed = seqs.markPrefillCompleted(ev.request_id, now);
    else if (data && typeof data === 'object' && 'AddRequest' in data) {
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
      if (changed) c.armMaintenance();
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
