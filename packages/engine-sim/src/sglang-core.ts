import type { EngineConfig } from './config.js';
import type { BlockHasher } from './hasher.js';
import { RadixCache, type RadixNode, type RadixOwner } from './radix-cache.js';
import { RankCoreBase, RUNNING, SeqRequest, WAITING } from './rank-core.js';
import type { TimingModel } from './timing.js';
import type { EmittedToken, EngineRequest, StepResult } from './types.js';

// SGLang's scheduler constants (python/sglang/srt/managers/schedule_policy.py and server args defaults).
const CLIP_MAX_NEW_TOKENS = 4096;
const INIT_NEW_TOKEN_RATIO = 0.7;
const MIN_NEW_TOKEN_RATIO = INIT_NEW_TOKEN_RATIO * 0.14;
const NEW_TOKEN_RATIO_DECAY = (INIT_NEW_TOKEN_RATIO - MIN_NEW_TOKEN_RATIO) / 600;

/** A request with its locked path in the radix tree. */
class SglRequest extends SeqRequest implements RadixOwner {
  /** Deepest node of the locked path; null while it holds no KV. */
  node: RadixNode = null as unknown as RadixNode;
  holdsKv = false;
  /** Tokens held outside the tree (radix cache off). */
  privateTokens = 0;

  remainingOutput(): number {
    return this.maxTokens - this.generated;
  }
}

/**
 * One dp rank of the simulated engine, SGLang flavour (docs/protocol.md §17 `--engine-type sglang`), a
 * step machine like `EngineCore` with the same surface. A pass is either an extend (prefill) batch
 * or a decode step, never both (SGLang's default, mixed chunks off):
 *
 * 1. Extend: waiting requests in FIFO order, each matched against the radix cache at token
 *    granularity (at most len − 1 tokens, so the last one yields logits). A prompt that fits the
 *    chunk (`--max-num-batched-tokens`, SGLang's `chunked_prefill_size`, 8192) is taken whole if the
 *    pass's chunk budget still holds it; a longer one is cut to what the budget has left. Every
 *    request also charges `--sglang-max-prefill-tokens` (16384). Admission stops at the first request
 *    that does not fit, at `max_num_seqs`, or when its tokens plus its reserved output (remaining
 *    output, at most 4096, times the decaying `new_token_ratio`) would not fit the free plus evictable KV.
 *    A request whose prompt is not done after its chunk goes back to the head of the queue, keeping
 *    its KV. If anything was admitted the pass costs `prefill(x)`; requests whose prompt completed emit
 *    their first token; running requests wait.
 * 2. Otherwise decode: every running request needs one more KV token. While free + evictable KV is short,
 *    the running request with the fewest generated tokens is **retracted** (its path unlocked, its
 *    tokens kept cached but evictable) and goes to the head of the queue to be recomputed later;
 *    `new_token_ratio` resets. The pass costs `decode(u)`, u = KV in use / capacity.
 *
 * KV is inserted into the tree as it is allocated, so a request admitted later in the same pass can
 * hit it (the vLLM flavour's cache-at-allocation choice).
 */
export class SglangCore extends RankCoreBase<SglRequest> {
  private readonly cache: RadixCache;
  private readonly caching: boolean;
  private readonly chunk: number;
  private privateTokens = 0;
  private newTokenRatio = INIT_NEW_TOKEN_RATIO;

  constructor(
    dpRank: number,
    cfg: Readonly<EngineConfig>,
    hasher: BlockHasher,
    timing: TimingModel,
    blockTokenIds = false,
  ) {
    super(dpRank, cfg, hasher, timing);
    this.caching = cfg.enablePrefixCaching;
    this.chunk = cfg.enableChunkedPrefill ? cfg.maxNumBatchedTokens : Infinity;
    this.cache = new RadixCache(cfg.numGpuBlocks * cfg.blockSize, cfg.blockSize, this.log, blockTokenIds);
  }

  protected newRequest(req: EngineRequest, seed: bigint, seedKey: string, maxBlocks: number): SglRequest {
    return new SglRequest(req, seed, seedKey, maxBlocks, this.hasher, this.bs);
  }

  protected unchunkedLimit(): { tokens: number; name: string } {
    return { tokens: this.cfg.sglangMaxPrefillTokens, name: 'sglang_max_prefill_tokens' };
  }

  step(now: number): StepResult {
    this.checkNow(now);
    const emitted: EmittedToken[] = [];
    let prefillTokens = 0;
    let decodeRequests = 0;
    let contextTokens = 0;
    let retracted = 0;

    const batch = this.admit();
    for (const r of batch) prefillTokens += r.sched;
    let decoding: SglRequest[] = [];
    if (prefillTokens === 0) {
      for (const r of batch) this.running.push(r);
      retracted = this.makeDecodeRoom();
      decoding = this.running;
      for (const r of decoding) {
        this.grow(r, r.numComputed, r.numComputed + 1);
        r.sched = 1;
        contextTokens += r.numTokens;
      }
      decodeRequests = decoding.length;
    }
    const durationMs = this.passMs(
      prefillTokens,
      decodeRequests,
      contextTokens,
      this.usedTokens() / this.cache.capacity,
    );

    if (prefillTokens > 0) {
      // Extend pass: finished prompts emit and join the running set; unfinished chunks wait at the head.
      const back: SglRequest[] = [];
      for (const r of batch) {
        if (r.sched === 0) {
          // A transferred prompt: its last token runs in the next decode pass.
          this.running.push(r);
          continue;
        }
        r.numComputed += r.sched;
        r.sched = 0;
        if (r.numComputed < r.numTokens) back.push(r);
        else if (!this.emit(r, emitted)) this.running.push(r);
      }
      for (let k = back.length - 1; k >= 0; k--) {
        back[k].state = WAITING;
        this.waiting.pushFront(back[k]);
      }
    } else {
      let w = 0;
      for (let k = 0; k < decoding.length; k++) {
        const r = decoding[k];
        r.numComputed += r.sched;
        r.sched = 0;
        if (!this.emit(r, emitted)) decoding[w++] = r;
      }
      decoding.length = w;
    }

    // SGLang decays the output reservation each pass and resets it on memory pressure.
    this.newTokenRatio =
      retracted > 0
        ? INIT_NEW_TOKEN_RATIO
        : Math.max(MIN_NEW_TOKEN_RATIO, this.newTokenRatio - NEW_TOKEN_RATIO_DECAY);

    return this.passResult(durationMs, prefillTokens, decodeRequests, retracted, emitted);
  }

  /** KV tokens held by live requests, rounded up to blocks. */
  protected usedBlocks(): number {
    return Math.ceil(this.usedTokens() / this.bs);
  }

  cachedBlocks(): Set<bigint> {
    return this.cache.cachedHashes();
  }

  protected evictions(): number {
    return this.cache.evictions;
  }

  /** KV tokens: in use by live requests, cached but evictable, free. */
  pools(): { active: number; inactive: number; free: number } {
    return {
      active: this.usedTokens(),
      inactive: this.cache.evictable,
      free: this.cache.free - this.privateTokens,
    };
  }

  audit(): string[] {
    const locks = new Map<RadixNode, number>();
    const bad: string[] = [];
    let priv = 0;
    const check = (r: SglRequest): void => {
      if (!r.holdsKv) {
        if (r.numComputed !== 0) bad.push(`${r.id}: ${r.numComputed} computed tokens without KV`);
        return;
      }
      if (!this.caching) {
        priv += r.privateTokens;
        if (r.privateTokens !== r.numComputed)
          bad.push(`${r.id}: ${r.privateTokens} private tokens for ${r.numComputed} computed`);
        return;
      }
      const end = r.node.depth + r.node.len;
      if (end !== r.numComputed) bad.push(`${r.id}: path ends at ${end}, ${r.numComputed} tokens computed`);
      for (let n: RadixNode | null = r.node; n !== null && n.parent !== null; n = n.parent)
        locks.set(n, (locks.get(n) ?? 0) + 1);
    };
    for (const r of this.running) check(r);
    for (let k = 0; k < this.waiting.length; k++) check(this.waiting.at(k));
    if (priv !== this.privateTokens) bad.push(`privateTokens ${this.privateTokens}, requests hold ${priv}`);
    return bad.concat(this.cache.audit(locks));
  }

  // ---------------------------------------------------------------------------------------------

  private usedTokens(): number {
    return this.cache.lockedTokens + this.privateTokens;
  }

  /** Free plus evictable KV tokens. */
  private room(): number {
    return this.cache.free - this.privateTokens + this.cache.evictable;
  }

  /** Step 1: the extend batch (SGLang `get_new_batch_prefill`). */
  private admit(): SglRequest[] {
    const batch: SglRequest[] = [];
    let reserved = 0;
    for (const r of this.running)
      reserved += Math.min(r.remainingOutput(), CLIP_MAX_NEW_TOKENS) * this.newTokenRatio;
    let remTotal = this.room() - reserved;
    let remInput = this.cfg.sglangMaxPrefillTokens;
    let remChunk = this.chunk;
    while (this.waiting.length > 0 && this.running.length + batch.length < this.cfg.maxNumSeqs) {
      const r = this.waiting.peek()!;
      const fresh = !r.holdsKv;
      const transfer = fresh && r.kvTransferred && r.cachedTokens < 0;
      let hit = 0;
      if (fresh) {
        hit = this.lockPrefix(r);
        r.numComputed = transfer ? r.numTokens - 1 : hit;
      }
      const extend = r.numTokens - r.numComputed;
      // A transferred prompt arrives whole: its blocks are allocated, nothing is computed.
      const alloc = transfer ? r.numTokens - 1 - hit : 0;
      const n = transfer ? 0 : extend <= this.chunk ? extend : Math.min(Math.floor(remChunk), extend);
      const outputReserve = n < extend ? 0 : Math.min(r.remainingOutput(), CLIP_MAX_NEW_TOKENS);
      // The first request of a pass may exceed the prefill budget (SGLang's PrefillAdder lets it), and
      // the output reservation only holds back a request that has others to wait for, so nothing starves.
      const first = batch.length === 0;
      if (
        (!transfer && (n === 0 || n > remChunk || (n > remInput && !first))) ||
        (n + alloc + outputReserve >= remTotal && !(first && this.running.length === 0)) ||
        !this.makeRoomFor(r, n + alloc, first)
      ) {
        // Not admitted after all: give back what lockPrefix took.
        if (fresh) this.release(r);
        break;
      }
      this.waiting.shift();
      r.state = RUNNING;
      if (transfer) {
        this.grow(r, hit, r.numTokens - 1);
        r.prefillEnd = r.numTokens - 1;
      } else {
        this.grow(r, r.numComputed, r.numComputed + n);
        if (fresh) r.prefillEnd = r.numTokens;
      }
      if (r.cachedTokens < 0) {
        r.cachedTokens = hit;
        this.counters.admitted++;
        this.counters.promptTokens += r.numTokens;
        this.counters.cachedTokens += hit;
      }
      r.sched = n;
      remTotal -= n + alloc + outputReserve;
      remInput -= n;
      remChunk -= n;
      batch.push(r);
      if (remChunk <= 0) break;
    }
    return batch;
  }

  /**
   * `makeRoom`, and for the only candidate of an idle engine also the KV of chunked prompts waiting
   * behind it (it could otherwise wait for memory that nothing running will free).
   */
  private makeRoomFor(r: SglRequest, n: number, first: boolean): boolean {
    if (this.makeRoom(n)) return true;
    if (!first || this.running.length > 0) return false;
    for (let h = this.lastWaitingHolder(); h !== null && h !== r; h = this.lastWaitingHolder()) {
      this.release(h);
      this.counters.preemptions++;
      if (this.makeRoom(n)) return true;
    }
    return false;
  }

  /** Matches and locks the longest cached prefix (at most len − 1 tokens); returns its length. */
  private lockPrefix(r: SglRequest): number {
    r.holdsKv = true;
    if (!this.caching) return 0;
    const m = this.cache.match(this.cache.root(r.seedKey), r.tokens, r.numTokens - 1);
    r.node = m.node;
    this.cache.lockPath(m.node);
    return m.len;
  }

  /**
   * Room for `n` new KV tokens: evicts what is missing. False (nothing evicted) when even all evictable
   * tokens would not do.
   */
  private makeRoom(n: number): boolean {
    const free = this.cache.free - this.privateTokens;
    if (free >= n) return true;
    if (free + this.cache.evictable < n) return false;
    this.cache.evict(n - free);
    return true;
  }

  /** KV for tokens [from, to) of `r`, whose KV ends at `from` (room already made): into the tree, or private. */
  private grow(r: SglRequest, from: number, to: number): void {
    if (to <= from) return;
    if (this.caching) {
      this.cache.extend(r, from, to);
    } else {
      r.privateTokens += to - from;
      this.privateTokens += to - from;
    }
  }

  /**
   * Step 2's memory check (SGLang `check_decode_mem` + `retract_decode`): each running request needs one
   * more KV token. Retracts the one with the fewest generated tokens (the first such in running order)
   * until the rest fit; a lone request that still does not fit takes KV from chunked prompts waiting
   * with theirs. Returns the number retracted.
   */
  private makeDecodeRoom(): number {
    let retracted = 0;
    while (this.room() < this.running.length) {
      if (this.running.length <= 1) {
        const holder = this.lastWaitingHolder();
        if (holder === null) break;
        this.release(holder);
        retracted++;
        continue;
      }
      let v = 0;
      for (let k = 1; k < this.running.length; k++)
        if (this.running[k].generated < this.running[v].generated) v = k;
      const r = this.running[v];
      this.running.splice(v, 1);
      this.release(r);
      r.state = WAITING;
      r.prefillEnd = 0;
      this.waiting.pushFront(r);
      retracted++;
    }
    this.makeRoom(Math.min(this.running.length, this.room()));
    return retracted;
  }

  private lastWaitingHolder(): SglRequest | null {
    for (let k = this.waiting.length - 1; k >= 0; k--) {
      const r = this.waiting.at(k);
      if (r.holdsKv) return r;
    }
    return null;
  }

  /** Drops a request's hold on its KV; cached tokens stay in the tree, evictable. */
  protected release(r: SglRequest): void {
    if (!r.holdsKv) return;
    if (this.caching) this.cache.unlockPath(r.node);
    else this.privateTokens -= r.privateTokens;
    r.privateTokens = 0;
    r.holdsKv = false;
    r.node = null as unknown as RadixNode;
    r.numComputed = 0;
  }
}
