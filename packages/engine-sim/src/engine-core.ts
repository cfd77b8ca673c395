import { BlockManager, PARTIAL } from './block-manager.js';
import type { EngineConfig } from './config.js';
import type { BlockHasher } from './hasher.js';
import { RankCoreBase, RUNNING, SeqRequest, WAITING } from './rank-core.js';
import type { TimingModel } from './timing.js';
import type { EmittedToken, EngineRequest, StepResult } from './types.js';

/** A request with its block table. */
class SimRequest extends SeqRequest {
  /** Slot per block of the sequence; only the last one may be partial. */
  readonly blocks: Int32Array;
  numBlocks = 0;
  fullBlocks = 0;

  constructor(
    req: EngineRequest,
    seed: bigint,
    seedKey: string,
    maxBlocks: number,
    hasher: BlockHasher,
    bs: number,
  ) {
    super(req, seed, seedKey, maxBlocks, hasher, bs);
    this.blocks = new Int32Array(maxBlocks);
  }
}

/**
 * One dp rank of the simulated engine (docs/protocol.md §17, vLLM flavour): a block manager plus a
 * scheduler driven as a step machine. It never reads a clock: `now` only has to be non-decreasing,
 * and the driver decides when a pass's results become visible (`now + durationMs`).
 */
export class EngineCore extends RankCoreBase<SimRequest> {
  private readonly bm: BlockManager;

  constructor(
    dpRank: number,
    cfg: Readonly<EngineConfig>,
    hasher: BlockHasher,
    timing: TimingModel,
    private readonly blockTokenIds = false,
  ) {
    super(dpRank, cfg, hasher, timing);
    this.bm = new BlockManager(cfg.numGpuBlocks, cfg.enablePrefixCaching, this.log);
  }

  protected newRequest(req: EngineRequest, seed: bigint, seedKey: string, maxBlocks: number): SimRequest {
    return new SimRequest(req, seed, seedKey, maxBlocks, this.hasher, this.bs);
  }

  protected unchunkedLimit(): { tokens: number; name: string } {
    return { tokens: this.cfg.maxNumBatchedTokens, name: 'max_num_batched_tokens' };
  }

  /** One scheduler pass (§17 steps 1–4). */
  step(now: number): StepResult {
    this.checkNow(now);
    const cfg = this.cfg;
    const bs = this.bs;
    const running = this.running;
    let budget = cfg.maxNumBatchedTokens;
    let preempted = 0;

    // 1. Running requests first, in admission order.
    let i = 0;
    while (i < running.length && budget > 0) {
      const r = running[i];
      let n = r.numTokens - r.numComputed;
      if (n > budget) {
        // Only a prefill can exceed the budget; unchunked prefills are whole at admission, so this is chunking.
        n = budget;
      }
      let scheduled = true;
      while (!this.allocate(r, r.numComputed + n)) {
        const vi = cfg.preemptionMode === 'lifo' ? running.length - 1 : 0;
        const v = running[vi];
        running.splice(vi, 1);
        if (v.sched > 0) {
          // A fifo victim may already hold this pass's budget.
          budget += v.sched;
          v.sched = 0;
        }
        this.preempt(v);
        preempted++;
        if (v === r) {
          scheduled = false;
          break;
        }
        if (vi < i) i--;
      }
      if (!scheduled) continue;
      r.sched = n;
      budget -= n;
      i++;
    }

    // 2. Admission, FIFO; none in a pass that preempted.
    if (preempted === 0) {
      while (this.waiting.length > 0 && running.length < cfg.maxNumSeqs && budget > 0) {
        const r = this.waiting.peek()!;
        const hit = this.bm.caching ? this.prefixHits(r) : 0;
        // A transferred prompt counts as computed up to its last token, which runs as a decode step.
        const transfer = r.kvTransferred && r.cachedTokens < 0;
        const computed = transfer ? r.numTokens - 1 : hit * bs;
        let n = r.numTokens - computed;
        if (n > budget) {
          if (cfg.enableChunkedPrefill) n = budget;
          // A recompute longer than the whole budget runs alone rather than never.
          else if (budget < cfg.maxNumBatchedTokens) break;
        }
        r.numComputed = computed;
        if (!this.allocate(r, computed + n)) {
          r.numComputed = 0;
          break;
        }
        this.waiting.shift();
        r.state = RUNNING;
        r.prefillEnd = transfer ? computed : r.numTokens;
        if (r.cachedTokens < 0) {
          r.cachedTokens = hit * bs;
          this.counters.admitted++;
          this.counters.promptTokens += r.numTokens;
          this.counters.cachedTokens += hit * bs;
        }
        r.sched = n;
        budget = Math.max(0, budget - n);
        running.push(r);
      }
    }

    // 3. Pass time from what was scheduled.
    let prefillTokens = 0;
    let decodeRequests = 0;
    let contextTokens = 0;
    for (let k = 0; k < running.length; k++) {
      const r = running[k];
      if (r.sched === 0) continue;
      if (r.numComputed < r.prefillEnd) prefillTokens += r.sched;
      else {
        decodeRequests++;
        contextTokens += r.numTokens;
      }
    }
    const durationMs = this.passMs(
      prefillTokens,
      decodeRequests,
      contextTokens,
      this.bm.activeCount / cfg.numGpuBlocks,
    );

    // 4. Advance: a request whose computed tokens reach its length emits the next token.
    const emitted: EmittedToken[] = [];
    let w = 0;
    for (let k = 0; k < running.length; k++) {
      const r = running[k];
      const n = r.sched;
      if (n > 0) {
        r.sched = 0;
        r.numComputed += n;
        if (r.numComputed === r.numTokens && this.emit(r, emitted)) continue;
      }
      running[w++] = r;
    }
    running.length = w;

    return this.passResult(durationMs, prefillTokens, decodeRequests, preempted, emitted);
  }

  /** The active pool (cached inactive blocks are not in use). */
  protected usedBlocks(): number {
    return this.bm.activeCount;
  }

  /** Sequence hashes of every block in the active and inactive pools. O(capacity): tests and dumps. */
  cachedBlocks(): Set<bigint> {
    return this.bm.cachedHashes();
  }

  protected evictions(): number {
    return this.bm.evictions;
  }

  /** Pool sizes, for metrics and tests. */
  pools(): { active: number; inactive: number; free: number } {
    return { active: this.bm.activeCount, inactive: this.bm.inactiveCount, free: this.bm.freeCount };
  }

  /** Structural invariants of the block pool against the live requests' block tables ([] = sound). */
  audit(): string[] {
    const holders = new Int32Array(this.cfg.numGpuBlocks);
    const bad: string[] = [];
    const check = (r: SimRequest): void => {
      for (let j = 0; j < r.numBlocks; j++) holders[r.blocks[j]]++;
      const want = Math.ceil(r.numComputed / this.bs);
      if (r.numBlocks !== want)
        bad.push(`${r.id}: ${r.numBlocks} blocks for ${r.numComputed} computed tokens`);
      if (r.fullBlocks !== Math.floor(r.numComputed / this.bs)) bad.push(`${r.id}: full block count`);
      for (let j = 0; j < r.numBlocks; j++) {
        const partial = this.bm.state[r.blocks[j]] === PARTIAL;
        if (partial !== j >= r.fullBlocks) bad.push(`${r.id}: block ${j} partial=${partial}`);
      }
    };
    for (const r of this.running) check(r);
    for (let k = 0; k < this.waiting.length; k++) {
      const r = this.waiting.at(k);
      if (r.numBlocks !== 0) bad.push(`${r.id}: waiting but holds ${r.numBlocks} blocks`);
    }
    return bad.concat(this.bm.audit(holders));
  }

  // ---------------------------------------------------------------------------------------------

  /**
   * Leading full blocks already cached. At most (len − 1) / bs of them: the last prompt token is always
   * computed so the pass yields logits (vLLM's rule; implementation choice).
   */
  private prefixHits(r: SimRequest): number {
    const max = Math.floor((r.numTokens - 1) / this.bs);
    const h = r.hashes;
    let hit = 0;
    while (hit < max) {
      r.hashUpTo(hit);
      if (this.bm.lookup(h[4 * hit + 2], h[4 * hit + 3]) < 0) break;
      hit++;
    }
    return hit;
  }

  /**
   * Gives `r` blocks for its first `target` tokens, or changes nothing and returns false when the pool
   * cannot supply them. Blocks that will be full after this pass are hashed and shared now (vLLM caches
   * at allocation), so a request admitted later in the same pass can already hit them.
   */
  private allocate(r: SimRequest, target: number): boolean {
    const bm = this.bm;
    const bs = this.bs;
    const need = Math.ceil(target / bs);
    const caching = bm.caching;
    const h = r.hashes;

    // Dry run: each block that is not an active cache hit consumes one free-or-evictable slot.
    let slots = 0;
    for (let j = r.numBlocks; j < need; j++) {
      if (caching && (j + 1) * bs <= target) {
        r.hashUpTo(j);
        const s = bm.lookup(h[4 * j + 2], h[4 * j + 3]);
        if (s >= 0 && bm.refs[s] > 0) continue;
      }
      slots++;
    }
    if (slots > bm.available) return false;

    // The partial tail block fills up: promote it (dedup against an identical cached block).
    if (r.fullBlocks < r.numBlocks && r.numBlocks * bs <= target) {
      const j = r.numBlocks - 1;
      const own = r.blocks[j];
      if (caching) {
        r.hashUpTo(j);
        const o = 4 * j;
        const s = bm.lookup(h[o + 2], h[o + 3]);
        if (s >= 0) {
          bm.ref(s);
          bm.release(own);
          r.blocks[j] = s;
        } else {
          bm.publish(own, h[o + 2], h[o + 3]);
          this.logStored(r, j);
        }
      } else {
        bm.publish(own, 0, 0);
      }
      r.fullBlocks++;
    }

    let evicted = false;
    for (let j = r.numBlocks; j < need; j++) {
      const full = (j + 1) * bs <= target;
      if (full && caching) {
        const o = 4 * j;
        const s = bm.lookup(h[o + 2], h[o + 3]);
        if (s >= 0) {
          bm.ref(s);
          r.blocks[j] = s;
          r.numBlocks++;
          r.fullBlocks++;
          continue;
        }
      }
      if (!evicted) {
        // Cached prefixes are closed under parent, so past the first miss every block needs a fresh slot:
        // evict for all of them at once and the removals form one Removed record.
        evicted = true;
        bm.evict(need - j - bm.freeCount);
      }
      const s = bm.take();
      r.blocks[j] = s;
      r.numBlocks++;
      if (full) {
        if (caching) {
          bm.publish(s, h[4 * j + 2], h[4 * j + 3]);
          this.logStored(r, j);
        } else {
          bm.publish(s, 0, 0);
        }
        r.fullBlocks++;
      }
    }
    return true;
  }

  private logStored(r: SimRequest, j: number): void {
    const h = r.hashes;
    const o = 4 * j;
    const tokens = this.blockTokenIds ? r.tokens.slice(j * this.bs, (j + 1) * this.bs) : undefined;
    this.log.stored(
      j > 0,
      j > 0 ? h[o - 2] : 0,
      j > 0 ? h[o - 1] : 0,
      h[o + 2],
      h[o + 3],
      h[o],
      h[o + 1],
      j,
      tokens,
    );
  }

  /** Tail first, so a request's deeper blocks reach the LRU list (and get evicted) before its shallower ones. */
  protected release(r: SimRequest): void {
    for (let j = r.numBlocks - 1; j >= 0; j--) this.bm.release(r.blocks[j]);
    r.numBlocks = 0;
    r.fullBlocks = 0;
  }

  private preempt(r: SimRequest): void {
    this.release(r);
    r.numComputed = 0;
    r.prefillEnd = 0;
    r.state = WAITING;
    this.waiting.pushFront(r);
  }
}
