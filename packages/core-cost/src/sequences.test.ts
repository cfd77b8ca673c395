import { describe, expect, it } from 'vitest';
import { VirtualClock, KvrError, type WorkerWithDpRank } from '@kvrouter/protocols';
import { Rng } from '@kvrouter/testkit';
import { CandidateBatch, computeCosts, DEFAULT_COST_PARAMS } from './cost.js';
import { ActiveSequences, type AddRequestInput } from './active-sequences.js';
import { MultiWorkerSequences } from './multi-worker.js';
import { PrefillTracker, prefillNode } from './prefill-tracker.js';

/** (lo, hi) pairs from [lo, hi] tuples. */
const pairs = (...hs: [number, number][]) => Uint32Array.from(hs.flat());
const chain = (family: number, n: number, hi = 0) =>
  pairs(...Array.from({ length: n }, (_, k) => [family * 1000 + k, hi] as [number, number]));
const w = (id: number, dp = 0) => ({ worker_id: BigInt(id), dp_rank: dp }) as WorkerWithDpRank;

/** Deterministic u32 source: 1, 2, 3, … (so random block ids are predictable). */
function counter(start = 1) {
  let n = start;
  return () => n++;
}

function field(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(KvrError);
    return (e as KvrError).detail?.field as string | undefined;
  }
  throw new Error('expected a KvrError');
}

describe('ActiveSequences: blocks', () => {
  it('shared prompt prefixes count once per rank', () => {
    const s = new ActiveSequences({ blockSize: 16 });
    // A: h1 h2 h3, B: h1 h2 h4 → unique {h1, h2, h3, h4} = 4
    s.addRequest({ requestId: 'A', isl: 48, seqHashes: pairs([1, 0], [2, 0], [3, 0]) }, 0);
    s.addRequest({ requestId: 'B', isl: 48, seqHashes: pairs([1, 0], [2, 0], [4, 0]) }, 0);
    expect(s.activeDecodeBlocks).toBe(4);
    expect(s.refcount(1, 0)).toBe(2);
    expect(s.activeRequests).toBe(2);
    s.free('A', 1);
    // B alone: h1 h2 h4
    expect(s.activeDecodeBlocks).toBe(3);
    expect(s.refcount(3, 0)).toBe(0);
    s.free('B', 2);
    expect(s.activeDecodeBlocks).toBe(0);
    expect(s.activeRequests).toBe(0);
  });

  it('active_prefix_depth is the longest held prefix (binary search)', () => {
    const s = new ActiveSequences({ blockSize: 16 });
    s.addRequest({ requestId: 'A', isl: 16 * 5, seqHashes: chain(1, 5) }, 0);
    expect(s.activePrefixDepth(chain(1, 8))).toBe(5);
    expect(s.activePrefixDepth(chain(1, 3))).toBe(3);
    // diverges after 2 blocks: hashes of later blocks differ
    const diverged = chain(1, 6);
    for (let i = 4; i < 12; i += 2) diverged[i] = 99_000 + i;
    expect(s.activePrefixDepth(diverged)).toBe(2);
    expect(s.activePrefixDepth(chain(2, 4))).toBe(0);
    expect(s.activePrefixDepth(null)).toBe(0);
    // hi word matters: same lo, different hi → no match
    expect(s.activePrefixDepth(chain(1, 3, 0x80000000))).toBe(0);
  });

  it('assume_kv_reuse = false books fresh random ids per full block (no dedupe)', () => {
    const s = new ActiveSequences({ blockSize: 16, assumeKvReuse: false, randomU32: counter() });
    // isl 40 → floor(40/16) = 2 blocks each; same prompt twice → 4 distinct blocks
    s.addRequest({ requestId: 'A', isl: 40, seqHashes: chain(1, 2) }, 0);
    s.addRequest({ requestId: 'B', isl: 40, seqHashes: chain(1, 2) }, 0);
    expect(s.activeDecodeBlocks).toBe(4);
    // ids drawn as (lo, hi) = (1, 2), (3, 4) for A
    expect([...s.requestBlocks('A')!]).toEqual([1, 2, 3, 4]);
    expect(s.activePrefixDepth(chain(1, 2))).toBe(0);
  });

  it('per-request assume_kv_reuse override', () => {
    const s = new ActiveSequences({ blockSize: 16, randomU32: counter(100) });
    s.addRequest({ requestId: 'A', isl: 32, seqHashes: chain(1, 2) }, 0);
    s.addRequest({ requestId: 'B', isl: 32, seqHashes: chain(1, 2), assumeKvReuse: false }, 0);
    // A: 2 shared-able hashes; B: 2 random ones → 4
    expect(s.activeDecodeBlocks).toBe(4);
    expect([...s.requestBlocks('B')!]).toEqual([100, 101, 102, 103]);
  });

  it('active-block tracking off books no blocks and needs no hashes', () => {
    const s = new ActiveSequences({ blockSize: 16, trackActiveBlocks: false });
    s.addRequest({ requestId: 'A', isl: 64 }, 0);
    expect(s.activeDecodeBlocks).toBe(0);
    expect(s.activeRequests).toBe(1);
    expect(s.activePrefillTokens(0)).toBe(64);
  });
});

describe('ActiveSequences: prefill tokens', () => {
  it('books isl − min(cached, isl), skips 0, clears on first token', () => {
    const s = new ActiveSequences({ blockSize: 16, trackActiveBlocks: false });
    s.addRequest({ requestId: 'A', isl: 100, cachedTokens: 40 }, 0); // 60
    s.addRequest({ requestId: 'B', isl: 50, cachedTokens: 80 }, 0); // 50 − min(80, 50) = 0, skipped
    s.addRequest({ requestId: 'C', isl: 30 }, 0); // 30
    expect(s.activePrefillTokens(0)).toBe(90);
    expect(s.pendingPrefills).toBe(2);
    expect(s.markPrefillCompleted('A', 1)).toBe(true);
    expect(s.activePrefillTokens(1)).toBe(30);
    // B never had an entry; marking it is harmless
    expect(s.markPrefillCompleted('B', 1)).toBe(true);
    expect(s.markPrefillCompleted('nope', 1)).toBe(false);
    s.free('C', 2);
    expect(s.activePrefillTokens(2)).toBe(0);
    expect(s.activeRequests).toBe(2);
  });

  it('prefill tracking off (global or per request)', () => {
    const off = new ActiveSequences({ blockSize: 16, trackActiveBlocks: false, trackPrefillTokens: false });
    off.addRequest({ requestId: 'A', isl: 100 }, 0);
    expect(off.activePrefillTokens(0)).toBe(0);
    off.addRequest({ requestId: 'B', isl: 100, trackPrefillTokens: true }, 0);
    expect(off.activePrefillTokens(0)).toBe(100);
  });

  it('AIC: only the anchor decays; the next oldest anchors when it leaves (fake clock)', () => {
    const clock = new VirtualClock(0);
    const s = new ActiveSequences({ blockSize: 16, trackActiveBlocks: false });
    s.addRequest({ requestId: 'r1', isl: 1000, expectedPrefillDurationMs: 1000 }, clock.now());
    clock.advanceTo(100);
    s.addRequest({ requestId: 'r2', isl: 500, expectedPrefillDurationMs: 400 }, clock.now());
    clock.advanceTo(250);
    // anchor r1 since 0: ceil(1000 · (1 − 250/1000)) = 750; total = 1500 − 1000 + 750 = 1250
    expect(s.activePrefillTokens(clock.now())).toBe(1250);
    clock.advanceTo(1200);
    // r1 overdue: clamp → 0; r2 does not decay while it waits: 500
    expect(s.activePrefillTokens(clock.now())).toBe(500);
    clock.advanceTo(1300);
    s.markPrefillCompleted('r1', clock.now());
    // r2 anchored at 1300: still 500 right now
    expect(s.activePrefillTokens(clock.now())).toBe(500);
    clock.advanceTo(1400);
    // ceil(500 · (1 − 100/400)) = 375
    expect(s.activePrefillTokens(clock.now())).toBe(375);
    clock.advanceTo(1700);
    expect(s.activePrefillTokens(clock.now())).toBe(0);
  });

  it('AIC: ceil of the remaining fraction; duration 0 → 0; no duration → static', () => {
    const t = new PrefillTracker();
    const a = prefillNode(3, 1000);
    t.add(a, 0);
    // 3 · (1 − 500/1000) = 1.5 → 2
    expect(t.activeTokens(500)).toBe(2);
    t.remove(a, 600);
    const z = prefillNode(7, 0);
    t.add(z, 600);
    expect(t.activeTokens(600)).toBe(0);
    t.remove(z, 600);
    const st = prefillNode(9, null);
    t.add(st, 600);
    expect(t.activeTokens(1e9)).toBe(9);
    expect(t.sum).toBe(9);
  });

  it('removing a non-anchor entry keeps the anchor time', () => {
    const t = new PrefillTracker();
    const a = prefillNode(100, 1000);
    const b = prefillNode(50, 1000);
    const c = prefillNode(20, null);
    t.add(a, 0);
    t.add(b, 10);
    t.add(c, 20);
    t.remove(b, 400);
    // anchor a since 0: ceil(100 · 0.5) = 50; + c 20 = 70
    expect(t.activeTokens(500)).toBe(70);
    expect(t.anchoredSince).toBe(0);
  });
});

describe('ActiveSequences: output blocks (§9.3)', () => {
  it('grows to ceil((isl + out)/bs) blocks and decays blocks held only by this request', () => {
    const s = new ActiveSequences({ blockSize: 16, trackOutputBlocks: true, randomU32: counter(500) });
    // isl 20: one full prompt block h1 shared with B; B also has h2
    s.addRequest({ requestId: 'A', isl: 20, seqHashes: pairs([1, 0]), expectedOutputTokens: 26 }, 0);
    s.addRequest({ requestId: 'B', isl: 32, seqHashes: pairs([1, 0], [2, 0]) }, 0);
    expect(s.activeDecodeBlocks).toBe(2);
    // 1 output token: ceil(21/16) = 2 → one output block; frac = 1 − 1/26
    s.addOutputTokens('A', 1);
    expect(s.uniqueBlocks).toBe(3);
    // 3 − (1/26) = 2.96 → 3
    expect(s.activeDecodeBlocks).toBe(3);
    // 13 tokens: ceil(33/16) = 3 → a second output block; frac = 1 − 13/26 = 0.5 on A's two
    // output blocks (refcount 1) but not on h1 (refcount 2): 4 − 2·0.5 = 3
    s.addOutputTokens('A', 13);
    expect(s.uniqueBlocks).toBe(4);
    expect(s.fractionOf(1, 0)).toBeUndefined();
    const out = s.requestBlocks('A')!;
    expect(out.length).toBe(6);
    expect(s.fractionOf(out[2], out[3])).toBe(0.5);
    expect(s.activeDecodeBlocks).toBe(3);
    // B leaves: h1 now refcount 1 and gets A's next fraction; 39 tokens: ceil(59/16) = 4 blocks,
    // frac = max(0, 1 − 39/26) = 0 → all four of A's blocks count 0 → 0
    s.free('B', 1);
    s.addOutputTokens('A', 39);
    expect(s.uniqueBlocks).toBe(4);
    expect(s.fractionOf(1, 0)).toBe(0);
    expect(s.activeDecodeBlocks).toBe(0);
    s.free('A', 2);
    expect(s.uniqueBlocks).toBe(0);
    expect(s.activeDecodeBlocks).toBe(0);
  });

  it('without osl the output blocks count in full; off by default', () => {
    const s = new ActiveSequences({ blockSize: 16, trackOutputBlocks: true, randomU32: counter() });
    s.addRequest({ requestId: 'A', isl: 16, seqHashes: pairs([1, 0]) }, 0);
    // 40 tokens: ceil(56/16) = 4
    s.addOutputTokens('A', 40);
    expect(s.activeDecodeBlocks).toBe(4);
    const off = new ActiveSequences({ blockSize: 16 });
    off.addRequest({ requestId: 'A', isl: 16, seqHashes: pairs([1, 0]) }, 0);
    expect(off.addOutputTokens('A', 40)).toBe(true);
    expect(off.activeDecodeBlocks).toBe(1);
    expect(off.addOutputTokens('missing', 1)).toBe(false);
  });
});

describe('ActiveSequences: expiry', () => {
  it('expireOlderThan force-frees requests strictly older than the limit', () => {
    const s = new ActiveSequences({ blockSize: 16 });
    s.addRequest({ requestId: 'old', isl: 16, seqHashes: chain(1, 1) }, 0);
    s.addRequest({ requestId: 'young', isl: 16, seqHashes: chain(2, 1) }, 200_000);
    // age exactly 300 000 is not older than 300 000
    expect(s.expireOlderThan(300_000, 300_000)).toEqual([]);
    expect(s.expireOlderThan(300_001, 300_000)).toEqual(['old']);
    expect(s.has('old')).toBe(false);
    expect(s.activeDecodeBlocks).toBe(1);
  });

  it('lazy expiry on add runs at most every 30 s', () => {
    const expired: string[] = [];
    const s = new ActiveSequences({ blockSize: 16, trackActiveBlocks: false });
    s.onExpired = (id) => expired.push(id);
    s.addRequest({ requestId: 'r1', isl: 1 }, 0); // check at 0 (nothing)
    s.addRequest({ requestId: 'r2', isl: 1 }, 29_999); // 29 999 since last check: none
    s.addRequest({ requestId: 'r3', isl: 1 }, 300_001); // check: r1 is 300 001 old → expired
    expect(expired).toEqual(['r1']);
    // at 330 000 r2 is 300 001 old, but only 29 999 ms passed since the check at 300 001
    expect(s.maybeExpire(330_000)).toEqual([]);
    expect(s.has('r2')).toBe(true);
    expect(s.maybeExpire(330_001)).toEqual(['r2']);
    expect(expired).toEqual(['r1', 'r2']);
    expect(s.activeRequests).toBe(1);
  });
});

describe('ActiveSequences: input checks', () => {
  it('duplicate ids are ignored without change', () => {
    const s = new ActiveSequences({ blockSize: 16 });
    expect(s.addRequest({ requestId: 'A', isl: 32, seqHashes: chain(1, 2) }, 0)).toBe(true);
    expect(s.addRequest({ requestId: 'A', isl: 999, seqHashes: chain(2, 2) }, 0)).toBe(false);
    expect(s.activeDecodeBlocks).toBe(2);
    expect(s.activePrefillTokens(0)).toBe(32);
  });

  it('bad input names the field and changes nothing', () => {
    const s = new ActiveSequences({ blockSize: 16 });
    const base: AddRequestInput = { requestId: 'A', isl: 32, seqHashes: chain(1, 2) };
    expect(field(() => s.addRequest({ ...base, seqHashes: Uint32Array.of(1, 2, 3) }, 0))).toBe('seqHashes');
    expect(field(() => s.addRequest({ ...base, seqHashes: null }, 0))).toBe('seqHashes');
    expect(field(() => s.addRequest({ ...base, requestId: '' }, 0))).toBe('requestId');
    expect(field(() => s.addRequest({ ...base, isl: -1 }, 0))).toBe('isl');
    expect(field(() => s.addRequest({ ...base, cachedTokens: NaN }, 0))).toBe('cachedTokens');
    expect(field(() => s.addRequest({ ...base, expectedOutputTokens: 1.5 }, 0))).toBe('expectedOutputTokens');
    expect(field(() => s.addRequest({ ...base, expectedPrefillDurationMs: -1 }, 0))).toBe(
      'expectedPrefillDurationMs',
    );
    expect(field(() => s.addRequest(base, NaN))).toBe('now');
    expect(field(() => s.addRequest({ ...base, assumeKvReuse: false }, 0))).toBe('randomU32');
    expect(s.activeRequests).toBe(0);
    expect(s.uniqueBlocks).toBe(0);
    expect(field(() => new ActiveSequences({ blockSize: 0 }))).toBe('blockSize');
  });
});

describe('MultiWorkerSequences', () => {
  it('reproduces the §8.9 loads and scores them: logits 22 / 24 / 27', () => {
    const m = new MultiWorkerSequences({ blockSize: 16 });
    const prompt = chain(7, 10); // the new request: isl 160, 10 blocks
    // W1: a live request whose first 8 blocks are the new prompt's prefix, 12 blocks in all;
    // isl 192 with 96 cached → 96 prefill tokens
    const w1Seq = Uint32Array.from([...prompt.subarray(0, 16), ...chain(8, 4)]);
    m.addRequest(w(1), { requestId: 'w1', isl: 192, cachedTokens: 96, seqHashes: w1Seq }, 0);
    // W2: 4 unrelated blocks, prefill done
    m.addRequest(w(2), { requestId: 'w2', isl: 64, seqHashes: chain(9, 4) }, 0);
    m.markPrefillCompleted('w2', 0);
    // W3: 9 unrelated blocks; isl 144 with 112 cached → 32 prefill tokens
    m.addRequest(w(3), { requestId: 'w3', isl: 144, cachedTokens: 112, seqHashes: chain(10, 9) }, 0);
    const batch = new CandidateBatch().reset(3);
    batch.workers.splice(0, 3, w(1), w(2), w(3));
    batch.deviceBlocks.set([8, 0, 4]);
    m.fillLoads(batch, prompt, 0);
    expect([...batch.activePrefillTokens.subarray(0, 3)]).toEqual([96, 0, 32]);
    expect([...batch.activeDecodeBlocks.subarray(0, 3)]).toEqual([12, 4, 9]);
    expect([...batch.activePrefixDepth.subarray(0, 3)]).toEqual([8, 0, 0]);
    expect([...batch.activeRequests.subarray(0, 3)]).toEqual([1, 1, 1]);
    const r = computeCosts(batch, { isl: 160, blockSize: 16 }, DEFAULT_COST_PARAMS);
    expect([...r.logit.subarray(0, 3)]).toEqual([22, 24, 27]);
  });

  it('routes ids to ranks, ignores duplicates across ranks, zero loads for unknown ranks', () => {
    const changes: string[] = [];
    const m = new MultiWorkerSequences({
      blockSize: 16,
      onChange: (x) => changes.push(`${x.worker_id}:${x.dp_rank}`),
    });
    m.addWorker(5n, 0, 2);
    expect([...m.workers()].length).toBe(2);
    expect(m.addRequest(w(5, 1), { requestId: 'a', isl: 32, seqHashes: chain(1, 2) }, 0)).toBe(true);
    expect(m.addRequest(w(5, 0), { requestId: 'a', isl: 32, seqHashes: chain(1, 2) }, 0)).toBe(false);
    expect(m.load(w(5, 1), 0)).toEqual({
      active_prefill_tokens: 32,
      active_decode_blocks: 2,
      active_requests: 1,
    });
    expect(m.load(w(5, 0), 0)).toEqual({
      active_prefill_tokens: 0,
      active_decode_blocks: 0,
      active_requests: 0,
    });
    expect(m.load(w(6), 0).active_requests).toBe(0);
    expect(changes).toEqual(['5:1']);
    m.markPrefillCompleted('a', 1);
    expect(m.load(w(5, 1), 1).active_prefill_tokens).toBe(0);
    expect(field(() => m.free('a', NaN))).toBe('now');
    expect(m.has('a')).toBe(true);
    expect(m.free('a', 2)).toBe(true);
    expect(m.free('a', 2)).toBe(false);
    expect(changes).toEqual(['5:1', '5:1', '5:1']);
    const b = new CandidateBatch().reset(1);
    b.workers[0] = w(77);
    b.activeDecodeBlocks[0] = 99;
    m.fillLoads(b, null, 0);
    expect(b.activeDecodeBlocks[0]).toBe(0);
  });

  it('removeWorker drops its ranks and requests; expiry clears the id map', () => {
    const m = new MultiWorkerSequences({ blockSize: 16, trackActiveBlocks: false });
    m.addRequest(w(1, 0), { requestId: 'a', isl: 10 }, 0);
    m.addRequest(w(1, 1), { requestId: 'b', isl: 10 }, 0);
    m.addRequest(w(2), { requestId: 'c', isl: 10 }, 0);
    expect(m.removeWorker(1n).sort()).toEqual(['a', 'b']);
    expect(m.has('a')).toBe(false);
    expect(m.free('b', 1)).toBe(false);
    expect(m.activeRequestCount).toBe(1);
    expect(m.expireOlderThan(400_000, 300_000)).toEqual(['c']);
    expect(m.has('c')).toBe(false);
    expect(m.activeRequestCount).toBe(0);
    // a bad booking on a new rank creates nothing
    expect(field(() => m.addRequest(w(3), { requestId: '', isl: 1 }, 0))).toBe('requestId');
    expect([...m.workers()].some((x) => x.worker_id === 3n)).toBe(false);
  });
});

describe('property: random lifecycles across ranks (seeded)', () => {
  interface Live {
    rank: number;
    blocks: string[];
    isl: number;
    osl: number | null;
    out: number;
    prefill: number;
  }

  for (const seed of [1, 2, 3, 4, 5]) {
    it(`seed ${seed}: loads match a brute-force recount at every step and drain to zero`, () => {
      const rng = new Rng(seed);
      const bs = 16;
      const ranks = [w(1, 0), w(1, 1), w(2, 0)];
      const m = new MultiWorkerSequences({
        blockSize: bs,
        trackOutputBlocks: true,
        randomU32: () => rng.u32(),
      });
      // brute-force model per rank
      const counts = ranks.map(() => new Map<string, number>());
      const fracs = ranks.map(() => new Map<string, number>());
      const live = new Map<string, Live>();
      let nextId = 0;
      const key = (a: Uint32Array, i: number) => `${a[i]}:${a[i + 1]}`;

      // Each block's deficit 1 − f in whole 2^−24 units, as the contract says; summing integers
      // makes the recount independent of order.
      const recount = (r: number) => {
        let units = 0;
        for (const [k, f] of fracs[r]) if (counts[r].has(k)) units += Math.round((1 - f) * 2 ** 24);
        return Math.round(counts[r].size - units / 2 ** 24);
      };
      const check = (full: boolean) => {
        ranks.forEach((rk, r) => {
          const load = m.load(rk, 0);
          expect(load.active_decode_blocks).toBe(recount(r));
          let prefill = 0;
          let n = 0;
          for (const l of live.values())
            if (l.rank === r) {
              prefill += l.prefill;
              n++;
            }
          expect(load.active_prefill_tokens).toBe(prefill);
          expect(load.active_requests).toBe(n);
          const seq = m.rank(rk);
          expect(seq?.uniqueBlocks ?? 0).toBe(counts[r].size);
          if (!full) return;
          const wrong: string[] = [];
          for (const [k, c] of counts[r]) {
            const [lo, hi] = k.split(':').map(Number);
            if (seq!.refcount(lo, hi) !== c) wrong.push(k);
          }
          expect(wrong).toEqual([]);
        });
      };
      const addRef = (r: number, k: string) => counts[r].set(k, (counts[r].get(k) ?? 0) + 1);
      const dropRef = (r: number, k: string) => {
        const c = counts[r].get(k)! - 1;
        if (c === 0) {
          counts[r].delete(k);
          fracs[r].delete(k);
        } else counts[r].set(k, c);
      };

      for (let step = 0; step < 1500; step++) {
        const op = rng.next();
        const ids = [...live.keys()];
        if (op < 0.3 || ids.length === 0) {
          const r = rng.int(0, ranks.length - 1);
          const isl = rng.int(0, 120);
          const full = Math.floor(isl / bs);
          // Prompts from 3 families share a prefix of random length, then diverge per request;
          // high words above 2^31 exercise the unsigned path.
          const family = rng.int(0, 2);
          const shared = rng.int(0, full);
          const id = `q${nextId++}`;
          const seqHashes = new Uint32Array(2 * full);
          for (let k = 0; k < full; k++) {
            seqHashes[2 * k] = family * 1000 + k;
            seqHashes[2 * k + 1] = k < shared ? 0x80000000 : (0x80000000 | nextId) >>> 0;
          }
          const reuse = rng.bool(0.7);
          const cached = rng.int(0, isl + 20);
          const osl = rng.bool(0.5) ? rng.int(0, 60) : null;
          expect(
            m.addRequest(
              ranks[r],
              {
                requestId: id,
                isl,
                cachedTokens: cached,
                seqHashes,
                expectedOutputTokens: osl,
                assumeKvReuse: reuse,
              },
              0,
            ),
          ).toBe(true);
          const held = m.rank(ranks[r])!.requestBlocks(id)!;
          // Reuse → exactly the given hashes; else fresh ids, one per full block
          if (reuse) expect([...held]).toEqual([...seqHashes]);
          else expect(held.length).toBe(2 * full);
          const blocks: string[] = [];
          for (let i = 0; i < held.length; i += 2) blocks.push(key(held, i));
          blocks.forEach((k) => addRef(r, k));
          live.set(id, { rank: r, blocks, isl, osl, out: 0, prefill: isl - Math.min(cached, isl) });
        } else {
          const id = rng.pick(ids);
          const l = live.get(id)!;
          if (op < 0.45) {
            expect(m.markPrefillCompleted(id, 0)).toBe(true);
            l.prefill = 0;
          } else if (op < 0.75) {
            l.out += rng.int(1, 20);
            expect(m.addOutputTokens(id, l.out, 0)).toBe(true);
            const held = m.rank(ranks[l.rank])!.requestBlocks(id)!;
            // ceil((isl + out)/bs) blocks, or the prompt blocks if that is already more
            expect(held.length / 2).toBe(Math.max(l.blocks.length, Math.ceil((l.isl + l.out) / bs)));
            for (let i = 2 * l.blocks.length; i < held.length; i += 2) {
              const k = key(held, i);
              l.blocks.push(k);
              addRef(l.rank, k);
            }
            if (l.osl !== null) {
              const f = Math.max(0, 1 - l.out / Math.max(l.osl, 1));
              for (const k of l.blocks) if (counts[l.rank].get(k) === 1) fracs[l.rank].set(k, f);
            }
          } else {
            expect(m.free(id, 0)).toBe(true);
            l.blocks.forEach((k) => dropRef(l.rank, k));
            live.delete(id);
          }
        }
        check(step % 25 === 0);
      }
      for (const [id, l] of live) {
        m.free(id, 0);
        l.blocks.forEach((k) => dropRef(l.rank, k));
      }
      live.clear();
      check(true);
      for (const rk of ranks) {
        expect(m.load(rk, 0)).toEqual({
          active_prefill_tokens: 0,
          active_decode_blocks: 0,
          active_requests: 0,
        });
        expect(m.rank(rk)?.uniqueBlocks ?? 0).toBe(0);
        expect(m.rank(rk)?.pendingPrefills ?? 0).toBe(0);
      }
    });
  }
});
