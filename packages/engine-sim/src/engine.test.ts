import { KvrError, localBlockHashes, sequenceHashes } from '@kvrouter/protocols';
import { describe, expect, it } from 'vitest';
import { SimEngine } from './engine.js';
import type { EngineKvEvent, StepResult } from './types.js';

/** `n` distinct token ids starting at `base`. */
const prompt = (n: number, base = 1): Uint32Array => Uint32Array.from({ length: n }, (_, i) => base + i);

function stored(e: EngineKvEvent): {
  parent: bigint | null;
  start: number | null;
  blocks: bigint[];
  tokens: bigint[];
} {
  if (!('stored' in e.data)) throw new Error(`event ${e.event_id} is not a Stored`);
  const s = e.data.stored;
  return {
    parent: s.parent_hash,
    start: s.start_position,
    blocks: s.blocks.map((b) => b.block_hash),
    tokens: s.blocks.map((b) => b.tokens_hash),
  };
}

function removed(e: EngineKvEvent): bigint[] {
  if (!('removed' in e.data)) throw new Error(`event ${e.event_id} is not a Removed`);
  return e.data.removed.block_hashes;
}

function expectSound(eng: SimEngine, rank = 0): void {
  expect(eng.ranks[rank].audit()).toEqual([]);
}

describe('SimEngine: timing of passes', () => {
  it('a lone 1000-token prefill takes 32.1058589 ms and stores its 15 full blocks as one chain', () => {
    const eng = new SimEngine();
    const p = prompt(1000);
    eng.enqueue({ id: 'a', tokenIds: p, maxTokens: 3 }, 0);
    const r = eng.step(0);
    // 4.209989e-7·1000² + 1.518344e-2·1000 + 16.50142 = 0.4209989 + 15.18344 + 16.50142
    expect(r.durationMs).toBeCloseTo(32.1058589, 9);
    expect(r.prefillTokens).toBe(1000);
    expect(r.decodeRequests).toBe(0);
    expect(r.emitted).toHaveLength(1);
    expect(r.emitted[0]).toMatchObject({ requestId: 'a', cachedTokens: 0 });
    expect(r.emitted[0].finishReason).toBeUndefined();
    // 1000 = 15·64 + 40: 15 full blocks and one private partial block.
    const local = localBlockHashes(p, 64);
    const seq = sequenceHashes(local);
    expect(local).toHaveLength(15);
    expect(r.kvEvents).toHaveLength(1);
    expect(r.kvEvents[0].event_id).toBe(1);
    expect(r.kvEvents[0].dp_rank).toBe(0);
    expect(stored(r.kvEvents[0])).toEqual({ parent: null, start: 0, blocks: seq, tokens: local });
    expect(r.load).toEqual({ dp_rank: 0, kv_used_blocks: 16, active_decode_blocks: 16 });
    expect(r.loadChanged).toBe(true);
    expect(eng.cachedBlocks()).toEqual(new Set(seq));
    expectSound(eng);
  });

  it('a decode pass takes decode(u) with u = active blocks / capacity', () => {
    const eng = new SimEngine();
    eng.enqueue({ id: 'a', tokenIds: prompt(1000), maxTokens: 3 }, 0);
    eng.step(0);
    const r = eng.step(40);
    // Still 16 active blocks (token 1000 lands in the partial block 15): u = 16/16384 = 0.0009765625
    // −25.74·u² + 54.01·u + 5.74 = −0.0000245476 + 0.0527441406 + 5.74 = 5.7927195930
    expect(r.durationMs).toBeCloseTo(5.792719593, 8);
    expect(r.prefillTokens).toBe(0);
    expect(r.decodeRequests).toBe(1);
    expect(r.kvEvents).toEqual([]);
    expect(r.loadChanged).toBe(false);
    const last = eng.step(50);
    expect(last.emitted).toHaveLength(1);
    expect(last.emitted[0].finishReason).toBe('length');
    expect(last.emitted[0].cachedTokens).toBeUndefined();
    // Finished: everything goes to the inactive pool, nothing is active.
    expect(eng.load()).toEqual({ dp_rank: 0, kv_used_blocks: 0, active_decode_blocks: 0 });
    expect(eng.ranks[0].pools()).toEqual({ active: 0, inactive: 15, free: 16384 - 15 });
    expect(eng.hasWork()).toBe(false);
    expect(eng.step(60)).toMatchObject({ idle: true, durationMs: 0, emitted: [], kvEvents: [] });
    expectSound(eng);
  });

  it('speedup ratios divide the pass time', () => {
    const eng = new SimEngine({ speedupRatio: 2, decodeSpeedupRatio: 4 });
    eng.enqueue({ id: 'a', tokenIds: prompt(1000), maxTokens: 2 }, 0);
    // 32.1058589 / 2
    expect(eng.step(0).durationMs).toBeCloseTo(16.05292945, 8);
    // 5.792719593 / 4 / 2
    expect(eng.step(20).durationMs).toBeCloseTo(0.724089949, 8);
  });

  it('a prefix-cache hit reduces the prompt tokens to compute', () => {
    const eng = new SimEngine();
    const p = prompt(1000);
    eng.enqueue({ id: 'a', tokenIds: p, maxTokens: 1 }, 0);
    expect(eng.step(0).emitted[0].finishReason).toBe('length');
    eng.enqueue({ id: 'b', tokenIds: p, maxTokens: 1 }, 100);
    const r = eng.step(100);
    // 15 cached blocks = 960 tokens; x = 40: 4.209989e-7·1600 + 1.518344e-2·40 + 16.50142
    //   = 0.00067359824 + 0.6073376 + 16.50142 = 17.10943119824
    expect(r.prefillTokens).toBe(40);
    expect(r.durationMs).toBeCloseTo(17.10943119824, 9);
    expect(r.emitted[0].cachedTokens).toBe(960);
    expect(r.kvEvents).toEqual([]);
    expect(eng.stats()).toMatchObject({ admitted: 2, promptTokens: 2000, cachedTokens: 960 });
  });

  it('a fully cached block-aligned prompt still computes its last block, sharing it without a new Stored', () => {
    const eng = new SimEngine();
    const p = prompt(128);
    eng.enqueue({ id: 'a', tokenIds: p, maxTokens: 1 }, 0);
    expect(eng.step(0).kvEvents).toHaveLength(1);
    eng.enqueue({ id: 'b', tokenIds: p, maxTokens: 2 }, 10);
    const r = eng.step(10);
    // At most floor((128 − 1)/64) = 1 block may hit, so 64 tokens are recomputed.
    expect(r.emitted[0].cachedTokens).toBe(64);
    expect(r.prefillTokens).toBe(64);
    expect(r.kvEvents).toEqual([]);
    expect(r.load.kv_used_blocks).toBe(2);
    expect(eng.ranks[0].pools()).toMatchObject({ active: 2, inactive: 0 });
    expectSound(eng);
  });
});

describe('SimEngine: scheduler', () => {
  it('chunked prefill splits a long prompt at max_num_batched_tokens and continues the chain', () => {
    const eng = new SimEngine();
    const p = prompt(10000);
    eng.enqueue({ id: 'a', tokenIds: p, maxTokens: 2 }, 0);
    const r1 = eng.step(0);
    // 8192² = 67108864; ·4.209989e-7 = 28.2527579; + 1.518344e-2·8192 = 124.38274048; + 16.50142
    expect(r1.prefillTokens).toBe(8192);
    expect(r1.durationMs).toBeCloseTo(169.1369184, 6);
    expect(r1.emitted).toEqual([]);
    const seq = sequenceHashes(localBlockHashes(p, 64));
    // 8192 / 64 = 128 blocks now; 10000 = 156·64 + 16 → 156 full blocks in all.
    expect(seq).toHaveLength(156);
    expect(stored(r1.kvEvents[0]).blocks).toEqual(seq.slice(0, 128));
    const r2 = eng.step(200);
    expect(r2.prefillTokens).toBe(1808);
    // 1808² = 3268864; ·4.209989e-7 = 1.3761882; + 1.518344e-2·1808 = 27.45165952; + 16.50142
    expect(r2.durationMs).toBeCloseTo(45.32926767, 6);
    expect(r2.emitted).toHaveLength(1);
    const s2 = stored(r2.kvEvents[0]);
    expect(s2.parent).toBe(seq[127]);
    expect(s2.start).toBe(128);
    expect(s2.blocks).toEqual(seq.slice(128));
    expect(r2.kvEvents[0].event_id).toBe(2);
  });

  it('a running chunked prefill and a decode share one pass', () => {
    const eng = new SimEngine({ maxNumBatchedTokens: 100 });
    eng.enqueue({ id: 'd', tokenIds: prompt(10), maxTokens: 5 }, 0);
    eng.enqueue({ id: 'p', tokenIds: prompt(300, 1000), maxTokens: 1 }, 0);
    // Pass 1: d's 10 tokens, then p gets the remaining 90.
    const r1 = eng.step(0);
    expect(r1.prefillTokens).toBe(100);
    expect(r1.emitted.map((e) => e.requestId)).toEqual(['d']);
    // Pass 2: d decodes (1 token), p takes 99 more prompt tokens.
    const r2 = eng.step(50);
    expect(r2.decodeRequests).toBe(1);
    expect(r2.prefillTokens).toBe(99);
    // decode u = active blocks / capacity: d holds 1 block, p ceil(189/64) = 3 → u = 4/16384
    const u = 4 / 16384;
    const want = 4.209989e-7 * 99 * 99 + 1.518344e-2 * 99 + 16.50142 + (-25.74 * u * u + 54.01 * u + 5.74);
    expect(r2.durationMs).toBeCloseTo(want, 9);
  });

  it('chunked prefill off: prompts over the budget are rejected, others run whole', () => {
    const eng = new SimEngine({ enableChunkedPrefill: false, maxNumBatchedTokens: 100 });
    expect(() => eng.enqueue({ id: 'x', tokenIds: prompt(101), maxTokens: 1 }, 0)).toThrow(/tokenIds/);
    eng.enqueue({ id: 'a', tokenIds: prompt(60), maxTokens: 1 }, 0);
    eng.enqueue({ id: 'b', tokenIds: prompt(60, 500), maxTokens: 1 }, 0);
    // b does not fit the 40 tokens left and is not split.
    const r1 = eng.step(0);
    expect(r1.prefillTokens).toBe(60);
    expect(r1.emitted.map((e) => e.requestId)).toEqual(['a']);
    expect(eng.step(10).prefillTokens).toBe(60);
  });

  it('max_num_seqs caps the running set; admission is FIFO', () => {
    const eng = new SimEngine({ maxNumSeqs: 2 });
    for (const id of ['a', 'b', 'c'])
      eng.enqueue({ id, tokenIds: prompt(8, id.charCodeAt(0) * 100), maxTokens: 2 }, 0);
    const r1 = eng.step(0);
    expect(r1.emitted.map((e) => e.requestId)).toEqual(['a', 'b']);
    expect(eng.ranks[0].numWaiting).toBe(1);
    const r2 = eng.step(1);
    // a and b finish in this pass; c is admitted only at the next one.
    expect(r2.emitted.map((e) => [e.requestId, e.finishReason])).toEqual([
      ['a', 'length'],
      ['b', 'length'],
    ]);
    expect(eng.step(2).emitted.map((e) => e.requestId)).toEqual(['c']);
  });

  it('promotion of a filled partial block emits Stored with the previous block as parent', () => {
    const eng = new SimEngine({ blockSize: 4, numGpuBlocks: 16 });
    const p = prompt(6);
    eng.enqueue({ id: 'a', tokenIds: p, maxTokens: 4 }, 0);
    const r1 = eng.step(0); // computes tokens 0..5: block 0 full, block 1 partial (2 tokens)
    const tokens = [...p, r1.emitted[0].tokenIds[0]];
    expect(stored(r1.kvEvents[0]).blocks).toHaveLength(1);
    const r2 = eng.step(1); // KV of token 6 → block 1 has 3 tokens
    tokens.push(r2.emitted[0].tokenIds[0]);
    expect(r2.kvEvents).toEqual([]);
    const r3 = eng.step(2); // KV of token 7 → block 1 full → promoted
    tokens.push(r3.emitted[0].tokenIds[0]);
    const local = localBlockHashes(Uint32Array.from(tokens.slice(0, 8)), 4);
    const seq = sequenceHashes(local);
    expect(r3.kvEvents).toHaveLength(1);
    expect(stored(r3.kvEvents[0])).toEqual({
      parent: seq[0],
      start: 1,
      blocks: [seq[1]],
      tokens: [local[1]],
    });
    expect(r3.kvEvents[0].event_id).toBe(2);
    expectSound(eng);
  });

  it('a partial block that fills to content already cached is shared, not stored again', () => {
    // vocabSize 2: every generated token is 1, so a and b produce identical sequences.
    const eng = new SimEngine({ blockSize: 4, numGpuBlocks: 16, vocabSize: 2 });
    const p = prompt(5);
    eng.enqueue({ id: 'a', tokenIds: p, maxTokens: 8 }, 0);
    eng.enqueue({ id: 'b', tokenIds: p, maxTokens: 8 }, 0);
    // Pass 1: a stores block 0 and keeps a partial block 1; b hits block 0 (floor(4/4) = 1 block) and
    // gets its own partial block 1: 3 active blocks.
    const r1 = eng.step(0);
    expect(r1.emitted.map((e) => e.cachedTokens)).toEqual([0, 4]);
    expect(r1.load.kv_used_blocks).toBe(3);
    expect(eng.step(1).kvEvents).toEqual([]); // KV tokens 0..5
    expect(eng.step(2).kvEvents).toEqual([]); // 0..6
    // Pass 4: KV token 7 fills block 1 = [p4, 1, 1, 1] for both. a stores it; b's copy dedups onto it.
    const r4 = eng.step(3);
    const [, s1] = sequenceHashes(localBlockHashes(Uint32Array.from([...p.slice(0, 5), 1, 1, 1]), 4));
    expect(r4.kvEvents).toHaveLength(1);
    expect(stored(r4.kvEvents[0]).blocks).toEqual([s1]);
    expect(r4.load.kv_used_blocks).toBe(2);
    expectSound(eng);
  });

  it('eviction is LRU, deeper blocks first, and emits Removed before the Stored that needed the room', () => {
    const eng = new SimEngine({ blockSize: 4, numGpuBlocks: 4 });
    const pa = prompt(8, 100);
    const pb = prompt(12, 200);
    const pc = Uint32Array.from([...pa.slice(0, 4), 300, 301, 302, 303, 304]);
    const [a0, a1] = sequenceHashes(localBlockHashes(pa, 4));
    const [b0, b1, b2] = sequenceHashes(localBlockHashes(pb, 4));
    const [, c1] = sequenceHashes(localBlockHashes(pc, 4));

    eng.enqueue({ id: 'a', tokenIds: pa, maxTokens: 1 }, 0);
    expect(stored(eng.step(0).kvEvents[0]).blocks).toEqual([a0, a1]);
    // a finished: released tail first, LRU = [a1, a0].
    eng.enqueue({ id: 'b', tokenIds: pb, maxTokens: 1 }, 1);
    const rb = eng.step(1);
    // 3 blocks needed, 2 free → evict the LRU head a1.
    expect(rb.kvEvents.map((e) => e.event_id)).toEqual([2, 3]);
    expect(removed(rb.kvEvents[0])).toEqual([a1]);
    expect(stored(rb.kvEvents[1])).toEqual(expect.objectContaining({ parent: null, blocks: [b0, b1, b2] }));
    // LRU = [a0, b2, b1, b0]. c hits a0 (inactive → active), then needs 2 slots: evicts b2 and b1.
    eng.enqueue({ id: 'c', tokenIds: pc, maxTokens: 1 }, 2);
    const rc = eng.step(2);
    expect(rc.emitted[0].cachedTokens).toBe(4);
    expect(rc.prefillTokens).toBe(5);
    expect(removed(rc.kvEvents[0])).toEqual([b2, b1]);
    expect(stored(rc.kvEvents[1])).toEqual(expect.objectContaining({ parent: a0, start: 1, blocks: [c1] }));
    expect(eng.cachedBlocks()).toEqual(new Set([a0, b0, c1]));
    expectSound(eng);
  });

  it('prefix caching off: no sharing, no cached pool, no events', () => {
    const eng = new SimEngine({ enablePrefixCaching: false, blockSize: 4, numGpuBlocks: 8 });
    const p = prompt(9);
    eng.enqueue({ id: 'a', tokenIds: p, maxTokens: 2 }, 0);
    eng.enqueue({ id: 'b', tokenIds: p, maxTokens: 2 }, 0);
    const r = eng.step(0);
    expect(r.prefillTokens).toBe(18);
    expect(r.emitted.map((e) => e.cachedTokens)).toEqual([0, 0]);
    // Each holds ceil(9/4) = 3 private blocks.
    expect(r.load.kv_used_blocks).toBe(6);
    expect(r.kvEvents).toEqual([]);
    expect(eng.cachedBlocks()).toEqual(new Set());
    expectSound(eng);
    expect(eng.step(1).kvEvents).toEqual([]);
    expect(eng.ranks[0].pools()).toEqual({ active: 0, inactive: 0, free: 8 });
  });

  it('two identical prompts admitted in one pass share blocks (caching at allocation)', () => {
    const eng = new SimEngine({ blockSize: 4, numGpuBlocks: 16 });
    const p = prompt(9);
    eng.enqueue({ id: 'a', tokenIds: p, maxTokens: 2 }, 0);
    eng.enqueue({ id: 'b', tokenIds: p, maxTokens: 2 }, 0);
    const r = eng.step(0);
    // b hits a's two just-cached blocks: 8 cached tokens, computes 1.
    expect(r.emitted.map((e) => e.cachedTokens)).toEqual([0, 8]);
    expect(r.prefillTokens).toBe(10);
    // 2 shared full blocks + 2 private partial blocks
    expect(r.load.kv_used_blocks).toBe(4);
    expect(r.kvEvents).toHaveLength(1);
    expectSound(eng);
  });
});

describe('SimEngine: preemption', () => {
  /**
   * bs = 4, 4 blocks, caching off. a and b: 4-token prompts, 9 output tokens. Each needs block 0 at
   * prefill, block 1 from KV token 4 (pass 2) and block 2 from KV token 8 (pass 6): at pass 6 the
   * pool (4 blocks) cannot give both their third block.
   */
  function run(mode: 'lifo' | 'fifo'): { eng: SimEngine; passes: StepResult[] } {
    const eng = new SimEngine({
      blockSize: 4,
      numGpuBlocks: 4,
      enablePrefixCaching: false,
      preemptionMode: mode,
    });
    eng.enqueue({ id: 'a', tokenIds: prompt(4, 10), maxTokens: 9 }, 0);
    eng.enqueue({ id: 'b', tokenIds: prompt(4, 20), maxTokens: 9 }, 0);
    const passes: StepResult[] = [];
    for (let t = 0; t < 6; t++) passes.push(eng.step(t));
    return { eng, passes };
  }

  it('lifo preempts the most recently admitted request, which is recomputed later', () => {
    const { eng, passes } = run('lifo');
    for (let k = 0; k < 5; k++) expect(passes[k].emitted.map((e) => e.requestId)).toEqual(['a', 'b']);
    expect(passes[4].load.kv_used_blocks).toBe(4);
    const p6 = passes[5];
    expect(p6.preempted).toBe(1);
    expect(p6.emitted.map((e) => e.requestId)).toEqual(['a']);
    // a holds 3 blocks; b's 2 were released.
    expect(p6.load.kv_used_blocks).toBe(3);
    expect(eng.ranks[0].numWaiting).toBe(1);
    expectSound(eng);
    // b needs ceil(9/4) = 3 blocks to recompute its 4 + 5 tokens; only 1 is free while a runs.
    // a emits tokens 7, 8, 9 in passes 7–9 and finishes; b is readmitted in pass 10.
    for (let t = 6; t < 9; t++) expect(eng.step(t).emitted.map((e) => e.requestId)).toEqual(['a']);
    const p10 = eng.step(9);
    expect(p10.prefillTokens).toBe(9);
    expect(p10.emitted).toEqual([{ requestId: 'b', tokenIds: [expect.any(Number)] }]);
    let bTokens = 6;
    for (let t = 10; eng.hasWork(); t++) bTokens += eng.step(t).emitted.length;
    expect(bTokens).toBe(9);
    // The recompute is not counted as a second admission.
    expect(eng.stats()).toMatchObject({ admitted: 2, promptTokens: 8, preemptions: 1, finished: 2 });
    expect(eng.ranks[0].pools()).toEqual({ active: 0, inactive: 0, free: 4 });
  });

  it('fifo preempts the oldest running request', () => {
    const { eng, passes } = run('fifo');
    const p6 = passes[5];
    expect(p6.preempted).toBe(1);
    // a (oldest) needed the block and was the victim itself; b then got a's freed blocks.
    expect(p6.emitted.map((e) => e.requestId)).toEqual(['b']);
    expect(p6.load.kv_used_blocks).toBe(3);
    expectSound(eng);
  });

  it('a fifo victim already scheduled in the pass is undone and the scan goes on', () => {
    // bs 4, 2 blocks. a: 2-token prompt, 3 outputs (needs 1 block); b: 4-token prompt, 4 outputs (2 blocks).
    const eng = new SimEngine({
      blockSize: 4,
      numGpuBlocks: 2,
      enablePrefixCaching: false,
      preemptionMode: 'fifo',
    });
    eng.enqueue({ id: 'a', tokenIds: prompt(2, 10), maxTokens: 3 }, 0);
    eng.enqueue({ id: 'b', tokenIds: prompt(4, 20), maxTokens: 4 }, 0);
    // Pass 1: a block 0 (partial), b block 0 (full): pool full.
    expect(eng.step(0).emitted.map((e) => e.requestId)).toEqual(['a', 'b']);
    // Pass 2: a is scheduled (KV token 2, same block); b's KV token 4 needs block 1: the oldest, a, is
    // the victim although already scheduled; b must still be served after the index shift.
    const p2 = eng.step(1);
    expect(p2.preempted).toBe(1);
    expect(p2.emitted.map((e) => e.requestId)).toEqual(['b']);
    expect(p2.decodeRequests).toBe(1);
    expect(p2.load.kv_used_blocks).toBe(2);
    expectSound(eng);
    // b: outputs 3 and 4 in passes 3–4 (a cannot get a block meanwhile), then a recomputes 2 + 1 tokens.
    expect(eng.step(2).emitted.map((e) => e.requestId)).toEqual(['b']);
    expect(eng.step(3).emitted.map((e) => [e.requestId, e.finishReason])).toEqual([['b', 'length']]);
    const p5 = eng.step(4);
    expect(p5.prefillTokens).toBe(3);
    expect(p5.emitted.map((e) => e.requestId)).toEqual(['a']);
  });
});

describe('SimEngine: API', () => {
  it('rejects bad requests naming the field, without changing state', () => {
    const eng = new SimEngine({ blockSize: 4, numGpuBlocks: 4 });
    const bad: [Record<string, unknown>, string][] = [
      [{ id: '', tokenIds: prompt(4), maxTokens: 1 }, 'id'],
      [{ id: 'x', tokenIds: [], maxTokens: 1 }, 'tokenIds'],
      [{ id: 'x', tokenIds: [1, -2], maxTokens: 1 }, 'tokenIds[1]'],
      [{ id: 'x', tokenIds: 'abc', maxTokens: 1 }, 'tokenIds'],
      [{ id: 'x', tokenIds: prompt(4), maxTokens: 0 }, 'maxTokens'],
      [{ id: 'x', tokenIds: prompt(4), maxTokens: 1.5 }, 'maxTokens'],
      // 17 tokens need 5 blocks of 4
      [{ id: 'x', tokenIds: prompt(17), maxTokens: 1 }, 'tokenIds'],
      // 12 + 5 − 1 = 16 KV tokens fit; 12 + 6 − 1 = 17 do not
      [{ id: 'x', tokenIds: prompt(12), maxTokens: 6 }, 'maxTokens'],
      [{ id: 'x', tokenIds: prompt(4), maxTokens: 1, dpRank: 1 }, 'dpRank'],
      [{ id: 'x', tokenIds: prompt(4), maxTokens: 1, loraName: 5 }, 'loraName'],
    ];
    for (const [req, field] of bad) {
      let err: unknown;
      try {
        eng.enqueue(req as never, 0);
      } catch (e) {
        err = e;
      }
      expect(err, field).toBeInstanceOf(KvrError);
      expect((err as KvrError).detail, field).toEqual({ field });
    }
    expect(eng.hasWork()).toBe(false);
    eng.enqueue({ id: 'x', tokenIds: prompt(12), maxTokens: 5 }, 0);
    expect(() => eng.enqueue({ id: 'x', tokenIds: prompt(4), maxTokens: 1 }, 0)).toThrow(/duplicate/);
    expect(() => eng.step(-1)).toThrow(KvrError);
    expect(() => eng.step(Number.NaN)).toThrow(/now/);
    expect(eng.step(0).emitted).toHaveLength(1);
  });

  it('cancel frees a running request at once and drops a waiting one', () => {
    const eng = new SimEngine({ blockSize: 4, numGpuBlocks: 8, maxNumSeqs: 1 });
    eng.enqueue({ id: 'a', tokenIds: prompt(9), maxTokens: 10 }, 0);
    eng.enqueue({ id: 'b', tokenIds: prompt(9, 50), maxTokens: 10 }, 0);
    eng.step(0);
    expect(eng.load().kv_used_blocks).toBe(3);
    expect(eng.cancel('b')).toBe(true);
    expect(eng.cancel('a')).toBe(true);
    expect(eng.cancel('a')).toBe(false);
    expect(eng.load().kv_used_blocks).toBe(0);
    // a's 2 full blocks stay cached.
    expect(eng.ranks[0].pools()).toEqual({ active: 0, inactive: 2, free: 6 });
    expect(eng.hasWork()).toBe(false);
    expect(eng.stats().cancelled).toBe(2);
    expectSound(eng);
  });

  it('data-parallel ranks are independent: own pools, own event ids, own timelines', () => {
    const eng = new SimEngine({ dataParallelSize: 2, blockSize: 4 });
    const p = prompt(8);
    eng.enqueue({ id: 'a', tokenIds: p, maxTokens: 1, dpRank: 1 }, 0);
    expect(eng.hasWork(0)).toBe(false);
    const r = eng.step(0, 1);
    expect(r.dpRank).toBe(1);
    expect(r.kvEvents.map((e) => [e.event_id, e.dp_rank])).toEqual([[1, 1]]);
    expect(eng.cachedBlocks(0).size).toBe(0);
    expect(eng.cachedBlocks(1).size).toBe(2);
    // Same prompt on rank 0: no hit there, its own event id 1.
    eng.enqueue({ id: 'b', tokenIds: p, maxTokens: 1, dpRank: 0 }, 0);
    const r0 = eng.step(0, 0);
    expect(r0.emitted[0].cachedTokens).toBe(0);
    expect(r0.kvEvents.map((e) => [e.event_id, e.dp_rank])).toEqual([[1, 0]]);
    // A live id is unique across ranks.
    eng.enqueue({ id: 'c', tokenIds: p, maxTokens: 5, dpRank: 0 }, 0);
    expect(() => eng.enqueue({ id: 'c', tokenIds: p, maxTokens: 1, dpRank: 1 }, 0)).toThrow(/duplicate/);
    expect(eng.cancel('c')).toBe(true);
  });

  it('LoRA requests hash with the adapter seed and do not share cache with the base model', () => {
    const eng = new SimEngine({ blockSize: 4 });
    const p = prompt(9);
    eng.enqueue({ id: 'a', tokenIds: p, maxTokens: 1 }, 0);
    eng.step(0);
    eng.enqueue({ id: 'b', tokenIds: p, maxTokens: 1, loraName: 'my-lora' }, 1);
    const r = eng.step(1);
    expect(r.emitted[0].cachedTokens).toBe(0);
    const local = localBlockHashes(p, 4, { loraName: 'my-lora' });
    expect(stored(r.kvEvents[0])).toEqual({
      parent: null,
      start: 0,
      blocks: sequenceHashes(local),
      tokens: local,
    });
  });

  it('generated tokens are reproducible per seed and lie in [1, vocabSize − 1]', () => {
    const gen = (seed: number): number[] => {
      const eng = new SimEngine({ seed, vocabSize: 50 });
      eng.enqueue({ id: 'a', tokenIds: prompt(3), maxTokens: 200 }, 0);
      const out: number[] = [];
      for (let t = 0; eng.hasWork(); t++) for (const e of eng.step(t).emitted) out.push(...e.tokenIds);
      return out;
    };
    const a = gen(1);
    expect(a).toHaveLength(200);
    expect(gen(1)).toEqual(a);
    expect(gen(2)).not.toEqual(a);
    expect(Math.min(...a)).toBeGreaterThanOrEqual(1);
    expect(Math.max(...a)).toBeLessThanOrEqual(49);
    // 200 draws over 49 values: a stuck or tiny-period generator would show few distinct values.
    expect(new Set(a).size).toBeGreaterThan(35);
  });
});
