/**
 * Explanation, decision log and overhead (§16): the decision object and its explanation, the
 * sampled JSON decision log, and the per-phase timings. Reads the gate's scratch; changes nothing
 * but what it emits.
 */
import type { CandidateBatch, CostBreakdown } from '@kvrouter/core-cost';
import { stringifyJson, type WorkerWithDpRank } from '@kvrouter/protocols';
import type { Admission } from './gate.js';
import type { Pending } from './intent.js';
import type { ResolvedOptions } from './options.js';
import type {
  CandidateTerms,
  DecisionExplanation,
  ReasonCode,
  RouterOverhead,
  RoutingDecision,
} from './types.js';

export class Explainer {
  constructor(
    private readonly o: ResolvedOptions,
    private readonly batch: CandidateBatch,
    private readonly out: CostBreakdown,
    private readonly report: (e: unknown, context: string) => void,
  ) {}

  /** A kv decision from the gate's verdict (after booking); logged when sampled. */
  kvDecision(p: Pending, v: Admission, booked: boolean, now: number): RoutingDecision {
    const explanation: DecisionExplanation = {
      reason: v.reason,
      mode: this.o.mode,
      temperature: p.intent.params.temperature,
      candidateCount: v.n,
      busyFiltered: v.busyFiltered,
      chosen: this.termsAt(v.idx),
      queuedMs: p.wait === null ? 0 : now - p.wait.queuedAt,
      overlapRefreshed: p.wait?.refreshed ?? false,
      costPolicy: p.intent.params.policy ?? 'dynamo',
    };
    const logged = this.sampled();
    if (p.intent.explain || logged) {
      const all: CandidateTerms[] = new Array<CandidateTerms>(v.n);
      for (let i = 0; i < v.n; i++) all[i] = this.termsAt(i);
      explanation.candidates = all;
    }
    const d = this.decision(
      p,
      v.chosen.worker,
      v.overlap,
      v.cached,
      this.out.requestBlocks,
      booked,
      explanation,
    );
    if (logged) this.log(d);
    return d;
  }

  /** A decision without scoring (non-kv modes, pins to unknown workers); logged when sampled. */
  simpleDecision(p: Pending, w: WorkerWithDpRank, reason: ReasonCode): RoutingDecision {
    const explanation: DecisionExplanation = {
      reason,
      mode: this.o.mode,
      temperature: 0,
      candidateCount: 1,
      busyFiltered: 0,
      chosen: null,
      queuedMs: 0,
      overlapRefreshed: false,
    };
    const requiredBlocks = Math.ceil(p.intent.isl / this.o.blockSize);
    const d = this.decision(p, w, 0, 0, requiredBlocks, false, explanation);
    if (this.sampled()) this.log(d);
    return d;
  }

  /** Overhead of one decision (ms); a parked request's total is the sum of its phases. */
  overhead(p: Pending, scheduling: number, end: number): void {
    const onOverhead = this.o.hooks.onOverhead;
    if (!onOverhead) return;
    const t = p.times;
    const o: RouterOverhead = {
      block_hashing: t.hash,
      seq_hashing: t.seq,
      indexer_find_matches: t.find,
      scheduling,
      // A parked request's wait is not routing overhead: its total is the sum of its phases.
      total: p.wait === null ? end - t.start : t.hash + t.seq + t.find + scheduling,
    };
    try {
      onOverhead(o);
    } catch (e) {
      this.report(e, 'onOverhead');
    }
  }

  private decision(
    p: Pending,
    worker: WorkerWithDpRank,
    overlapBlocks: number,
    cachedTokens: number,
    requiredBlocks: number,
    booked: boolean,
    explanation: DecisionExplanation,
  ): RoutingDecision {
    const it = p.intent;
    const d: RoutingDecision = {
      requestId: it.id,
      worker,
      workerId: worker.worker_id,
      dpRank: worker.dp_rank,
      overlapBlocks,
      cachedTokens,
      requiredBlocks,
      kvHitRate: requiredBlocks > 0 ? overlapBlocks / requiredBlocks : 0,
      booked,
      queryOnly: it.queryOnly,
      explanation,
    };
    if (it.queryOnly) d.tokenData = it.tokens;
    return d;
  }

  private termsAt(i: number): CandidateTerms {
    const b = this.batch;
    const o = this.out;
    const w = b.workers[i];
    return {
      worker_id: w.worker_id,
      dp_rank: w.dp_rank,
      device_blocks: b.deviceBlocks[i],
      effective_overlap: o.effectiveOverlap[i],
      cached_tokens: o.cachedTokens[i],
      active_prefill_tokens: b.activePrefillTokens[i],
      active_decode_blocks: b.activeDecodeBlocks[i],
      active_requests: b.activeRequests[i],
      active_prefix_depth: b.activePrefixDepth[i],
      raw_prefill: o.rawPrefill[i],
      decay: o.decay[i],
      credit_blocks: o.creditBlocks[i],
      prefill_term: o.prefillTerm[i],
      decode: o.decode[i],
      additional: o.additional[i],
      active_request_term: o.activeRequestTerm[i],
      logit: o.logit[i],
      taint_multiplier: o.taintMultiplier[i],
      cost: o.cost[i],
    };
  }

  private sampled(): boolean {
    const log = this.o.ports.decisionLog;
    return log != null && log.sampleRate > 0 && (log.random ?? this.o.random)() < log.sampleRate;
  }

  private log(d: RoutingDecision): void {
    const e = d.explanation;
    try {
      this.o.ports.decisionLog!.sink(
        stringifyJson({
          ts: this.o.clock.now(),
          router_id: this.o.routerId,
          request_id: d.requestId,
          mode: e.mode,
          reason: e.reason,
          worker_id: d.workerId,
          dp_rank: d.dpRank,
          block_size: this.o.blockSize,
          required_blocks: d.requiredBlocks,
          overlap_blocks: d.overlapBlocks,
          cached_tokens: d.cachedTokens,
          kv_hit_rate: d.kvHitRate,
          query_only: d.queryOnly,
          temperature: e.temperature,
          busy_filtered: e.busyFiltered,
          queued_ms: e.queuedMs,
          overlap_refreshed: e.overlapRefreshed,
          candidates: e.candidates ?? [],
        }),
      );
    } catch (err) {
      this.report(err, 'decision log');
    }
  }
}
