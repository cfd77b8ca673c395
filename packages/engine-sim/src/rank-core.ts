import { KvrError, u64Hi, u64Lo } from '@kvrouter/protocols';
import type { EngineConfig } from './config.js';
import { Deque } from './deque.js';
import { KvEventLog } from './event-log.js';
import type { BlockHasher } from './hasher.js';
import { ReasoningTokens } from './reasoning.js';
import { checkRequest } from './request-check.js';
import { passDurationMs, type TimingModel } from './timing.js';
import { TokenRng } from './token-rng.js';
import type { EmittedToken, EngineLoad, EngineRequest, EngineStats, StepResult } from './types.js';

export const WAITING = 0;
export const RUNNING = 1;
const DONE = 2;

/**
 * What both flavours keep per request. Every buffer is sized once at enqueue, so a pass allocates
 * nothing per token; block hashes never change (content is fixed), so they survive preemption.
 */
export class SeqRequest {
  /** Prompt followed by generated tokens; capacity prompt + maxTokens. */
  readonly tokens: Uint32Array;
  numTokens: number;
  /** Tokens whose KV is computed (held by the request). */
  numComputed = 0;
  /** Tokens below this index are computed as prefill in the current admission (prompt, or prompt + output on recompute). */
  prefillEnd = 0;
  generated = 0;
  /** Per block: local lo, local hi, sequence lo, sequence hi. */
  readonly hashes: Uint32Array;
  numHashed = 0;
  state = WAITING;
  /** Tokens scheduled in the pass under way. */
  sched = 0;
  /** Prefix-cache hit (tokens) at first admission; -1 until admitted. */
  cachedTokens = -1;
  /** `EngineRequest.kvTransferred`. */
  readonly kvTransferred: boolean;
  readonly id: string;
  readonly maxTokens: number;
  readonly seedLo: number;
  readonly seedHi: number;

  constructor(
    req: EngineRequest,
    seed: bigint,
    /** LoRA name ('' = base): picks the radix tree in the SGLang flavour. */
    readonly seedKey: string,
    maxBlocks: number,
    private readonly hasher: BlockHasher,
    private readonly bs: number,
  ) {
    this.id = req.id;
    this.maxTokens = req.maxTokens;
    this.tokens = new Uint32Array(req.tokenIds.length + req.maxTokens);
    this.tokens.set(req.tokenIds);
    this.numTokens = req.tokenIds.length;
    this.hashes = new Uint32Array(4 * maxBlocks);
    this.kvTransferred = req.kvTransferred === true;
    this.seedLo = u64Lo(seed);
    this.seedHi = u64Hi(seed);
  }

  /** Hashes blocks up to and including `j` (in order: each sequence hash chains on the previous one). */
  hashUpTo(j: number): void {
    const h = this.hashes;
    const bs = this.bs;
    for (let b = this.numHashed; b <= j; b++) {
      const o = 4 * b;
      this.hasher.hashBlock(this.tokens, b * bs, bs, this.seedLo, this.seedHi, h, o);
      if (b === 0) {
        h[2] = h[0];
        h[3] = h[1];
      } else {
        this.hasher.chain(h[o - 2], h[o - 1], h[o], h[o + 1], h, o + 2);
      }
    }
    if (j >= this.numHashed) this.numHashed = j + 1;
  }
}

/**
 * What one dp rank's scheduler is apart from its KV cache and pass policy, shared by the vLLM flavour
 * (`EngineCore`) and the SGLang flavour (`SglangCore`): the waiting queue and running set, request
 * validation and LoRA seeds, token emission (with reasoning spans), pass timing, counters and the
 * step result. A flavour supplies its request type, its KV release, its load and its passes.
 */
export abstract class RankCoreBase<R extends SeqRequest> {
  protected readonly bs: number;
  protected readonly log: KvEventLog;
  protected readonly waiting = new Deque<R>();
  protected running: R[] = [];
  protected readonly byId = new Map<string, R>();
  protected readonly counters: EngineStats = {
    passes: 0,
    admitted: 0,
    promptTokens: 0,
    cachedTokens: 0,
    prefillTokensComputed: 0,
    decodeTokens: 0,
    preemptions: 0,
    storedBlocks: 0,
    evictedBlocks: 0,
    finished: 0,
    cancelled: 0,
    reasoningTokens: 0,
  };
  private readonly rng: TokenRng;
  private readonly reasoning: ReasoningTokens | null;
  private readonly seeds = new Map<string, bigint>();
  private lastNow = -Infinity;
  private lastLoad = -1;

  constructor(
    readonly dpRank: number,
    protected readonly cfg: Readonly<EngineConfig>,
    protected readonly hasher: BlockHasher,
    private readonly timing: TimingModel,
  ) {
    this.bs = cfg.blockSize;
    this.log = new KvEventLog(dpRank);
    this.rng = new TokenRng(cfg.seed, dpRank, cfg.vocabSize);
    this.reasoning = cfg.reasoning === null ? null : new ReasoningTokens(cfg.reasoning, cfg.vocabSize);
  }

  /** One scheduler pass. */
  abstract step(now: number): StepResult;
  /** KV blocks held by live requests (`kv_used_blocks` = `active_decode_blocks` of the load). */
  protected abstract usedBlocks(): number;
  /** Sequence hashes of every cached block. O(capacity): tests and dumps. */
  abstract cachedBlocks(): Set<bigint>;
  /** Structural invariants of the KV cache against the live requests ([] = sound). */
  abstract audit(): string[];
  /** The flavour's request for `enqueue`. */
  protected abstract newRequest(req: EngineRequest, seed: bigint, seedKey: string, maxBlocks: number): R;
  /** The largest prompt one pass may take with chunked prefill off, and the flag that sets it. */
  protected abstract unchunkedLimit(): { tokens: number; name: string };
  /** Drops `r`'s hold on its KV (cached KV stays cached); a no-op when it holds none. */
  protected abstract release(r: R): void;
  /** Blocks (vLLM) or token runs (SGLang) evicted so far. */
  protected abstract evictions(): number;

  get numWaiting(): number {
    return this.waiting.length;
  }

  get numRunning(): number {
    return this.running.length;
  }

  /** Anything queued or running: a driver steps again only while this holds. */
  get hasWork(): boolean {
    return this.running.length > 0 || this.waiting.length > 0;
  }

  has(requestId: string): boolean {
    return this.byId.has(requestId);
  }

  /** Validates fully before touching state; throws `invalid_request` / `request_too_large` naming the field. */
  enqueue(req: EngineRequest, now: number): void {
    this.checkNow(now);
    const maxBlocks = checkRequest(
      req,
      this.cfg,
      (id) => this.byId.has(id),
      this.cfg.enableChunkedPrefill ? null : this.unchunkedLimit(),
    );
    const key = req.loraName ?? '';
    let seed = this.seeds.get(key);
    if (seed === undefined) {
      seed = this.hasher.seedOf(req.loraName);
      this.seeds.set(key, seed);
    }
    const r = this.newRequest(req, seed, key, maxBlocks);
    this.byId.set(req.id, r);
    this.waiting.pushBack(r);
  }

  /** Drops a waiting or running request and frees its KV now. False when unknown or finished. */
  cancel(requestId: string): boolean {
    const r = this.byId.get(requestId);
    if (r === undefined) return false;
    if (r.state === WAITING) this.waiting.remove(r);
    else this.running.splice(this.running.indexOf(r), 1);
    this.release(r);
    r.state = DONE;
    this.byId.delete(requestId);
    this.counters.cancelled++;
    return true;
  }

  load(): EngineLoad {
    const used = this.usedBlocks();
    return { dp_rank: this.dpRank, kv_used_blocks: used, active_decode_blocks: used };
  }

  stats(): EngineStats {
    return { ...this.counters, evictedBlocks: this.evictions() };
  }

  // ---------------------------------------------------------------------------------------------

  protected checkNow(now: number): void {
    if (typeof now !== 'number' || !Number.isFinite(now) || now < this.lastNow) {
      throw new KvrError('invalid_time', `now: expected a time >= ${this.lastNow}, got ${String(now)}`, 400, {
        field: 'now',
      });
    }
    this.lastNow = now;
  }

  /** Pass time (0 when idle) from what the pass computed: `kvUsage` is KV in use / capacity after it. */
  protected passMs(
    prefillTokens: number,
    decodeRequests: number,
    contextTokens: number,
    kvUsage: number,
  ): number {
    if (prefillTokens === 0 && decodeRequests === 0) return 0;
    return passDurationMs(
      this.timing,
      prefillTokens,
      { kvUsage, batch: decodeRequests, contextTokens },
      this.cfg.speedupRatio,
      this.cfg.decodeSpeedupRatio,
    );
  }

  /** Emits `r`'s next token into `out`; true when that finished it (its KV released, it is gone). */
  protected emit(r: R, out: EmittedToken[]): boolean {
    const drawn = this.rng.nextToken();
    const tok = this.reasoning === null ? drawn : this.reasoning.next(drawn, r.generated, r.maxTokens);
    r.tokens[r.numTokens++] = tok;
    r.generated++;
    const rec: EmittedToken = { requestId: r.id, tokenIds: [tok] };
    if (r.generated === 1) rec.cachedTokens = r.cachedTokens;
    out.push(rec);
    if (r.generated < r.maxTokens) return false;
    rec.finishReason = 'length';
    if (this.reasoning !== null) {
      rec.reasoningTokens = this.reasoning.spanOf(r.maxTokens);
      this.counters.reasoningTokens += rec.reasoningTokens;
    }
    this.release(r);
    r.state = DONE;
    this.byId.delete(r.id);
    this.counters.finished++;
    return true;
  }

  /** Counts the pass and drains its KV events into the step result. */
  protected passResult(
    durationMs: number,
    prefillTokens: number,
    decodeRequests: number,
    preempted: number,
    emitted: EmittedToken[],
  ): StepResult {
    const idle = prefillTokens === 0 && decodeRequests === 0;
    const c = this.counters;
    c.passes += idle ? 0 : 1;
    c.prefillTokensComputed += prefillTokens;
    c.decodeTokens += decodeRequests;
    c.preemptions += preempted;
    const load = this.load();
    const loadChanged = load.kv_used_blocks !== this.lastLoad;
    this.lastLoad = load.kv_used_blocks;
    const kvEvents = this.log.drain();
    for (const e of kvEvents) if ('stored' in e.data) c.storedBlocks += e.data.stored.blocks.length;
    return {
      dpRank: this.dpRank,
      durationMs,
      idle,
      prefillTokens,
      decodeRequests,
      preempted,
      emitted,
      kvEvents,
      load,
      loadChanged,
    };
  }
}
