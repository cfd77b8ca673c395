/**
 * Every rank's load inputs in flat arrays by slot (docs/protocol.md §9), written by each rank's
 * `ActiveSequences` after every change and read by `MultiWorkerSequences.fillLoads`.
 */
import { decayedPrefillTokens } from './prefill-tracker.js';

/**
 * Every rank's load inputs in flat arrays by slot, rewritten by the rank after each change. The
 * snapshot of a decision reads hundreds of ranks: from here that is a few contiguous arrays
 * instead of several cold objects (and two bigint-keyed map lookups) per rank.
 */
export class RankLoads {
  /** Bumped whenever a slot is given to a rank or taken back: a cached (slot, gen) is stale otherwise. */
  gen = new Uint32Array(64);
  decode = new Float64Array(64);
  requests = new Float64Array(64);
  pfCount = new Float64Array(64);
  pfSum = new Float64Array(64);
  pfInit = new Float64Array(64);
  /** Anchor's expected prefill duration (ms); NaN = no prediction. */
  pfExp = new Float64Array(64);
  pfSince = new Float64Array(64);

  ensure(slots: number): void {
    if (slots <= this.gen.length) return;
    const n = Math.max(slots, 2 * this.gen.length);
    const g = new Uint32Array(n);
    g.set(this.gen);
    this.gen = g;
    const grow = (a: Float64Array) => {
      const b = new Float64Array(n);
      b.set(a);
      return b;
    };
    this.decode = grow(this.decode);
    this.requests = grow(this.requests);
    this.pfCount = grow(this.pfCount);
    this.pfSum = grow(this.pfSum);
    this.pfInit = grow(this.pfInit);
    this.pfExp = grow(this.pfExp);
    this.pfSince = grow(this.pfSince);
  }

  /**
   * `prefillAt` where the anchor has no predicted duration: the anchor then decays as if the
   * engine prefilled it at `tokensPerMs` (ttft policy; with a prediction this equals `prefillAt`).
   */
  prefillAtRate(slot: number, now: number, tokensPerMs: number): number {
    if (this.pfCount[slot] === 0) return 0;
    const exp = this.pfExp[slot];
    const init = this.pfInit[slot];
    const expected = exp === exp ? exp : tokensPerMs > 0 ? init / tokensPerMs : NaN;
    return decayedPrefillTokens(this.pfSum[slot], init, expected, now - this.pfSince[slot]);
  }

  /** `activePrefillTokens(now)` of the rank in `slot` (the tracker's own decay function). */
  prefillAt(slot: number, now: number): number {
    if (this.pfCount[slot] === 0) return 0;
    return decayedPrefillTokens(
      this.pfSum[slot],
      this.pfInit[slot],
      this.pfExp[slot],
      now - this.pfSince[slot],
    );
  }
}
