import { resolveConfig } from '@kvrouter/config';
import {
  computeLocalBlockHashes,
  computeSequenceHashes,
  type RouterEvent,
  type WorkerId,
} from '@kvrouter/protocols';
import type { CandidateTerms, DecisionExplanation } from '@kvrouter/router';
import { describe, expect, it } from 'vitest';
import { GAP_CAUSES, GapTracker } from './gap.js';
import { kvRouterPolicy } from './policy.js';
import { buildReport } from './report.js';
import { runSimulation } from './simulation.js';
import type { TraceRow } from './trace.js';

const BS = 4;
const tokens = (n: number, f = 1) => Uint32Array.from({ length: n }, (_, i) => f * 1000 + i);
const seqOf = (t: Uint32Array) => computeSequenceHashes(computeLocalBlockHashes(t, BS));
const hashes = (t: Uint32Array, n: number): bigint[] => {
  const s = seqOf(t);
  const out: bigint[] = [];
  for (let i = 0; i < n; i++) out.push(BigInt(s[2 * i]!) | (BigInt(s[2 * i + 1]!) << 32n));
  return out;
};
const stored = (h: bigint[]): RouterEvent =>
  ({
    worker_id: 1n,
    storage_tier: 'device',
    event: {
      event_id: 1n,
      dp_rank: 0,
      data: {
        stored: {
          parent_hash: null,
          start_position: null,
          blocks: h.map((b) => ({ block_hash: b, tokens_hash: 0n, mm_extra_info: null })),
        },
      },
    },
  }) as unknown as RouterEvent;
const removed = (h: bigint[]): RouterEvent =>
  ({
    worker_id: 1n,
    storage_tier: 'device',
    event: { event_id: 2n, dp_rank: 0, data: { removed: { block_hashes: h } } },
  }) as unknown as RouterEvent;

const terms = (worker: number, t: Partial<CandidateTerms>): CandidateTerms =>
  ({
    worker_id: BigInt(worker) as WorkerId,
    dp_rank: 0,
    device_blocks: 0,
    cached_tokens: 0,
    active_prefill_tokens: 0,
    decode: 0,
    additional: 0,
    active_request_term: 0,
    cost: 0,
    ...t,
  }) as CandidateTerms;
const explain = (
  chosen: CandidateTerms,
  candidates: CandidateTerms[],
  e: Partial<DecisionExplanation> = {},
) =>
  ({
    mode: 'kv',
    temperature: 0,
    busyFiltered: 0,
    queuedMs: 0,
    chosen,
    candidates,
    ...e,
  }) as DecisionExplanation;

describe('GapTracker (engine truth at the decision)', () => {
  // Units 0, 1, 2 = workers 1, 2, 3. A 20-token prompt: 5 blocks of 4, at most floor(19/4) = 4 can hit.
  const P = tokens(20);
  const mk = () => new GapTracker(3, 4, (w) => Number(w) - 1, BS);

  it('measures held prefixes, evicted blocks and duplicated share from the events', () => {
    const g = mk();
    g.onEvents(0, [stored(hashes(P, 3))]); // unit 0 holds 3 blocks
    g.onEvents(1, [stored(hashes(P, 2))]); // unit 1 holds 2 (both duplicated on unit 0)
    g.sample(); // 5 held, 3 distinct → 2/5 duplicated
    // Chosen unit 1 (2 blocks) while unit 0 held 3: one block routed away; the holder cost more
    // by its queued prefill (8 tokens = 2 blocks) against 1 more decode block.
    const a = terms(2, { cached_tokens: 8, cost: 10, decode: 1 });
    const b = terms(1, { cached_tokens: 12, cost: 11, active_prefill_tokens: 8, decode: 2 });
    g.decided(0, seqOf(P), 4, 1, explain(a, [a, b]));
    // Unit 0 loses its blocks 1..2 (removed); nobody holds block 2 any more, unit 1 still has 0..1.
    g.onEvents(0, [removed(hashes(P, 3).slice(1))]);
    g.sample(); // 3 held, 2 distinct → 1/3
    g.decided(1, seqOf(P), 4, 2, undefined); // round-robin to unit 2 (holds nothing)
    const r = g.result();
    expect([...r.bestHeld.subarray(0, 2)]).toEqual([3, 2]);
    expect([...r.chosenHeld.subarray(0, 2)]).toEqual([2, 0]);
    expect([...r.seen.subarray(0, 2)]).toEqual([3, 3]);
    expect(GAP_CAUSES[r.cause[0]! - 1]).toBe('prefill_load');
    expect(GAP_CAUSES[r.cause[1]! - 1]).toBe('not_cache_aware');
    expect(r.duplicateShare).toBeCloseTo((2 / 5 + 1 / 3) / 2, 12);
  });

  it('names busy filter, queue, temperature, index lag, tie and decode blocks', () => {
    const g = mk();
    g.onEvents(0, [stored(hashes(P, 4))]);
    const a = terms(2, { cached_tokens: 0, cost: 5 });
    const cause = (k: number, e: DecisionExplanation) => {
      g.decided(k, seqOf(P), 4, 1, e);
      return GAP_CAUSES[g.result().cause[k]! - 1];
    };
    expect(cause(0, explain(a, [a], { busyFiltered: 1 }))).toBe('busy_filter');
    expect(cause(1, explain(a, [a, terms(1, { cached_tokens: 16 })], { queuedMs: 3 }))).toBe('queue');
    const b = terms(1, { cached_tokens: 16, cost: 4 });
    expect(cause(2, explain(a, [a, b], { temperature: 0.5 }))).toBe('temperature');
    expect(cause(3, explain(a, [a, terms(1, { cached_tokens: 0, cost: 9 })]))).toBe('index_lag');
    // Only two causes fit in four request slots: reuse slots (the cause column is per request).
    const g2 = mk();
    g2.onEvents(0, [stored(hashes(P, 4))]);
    g2.decided(0, seqOf(P), 4, 1, explain(a, [a, terms(1, { cached_tokens: 16, cost: 5 })]));
    g2.decided(
      1,
      seqOf(P),
      4,
      1,
      explain(a, [a, terms(1, { cached_tokens: 16, cost: 9, decode: 4, additional: 0 })]),
    );
    expect(GAP_CAUSES[g2.result().cause[0]! - 1]).toBe('tie');
    expect(GAP_CAUSES[g2.result().cause[1]! - 1]).toBe('decode_blocks');
  });
});

describe('the oracle gap in a report', () => {
  it('round-robin sends a repeat away from the worker that cached it: the lost tokens are not_cache_aware', async () => {
    // Two identical 256-token prompts (engine blocks of 64): the first finishes on worker 1 and
    // stores 4 blocks; the repeat goes to worker 2 (round-robin), where 3 blocks (floor(255/64))
    // would have hit: 192 tokens routed away.
    const rows: TraceRow[] = [0, 10_000].map((ts, index) => ({
      timestamp: ts,
      input_length: 256,
      output_length: 2,
      hash_ids: [1, 2, 3, 4],
      index,
    }));
    const cfg = resolveConfig('router', ['--router-mode', 'round-robin'], {}).config;
    const res = await runSimulation(rows, { numWorkers: 2, traceBlockSize: 64 }, kvRouterPolicy(cfg));
    const g = buildReport(res, null).oracle_gap!;
    expect(g.routed_away_tokens).toBe(192);
    expect(g.routed_away_requests).toBe(1);
    expect(g.routed_away_by_cause.not_cache_aware).toBe(192);
    expect(g.evicted_tokens).toBe(0);
    // Sampled at the two arrivals: nothing cached, then 4 blocks on one worker only.
    expect(g.duplicate_share).toBe(0);
  });
});
