/**
 * One rank's active sequences (docs/protocol.md §9.1–§9.3): what the router has booked on a
 * (worker, dp_rank) and not yet freed. Pure: `now` (ms) and random u32 draws are arguments /
 * injected functions.
 *
 * Sequence hashes are u64 given as a Uint32Array of (lo, hi) pairs (`pairs[2i]` = low word of hash
 * i). Prompt blocks named by sequence hashes live in a `PrefixTree` (shared prefixes stored once,
 * a booking costs sequential compares, not a probe per block); random block ids (KV reuse off,
 * output blocks) in a `BlockTable` keyed by the two words. No BigInt or string is built per
 * block.
 */
import { BlockTable, FRAC_UNITS } from './block-table.js';
import type { HolderTree } from './holders.js';
import { PrefillTracker, prefillNode, type PrefillNode } from './prefill-tracker.js';
import { PrefixTree } from './prefix-tree.js';
import type { RankLoads } from './rank-loads.js';
import { bool, finite, finiteNonNeg, invalid, nonNegInt, posInt } from './validate.js';

export const DEFAULT_EXPIRY_MS = 300_000;
export const EXPIRY_CHECK_INTERVAL_MS = 30_000;

export interface SequenceOptions {
  /** KV block size in tokens. */
  blockSize: number;
  /** `--router-track-active-blocks` (default true). */
  trackActiveBlocks?: boolean;
  /** `--router-assume-kv-reuse` (default true); per-request overridable. */
  assumeKvReuse?: boolean;
  /** `--router-track-prefill-tokens` (default true); per-request overridable. */
  trackPrefillTokens?: boolean;
  /** `--router-track-output-blocks` (default false). */
  trackOutputBlocks?: boolean;
  /** `DYN_ROUTER_ACTIVE_REQUEST_EXPIRY_SECS` in ms (default 300 000). */
  expiryMs?: number;
  /** Minimum spacing of lazy expiry checks (default 30 000). */
  expiryCheckIntervalMs?: number;
  /**
   * Source of uniformly random u32 words; two draws (lo, then hi) make one u64 block id for
   * `assume_kv_reuse = false` prompts and for output blocks. Required only when those occur.
   */
  randomU32?: () => number;
}

export interface AddRequestInput {
  requestId: string;
  /** Prompt length in tokens. */
  isl: number;
  /**
   * The prompt's sequence hashes as (lo, hi) pairs, one per full block. Required when active-block
   * tracking and KV reuse are both on; ignored otherwise. Copied.
   */
  seqHashes?: Uint32Array | null;
  /** `cached_tokens` of the selected rank (§8.3); default 0. */
  cachedTokens?: number;
  /** `agent_hints.osl`: expected output tokens; drives output-block decay (§9.3). */
  expectedOutputTokens?: number | null;
  /** AIC-predicted prefill duration in ms; null/absent = no prediction. */
  expectedPrefillDurationMs?: number | null;
  /** Per-request overrides (§8.7). */
  assumeKvReuse?: boolean | null;
  trackPrefillTokens?: boolean | null;
}

interface RequestEntry {
  id: string;
  isl: number;
  startedAt: number;
  osl: number | null;
  /** Prompt blocks held, (lo, hi) pairs. */
  prompt: Uint32Array;
  /** The prompt blocks are sequence hashes (KV reuse): held in the prefix tree (and holder index). */
  chain: boolean;
  /** Output blocks held, (lo, hi) pairs in `out[0 .. 2·outLen)`. */
  out: Uint32Array;
  outLen: number;
  prefill: PrefillNode | null;
}

const EMPTY_PAIRS = new Uint32Array(0);
const NO_IDS: readonly string[] = Object.freeze([]);

export class ActiveSequences {
  readonly blockSize: number;
  readonly trackActiveBlocks: boolean;
  readonly assumeKvReuse: boolean;
  readonly trackPrefillTokens: boolean;
  readonly trackOutputBlocks: boolean;
  readonly expiryMs: number;
  readonly expiryCheckIntervalMs: number;
  private readonly randomU32: (() => number) | undefined;
  private readonly requests = new Map<string, RequestEntry>();
  /** Random block ids: prompts without KV reuse, output blocks. */
  private readonly blocks = new BlockTable();
  /** Prompt blocks named by sequence hashes. */
  private readonly tree = new PrefixTree();
  private readonly prefill = new PrefillTracker();
  private lastExpiryCheck = -Infinity;
  /** Called with each force-freed request id. */
  onExpired: ((requestId: string) => void) | undefined;
  /** Called after every state change (§9.2: wake the queue, republish `ActiveLoad`). */
  onChange: (() => void) | undefined;
  /** @internal Set by `MultiWorkerSequences`: the cross-rank index this rank reports to, and its slot. */
  holders: HolderTree | null = null;
  holderSlot = -1;
  /** @internal Set by `MultiWorkerSequences`: the flat load table this rank writes its slot of. */
  loads: RankLoads | null = null;

  /** @internal After every state change: the flat load row, then the listener. */
  changed(): void {
    const t = this.loads;
    if (t !== null) {
      const s = this.holderSlot;
      t.decode[s] = this.activeDecodeBlocks;
      t.requests[s] = this.requests.size;
      const pf = this.prefill;
      const a = pf.anchor;
      t.pfCount[s] = pf.count;
      t.pfSum[s] = pf.sum;
      t.pfInit[s] = a === null ? 0 : a.initial;
      t.pfExp[s] = a === null || a.expectedMs === null ? NaN : a.expectedMs;
      t.pfSince[s] = pf.anchoredSince;
    }
    this.onChange?.();
  }

  constructor(opts: SequenceOptions) {
    this.blockSize = posInt('blockSize', opts.blockSize);
    this.trackActiveBlocks = bool('trackActiveBlocks', opts.trackActiveBlocks ?? true);
    this.assumeKvReuse = bool('assumeKvReuse', opts.assumeKvReuse ?? true);
    this.trackPrefillTokens = bool('trackPrefillTokens', opts.trackPrefillTokens ?? true);
    this.trackOutputBlocks = bool('trackOutputBlocks', opts.trackOutputBlocks ?? false);
    this.expiryMs = finiteNonNeg('expiryMs', opts.expiryMs ?? DEFAULT_EXPIRY_MS);
    this.expiryCheckIntervalMs = finiteNonNeg(
      'expiryCheckIntervalMs',
      opts.expiryCheckIntervalMs ?? EXPIRY_CHECK_INTERVAL_MS,
    );
    if (opts.randomU32 !== undefined && typeof opts.randomU32 !== 'function')
      throw invalid('randomU32', 'must be a function');
    this.randomU32 = opts.randomU32;
  }

  /**
   * §9.2 AddRequest. Returns false (and changes nothing) for a duplicate request id. Runs lazy
   * expiry first. All arguments are checked before any state changes.
   */
  addRequest(input: AddRequestInput, now: number): boolean {
    finite('now', now);
    const plan = this.plan(input);
    this.maybeExpire(now);
    if (this.requests.has(input.requestId)) return false;
    this.commit(input, plan, now);
    this.changed();
    return true;
  }

  /** @internal Checks an AddRequest and works out what it books; throws before any change. */
  plan(input: AddRequestInput): { reuse: boolean; nBlocks: number; prefillTokens: number } {
    if (typeof input.requestId !== 'string' || input.requestId.length === 0)
      throw invalid('requestId', 'must be a non-empty string', input.requestId);
    const isl = nonNegInt('isl', input.isl);
    const cached = finiteNonNeg('cachedTokens', input.cachedTokens ?? 0);
    if (input.expectedOutputTokens != null) nonNegInt('expectedOutputTokens', input.expectedOutputTokens);
    if (input.expectedPrefillDurationMs != null)
      finiteNonNeg('expectedPrefillDurationMs', input.expectedPrefillDurationMs);
    const reuse =
      input.assumeKvReuse != null ? bool('assumeKvReuse', input.assumeKvReuse) : this.assumeKvReuse;
    const trackPrefill =
      input.trackPrefillTokens != null
        ? bool('trackPrefillTokens', input.trackPrefillTokens)
        : this.trackPrefillTokens;
    let nBlocks = 0;
    if (this.trackActiveBlocks) {
      if (reuse) {
        const s = input.seqHashes;
        if (!(s instanceof Uint32Array) || (s.length & 1) !== 0)
          throw invalid('seqHashes', 'must be a Uint32Array of (lo, hi) pairs when KV reuse is assumed');
        nBlocks = s.length >> 1;
      } else {
        nBlocks = Math.floor(isl / this.blockSize);
        if (nBlocks > 0 && !this.randomU32)
          throw invalid('randomU32', 'is required when assume_kv_reuse is false');
      }
    }
    const prefillTokens = trackPrefill ? isl - Math.min(cached, isl) : 0;
    return { reuse, nBlocks, prefillTokens };
  }

  /** @internal Applies a checked plan. */
  commit(
    input: AddRequestInput,
    plan: { reuse: boolean; nBlocks: number; prefillTokens: number },
    now: number,
  ): void {
    let prompt = EMPTY_PAIRS;
    if (plan.nBlocks > 0) {
      if (plan.reuse) prompt = input.seqHashes!.slice(0, plan.nBlocks * 2);
      else {
        prompt = new Uint32Array(plan.nBlocks * 2);
        const r = this.randomU32!;
        for (let i = 0; i < prompt.length; i++) prompt[i] = r() >>> 0;
      }
      if (plan.reuse) {
        const fresh = this.tree.insert(prompt, prompt.length);
        if (this.holders !== null && fresh < prompt.length)
          this.holders.mark(prompt, fresh, prompt.length, this.holderSlot);
      } else {
        const t = this.blocks;
        for (let i = 0; i < prompt.length; i += 2) t.inc(prompt[i], prompt[i + 1]);
      }
    }
    let node: PrefillNode | null = null;
    if (plan.prefillTokens > 0) {
      node = prefillNode(plan.prefillTokens, input.expectedPrefillDurationMs ?? null);
      this.prefill.add(node, now);
    }
    this.requests.set(input.requestId, {
      id: input.requestId,
      isl: input.isl,
      startedAt: now,
      osl: input.expectedOutputTokens ?? null,
      prompt,
      chain: plan.reuse,
      out: EMPTY_PAIRS,
      outLen: 0,
      prefill: node,
    });
  }

  /** §9.2 MarkPrefillCompleted: the prefill entry goes, the blocks stay. False if unknown. */
  markPrefillCompleted(requestId: string, now: number): boolean {
    finite('now', now);
    const r = this.requests.get(requestId);
    if (!r) return false;
    if (r.prefill) {
      this.prefill.remove(r.prefill, now);
      r.prefill = null;
      this.changed();
    }
    return true;
  }

  /**
   * §9.3 after a response item: grow the request to `ceil((isl + outputTokens)/bs)` blocks with
   * fresh random ids, then, if `osl` was given, write `frac = max(0, 1 − out/max(osl, 1))` to every
   * block of the request that only it holds. No-op unless output and active-block tracking are on.
   * False if the request is unknown.
   */
  addOutputTokens(requestId: string, outputTokens: number, _now?: number): boolean {
    nonNegInt('outputTokens', outputTokens);
    const r = this.requests.get(requestId);
    if (!r) return false;
    if (!this.trackOutputBlocks || !this.trackActiveBlocks) return true;
    const total = Math.ceil((r.isl + outputTokens) / this.blockSize);
    const held = (r.prompt.length >> 1) + r.outLen;
    const t = this.blocks;
    if (total > held) {
      if (!this.randomU32) throw invalid('randomU32', 'is required for output-block tracking');
      const need = 2 * (r.outLen + total - held);
      if (need > r.out.length) {
        const grown = new Uint32Array(Math.max(need, r.out.length * 2, 8));
        grown.set(r.out.subarray(0, 2 * r.outLen));
        r.out = grown;
      }
      const rnd = this.randomU32;
      for (let k = held; k < total; k++) {
        const lo = rnd() >>> 0;
        const hi = rnd() >>> 0;
        r.out[2 * r.outLen] = lo;
        r.out[2 * r.outLen + 1] = hi;
        r.outLen++;
        t.inc(lo, hi);
      }
    }
    if (r.osl !== null) {
      const frac = Math.max(0, 1 - outputTokens / Math.max(r.osl, 1));
      if (r.chain) this.tree.setFracWhereSole(r.prompt, r.prompt.length, frac);
      else this.writeFrac(r.prompt, r.prompt.length, frac);
      this.writeFrac(r.out, 2 * r.outLen, frac);
    }
    this.changed();
    return true;
  }

  private writeFrac(pairs: Uint32Array, len: number, frac: number): void {
    const t = this.blocks;
    for (let i = 0; i < len; i += 2) {
      const s = t.find(pairs[i], pairs[i + 1]);
      if (s >= 0 && t.refAt(s) === 1) t.setFracAt(s, frac);
    }
  }

  /** §9.2 Free: prefill entry and every block reference go. False if unknown. */
  free(requestId: string, now: number): boolean {
    finite('now', now);
    if (!this.release(requestId, now)) return false;
    this.changed();
    return true;
  }

  private release(requestId: string, now: number): boolean {
    const r = this.requests.get(requestId);
    if (!r) return false;
    if (r.prefill) this.prefill.remove(r.prefill, now);
    const t = this.blocks;
    const p = r.prompt;
    if (r.chain) {
      const gone = this.tree.remove(p, p.length);
      if (this.holders !== null && gone < p.length) this.holders.unmark(p, gone, p.length, this.holderSlot);
    } else for (let i = 0; i < p.length; i += 2) t.dec(p[i], p[i + 1]);
    for (let i = 0; i < 2 * r.outLen; i += 2) t.dec(r.out[i], r.out[i + 1]);
    this.requests.delete(requestId);
    return true;
  }

  /** Force-frees every request with `now − started_at > maxAgeMs`; returns their ids. */
  expireOlderThan(now: number, maxAgeMs: number): readonly string[] {
    finite('now', now);
    finiteNonNeg('maxAgeMs', maxAgeMs);
    let expired: string[] | null = null;
    for (const r of this.requests.values()) {
      if (now - r.startedAt > maxAgeMs) (expired ??= []).push(r.id);
    }
    if (!expired) return NO_IDS;
    for (const id of expired) {
      this.release(id, now);
      this.onExpired?.(id);
    }
    this.changed();
    return expired;
  }

  /** §9.2 step 4: expiry at most once per `expiryCheckIntervalMs` (30 s). */
  maybeExpire(now: number): readonly string[] {
    if (now - this.lastExpiryCheck < this.expiryCheckIntervalMs) return NO_IDS;
    this.lastExpiryCheck = now;
    return this.expireOlderThan(now, this.expiryMs);
  }

  has(requestId: string): boolean {
    return this.requests.has(requestId);
  }

  // --- snapshot ----------------------------------------------------------------------------

  activePrefillTokens(now: number): number {
    return this.prefill.activeTokens(now);
  }

  /**
   * `round(|unique| − Σ_{fractional ∩ unique} (1 − fractional[h]))`, each term quantised to 2^−24
   * (see `BlockTable`), halves rounded up.
   */
  get activeDecodeBlocks(): number {
    const units = this.tree.deficitUnits + this.blocks.deficitUnits;
    return Math.round(this.tree.size + this.blocks.size - units / FRAC_UNITS);
  }

  get activeRequests(): number {
    return this.requests.size;
  }

  /** Distinct blocks held (before fractional decay). */
  get uniqueBlocks(): number {
    return this.tree.size + this.blocks.size;
  }

  /** Requests still in the prefill FIFO. */
  get pendingPrefills(): number {
    return this.prefill.count;
  }

  /**
   * Largest k with hash k−1 of `seqPairs` held on this rank (§9.1): the longest path of the
   * prompt in the prefix tree (random block ids never match a sequence hash).
   */
  activePrefixDepth(seqPairs: Uint32Array | null | undefined): number {
    if (!seqPairs || seqPairs.length < 2 || this.tree.size === 0) return 0;
    return this.tree.prefixDepth(seqPairs);
  }

  /** Refcount of one block (tests, debugging; walks every block). */
  refcount(lo: number, hi: number): number {
    let c = this.blocks.refcount(lo, hi);
    this.tree.forEachBlock((l, h, ref) => {
      if (l === lo && h === hi) c += ref;
    });
    return c;
  }

  /** Fractional value of one held block, if any (tests, debugging; walks every block). */
  fractionOf(lo: number, hi: number): number | undefined {
    let f = this.blocks.fracOf(lo, hi);
    this.tree.forEachBlock((l, h, _ref, fr) => {
      if (l === lo && h === hi && fr === fr) f = fr;
    });
    return f;
  }

  /** Copy of the (lo, hi) pairs a request holds, prompt first (tests, debugging). */
  requestBlocks(requestId: string): Uint32Array | undefined {
    const r = this.requests.get(requestId);
    if (!r) return undefined;
    const out = new Uint32Array(r.prompt.length + 2 * r.outLen);
    out.set(r.prompt);
    out.set(r.out.subarray(0, 2 * r.outLen), r.prompt.length);
    return out;
  }

  requestIds(): IterableIterator<string> {
    return this.requests.keys();
  }

  /** @internal Takes this rank's blocks out of the holder index (the rank is being dropped). */
  detachHolders(): void {
    this.holders?.releaseSlot(this.holderSlot);
    this.holders = null;
    this.holderSlot = -1;
  }
}
