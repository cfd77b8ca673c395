/**
 * Why a run falls short of the cache oracle (issue 19 "see why"). The loop mirrors every engine's
 * device cache from its KV events (applied at pass end, no delay: engine truth, not the router's
 * view) and, at each routing decision, measures the prompt's cached prefix on every worker:
 *
 * - **routed away**: a worker held a longer prefix than the chosen one; the difference is lost,
 *   attributed to what outweighed the overlap (from the router's explanation of the decision):
 *   `prefill_load`, `decode_blocks` (active blocks and the request's new blocks), `active_requests`
 *   (`--router-decode-active-request-weight`), `busy_filter` (the holder was filtered as busy),
 *   `queue` (the request waited in the router queue), `temperature` (softmax picked a costlier
 *   worker), `index_lag` (the router's index did not show the holder's longer prefix yet), `tie`,
 *   `not_cache_aware` (a mode without overlap);
 * - **evicted before reuse**: blocks of the prompt some worker computed earlier but no worker holds
 *   any more;
 * - **duplicated prefixes**: the share of cached blocks held by more than one worker (sampled at
 *   every arrival), capacity that could have held other prefixes.
 *
 * Keys are 53-bit numbers of the 64-bit sequence hashes (as the oracle's).
 */
import type { RouterEvent } from '@kvrouter/protocols';
import type { CandidateTerms, DecisionExplanation } from '@kvrouter/router';

export const GAP_CAUSES = [
  'prefill_load',
  'decode_blocks',
  'active_requests',
  'busy_filter',
  'queue',
  'temperature',
  'index_lag',
  'tie',
  'not_cache_aware',
] as const;
export type GapCause = (typeof GAP_CAUSES)[number];

/** Per-request columns (blocks), NaN-free: 0 when not measured. */
export interface GapColumns {
  /** Longest cached prefix of the prompt on any worker at the decision. */
  bestHeld: Int32Array;
  /** Cached prefix on the chosen worker at the decision. */
  chosenHeld: Int32Array;
  /** Longest prefix some worker had computed before (held now or evicted). */
  seen: Int32Array;
  /** Index into GAP_CAUSES + 1 when routed away (0 = not routed away). */
  cause: Uint8Array;
  /** Mean share of cached blocks held by more than one worker, over arrivals. */
  duplicateShare: number;
}

const MASK_HI = 0x1fffff;
const keyOf = (lo: number, hi: number): number => (hi & MASK_HI) * 4294967296 + lo;
const keyOfBig = (h: bigint): number => Number(h & 0x1fffffffffffffn);

export class GapTracker {
  private readonly held: Set<number>[];
  /** Workers holding each block. */
  private readonly holders = new Map<number, number>();
  private readonly everSeen = new Set<number>();
  private total = 0;
  private dupSum = 0;
  private dupSamples = 0;
  readonly cols: Omit<GapColumns, 'duplicateShare'>;

  constructor(
    units: number,
    n: number,
    private readonly unitOfWorker: (workerId: bigint, rank: number) => number,
    private readonly blockSize: number,
  ) {
    this.held = Array.from({ length: units }, () => new Set<number>());
    this.cols = {
      bestHeld: new Int32Array(n),
      chosenHeld: new Int32Array(n),
      seen: new Int32Array(n),
      cause: new Uint8Array(n),
    };
  }

  /** A unit's KV events as the engine emitted them (before any delivery delay). */
  onEvents(unit: number, evs: readonly RouterEvent[]): void {
    const set = this.held[unit]!;
    for (const ev of evs) {
      const d = ev.event.data;
      if (d === 'cleared') {
        for (const k of set) this.drop(k);
        set.clear();
      } else if ('stored' in d) {
        for (const b of d.stored.blocks) {
          const k = keyOfBig(b.block_hash);
          if (set.has(k)) continue;
          set.add(k);
          this.everSeen.add(k);
          this.total++;
          this.holders.set(k, (this.holders.get(k) ?? 0) + 1);
        }
      } else {
        for (const h of d.removed.block_hashes) {
          const k = keyOfBig(h);
          if (set.delete(k)) this.drop(k);
        }
      }
    }
  }

  private drop(k: number): void {
    this.total--;
    const c = this.holders.get(k)! - 1;
    if (c === 0) this.holders.delete(k);
    else this.holders.set(k, c);
  }

  /** Samples the duplicated share (call at each arrival). */
  sample(): void {
    if (this.total === 0) return;
    this.dupSum += (this.total - this.holders.size) / this.total;
    this.dupSamples++;
  }

  /**
   * Request `k` decided onto `chosen`: `seq` = its sequence hashes as (lo, hi) pairs, of which at
   * most `maxBlocks` can hit (the engine always computes the last token).
   */
  decided(
    k: number,
    seq: Uint32Array,
    maxBlocks: number,
    chosen: number,
    explanation: DecisionExplanation | undefined,
  ): void {
    const nb = Math.min(seq.length >> 1, maxBlocks);
    let best = 0;
    let bestUnit = -1;
    let chosenHeld = 0;
    for (let u = 0; u < this.held.length; u++) {
      const set = this.held[u]!;
      let d = 0;
      while (d < nb && set.has(keyOf(seq[2 * d]!, seq[2 * d + 1]!))) d++;
      if (d > best) {
        best = d;
        bestUnit = u;
      }
      if (u === chosen) chosenHeld = d;
    }
    let seen = 0;
    while (seen < nb && this.everSeen.has(keyOf(seq[2 * seen]!, seq[2 * seen + 1]!))) seen++;
    const c = this.cols;
    c.bestHeld[k] = best;
    c.chosenHeld[k] = chosenHeld;
    c.seen[k] = seen;
    if (best > chosenHeld) c.cause[k] = GAP_CAUSES.indexOf(this.cause(explanation, bestUnit, chosen)) + 1;
  }

  private cause(e: DecisionExplanation | undefined, bestUnit: number, chosen: number): GapCause {
    if (!e || e.mode !== 'kv' || !e.chosen) return 'not_cache_aware';
    if (e.queuedMs > 0) return 'queue';
    const cands = e.candidates ?? [];
    const b = cands.find((t) => this.unitOfWorker(t.worker_id, t.dp_rank) === bestUnit);
    if (!b) return e.busyFiltered > 0 ? 'busy_filter' : 'index_lag';
    const a = cands.find((t) => this.unitOfWorker(t.worker_id, t.dp_rank) === chosen) ?? e.chosen;
    if (e.temperature > 0 && a.cost > b.cost) return 'temperature';
    if (b.cached_tokens <= a.cached_tokens) return 'index_lag';
    if (b.cost === a.cost) return 'tie';
    if (e.costPolicy === 'ttft')
      // Predicted TTFT: the holder's queued prompt work, else the decode pressure slowing it.
      return b.active_prefill_tokens > a.active_prefill_tokens ? 'prefill_load' : 'decode_blocks';
    return outweighed(a, b, this.blockSize);
  }

  result(): GapColumns {
    return { ...this.cols, duplicateShare: this.dupSamples > 0 ? this.dupSum / this.dupSamples : 0 };
  }
}

/** Which load term of the holder `b` over the chosen `a` weighs most (positive excess only). */
function outweighed(a: CandidateTerms, b: CandidateTerms, bs: number): GapCause {
  // In blocks: queued prompt tokens / bs against decode blocks (both policies read these inputs).
  const prefill = (b.active_prefill_tokens - a.active_prefill_tokens) / bs;
  const decode = b.decode + b.additional - (a.decode + a.additional);
  const reqs = b.active_request_term - a.active_request_term;
  const terms: [GapCause, number][] = [
    ['prefill_load', prefill],
    ['decode_blocks', decode],
    ['active_requests', reqs],
  ];
  let best: GapCause = 'prefill_load';
  let v = -Infinity;
  for (const [c, x] of terms)
    if (x > v) {
      v = x;
      best = c;
    }
  return best;
}
