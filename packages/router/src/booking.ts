/**
 * Booking: the only place that changes the load model for this router's own requests (§9.2) and
 * the set of live requests (§8.8 in-flight counts). `book` runs synchronously right after the
 * gate's verdict; every booking ends through exactly one of `free`, expiry, or `forget` (its
 * worker or rank left).
 */
import {
  DEFAULT_DECODE_PRESSURE,
  DEFAULT_TTFT_DECODE_STEP,
  decodePressure,
  decodeStepMs,
  type MultiWorkerSequences,
  type PrefillRate,
} from '@kvrouter/core-cost';
import { pairsToU64s, type SequenceHash, type WorkerWithDpRank, invalidArgument } from '@kvrouter/protocols';
import type { Pending } from './intent.js';
import type { ResolvedOptions } from './options.js';
import type { OverlapSource } from './overlap.js';
import type { ReplicaSync } from './replica.js';
import type { RankEntry, WorkerEntry } from './workers.js';

/** A request the router has decided and not yet seen freed. */
interface Live {
  worker: WorkerWithDpRank;
  /** Entry of the worker set at decision time (in-flight count), if the worker was known. */
  entry: WorkerEntry | undefined;
  /** Load booked in the active-sequence tracker. */
  booked: boolean;
  /** `close` action: send `close_session` to this worker once the request ends. */
  closeSession: { sessionId: string; worker: WorkerWithDpRank } | null;
  /** ttft policy: the rank's rate learner, the booked prefill tokens and when (null: not learning). */
  rate: PrefillRate | null;
  prefillTokens: number;
  bookedAt: number;
}

export interface BookingContext {
  readonly o: ResolvedOptions;
  readonly seqs: MultiWorkerSequences;
  readonly overlap: OverlapSource;
  readonly replica: ReplicaSync;
  /** Something is tracked: the maintenance tick (expiry backstop) must run. */
  armMaintenance(): void;
  sendClose(sessionId: string, worker: WorkerWithDpRank): void;
  /** ttft policy: the rate learner of a rank (`AdmissionGate.rateOf`); absent = no learning. */
  rateOf?(r: RankEntry): PrefillRate;
}

export class Bookings {
  private readonly live = new Map<string, Live>();

  constructor(private readonly c: BookingContext) {}

  get size(): number {
    return this.live.size;
  }

  has(requestId: string): boolean {
    return this.live.has(requestId);
  }

  /** Request ids of the live bookings (replica reconciliation lists them). */
  ids(): IterableIterator<string> {
    return this.live.keys();
  }

  /**
   * kv mode: AddRequest on the chosen rank (§9.2) with its replica-sync event (§5.4), the live
   * entry, the in-flight count, and what the approximate / side indexes learn (§7.5, §7.6).
   * Returns whether load was booked (false for a duplicate in the tracker).
   */
  book(p: Pending, r: RankEntry, cachedTokens: number, now: number): boolean {
    const c = this.c;
    const it = p.intent;
    const params = it.params;
    let expectedMs: number | null = null;
    const predictor = c.o.predictor;
    if (predictor && params.trackPrefillTokens) {
      expectedMs = predictor({ worker: r.worker, isl: it.isl, prefixTokens: Math.min(cachedTokens, it.isl) });
      if (expectedMs !== null && !(expectedMs >= 0 && Number.isFinite(expectedMs)))
        throw invalidArgument(
          'prefillDurationPredictor',
          'must return a finite number >= 0 or null',
          expectedMs,
        );
    }
    const booked = c.seqs.addRequest(
      r.worker,
      {
        requestId: it.id,
        isl: it.isl,
        seqHashes: p.prompt.seq,
        cachedTokens,
        expectedOutputTokens: it.osl,
        expectedPrefillDurationMs: expectedMs,
        assumeKvReuse: params.assumeKvReuse,
        trackPrefillTokens: params.trackPrefillTokens,
      },
      now,
    );
    if (booked && c.replica.publishing) {
      let tokenSeq: SequenceHash[] | null = null;
      if (params.trackActiveBlocks) {
        const held = c.seqs.rank(r.worker)?.requestBlocks(it.id);
        tokenSeq = held ? (pairsToU64s(held) as SequenceHash[]) : null;
      }
      c.replica.publishAdd({
        requestId: it.id,
        worker: r.worker,
        loraName: it.loraName,
        tokenSequence: tokenSeq,
        trackPrefillTokens: params.trackPrefillTokens,
        expectedOutputTokens: it.osl,
        prefill: params.trackPrefillTokens ? it.isl - Math.min(cachedTokens, it.isl) : 0,
        expectedPrefillMs: expectedMs,
      });
    }
    const learn = booked && params.policy === 'ttft' && params.trackPrefillTokens && c.rateOf !== undefined;
    // ttft policy: the rank's recent cache inflow (its tie break) grows by what this request computes.
    if (booked && params.policy === 'ttft' && c.rateOf !== undefined)
      c.rateOf(r).booked(it.isl - Math.min(cachedTokens, it.isl), now);
    this.live.set(it.id, {
      worker: r.worker,
      entry: r.owner,
      booked,
      closeSession: null,
      rate: learn ? c.rateOf!(r) : null,
      prefillTokens: it.isl - Math.min(cachedTokens, it.isl),
      bookedAt: now,
    });
    r.owner.inflight++;
    c.armMaintenance();
    c.overlap.record(r.worker, p);
    return booked;
  }

  /** Non-kv modes and pins to unknown workers: a live entry (and in-flight count) without load. */
  bookUnloaded(requestId: string, worker: WorkerWithDpRank, entry: WorkerEntry | undefined): void {
    this.live.set(requestId, {
      worker,
      entry,
      booked: false,
      closeSession: null,
      rate: null,
      prefillTokens: 0,
      bookedAt: 0,
    });
    if (entry) entry.inflight++;
  }

  closeOnEnd(requestId: string, close: { sessionId: string; worker: WorkerWithDpRank }): void {
    const e = this.live.get(requestId);
    if (e) e.closeSession = close;
  }

  /** First token (§9.2 step 2). False if the request holds no booking. */
  markPrefillCompleted(requestId: string): boolean {
    const e = this.live.get(requestId);
    if (!e?.booked) return false;
    const now = this.c.o.clock.now();
    if (e.rate !== null) {
      // Bare prefill speed: the observed one times the decode pressure at this moment.
      const pressure = decodePressure(
        this.c.o.params.ttftDecodePressure ?? DEFAULT_DECODE_PRESSURE,
        this.c.seqs.rank(e.worker)?.activeDecodeBlocks ?? 0,
        e.entry?.totalKvBlocks ?? 0,
      );
      const seq = this.c.seqs.rank(e.worker);
      const cap = e.entry?.totalKvBlocks ?? 0;
      const scale = this.c.o.params.ttftDecodeStep ?? DEFAULT_TTFT_DECODE_STEP;
      // Other requests running beside this one: its passes carried their decode step.
      const step =
        scale > 0 && cap > 0 && (seq?.activeRequests ?? 0) > 1
          ? scale * decodeStepMs((seq?.activeDecodeBlocks ?? 0) / cap)
          : 0;
      e.rate.observe(e.prefillTokens, e.bookedAt, now, pressure, step);
      e.rate = null;
    }
    const ok = this.c.seqs.markPrefillCompleted(requestId, now);
    if (ok) this.c.replica.publish(requestId, e.worker, 'MarkPrefillCompleted');
    return ok;
  }

  onOutputTokens(requestId: string, outputTokens: number): boolean {
    const e = this.live.get(requestId);
    if (!e?.booked) return false;
    return this.c.seqs.addOutputTokens(requestId, outputTokens, this.c.o.clock.now());
  }

  /** End of a decided request (§9.2 step 3); false when not (or no longer) live. */
  free(requestId: string): boolean {
    const e = this.live.get(requestId);
    if (!e) return false;
    this.live.delete(requestId);
    if (e.entry) e.entry.inflight--;
    if (e.booked && this.c.seqs.free(requestId, this.c.o.clock.now()))
      this.c.replica.publish(requestId, e.worker, 'Free');
    if (e.closeSession) this.c.sendClose(e.closeSession.sessionId, e.closeSession.worker);
    return true;
  }

  /** The tracker expired the request (§9.2): nothing is published (every replica expires on its own). */
  expired(requestId: string): void {
    const e = this.live.get(requestId);
    if (!e) return;
    this.live.delete(requestId);
    if (e.entry) e.entry.inflight--;
    if (e.closeSession) this.c.sendClose(e.closeSession.sessionId, e.closeSession.worker);
  }

  /** Bookings dropped with their worker or rank: the dispatcher's later free is then a no-op. */
  forget(requestId: string): void {
    this.live.delete(requestId);
  }
}
