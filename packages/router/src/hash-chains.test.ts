/**
 * Reusing an earlier turn's hash chain (issue 14): a prompt that names the prefix it extends is
 * hashed from there on and routed exactly as when every block is hashed; the kept chains are bounded
 * in bytes. Expected block counts are worked by hand from the prompt lengths (16-token blocks).
 */
import { RadixIndexer } from '@kvrouter/radix-indexer';
import { describe, expect, it } from 'vitest';
import type { KvrError } from '@kvrouter/protocols';
import { computeBlockAndSequenceHashes } from '@kvrouter/protocols';
import { HashChains, MAX_HASH_CHAIN_BYTES } from './hash-chains.js';
import { cat, harness, storeEvent, toks, w } from './test-fixtures.js';

const BS = 16;

function routerWithIndex() {
  const indexer = new RadixIndexer();
  const h = harness({ indexer, queueThreshold: null });
  for (const id of [1, 2, 3]) h.router.addWorker({ workerId: id });
  return { ...h, indexer };
}

describe('hash chains across turns', () => {
  it('turns that name their prefix route as when hashed whole, and hash only the blocks after the kept chain', async () => {
    // A conversation of three turns: 200 tokens, then +150 (350), then +300 (650).
    const t1 = toks(1, 200);
    const t2 = cat(t1, toks(2, 150));
    const t3 = cat(t2, toks(3, 300));
    const named = routerWithIndex();
    const plain = routerWithIndex();
    // Worker 2 caches the first 20 blocks of turn 3 (all of turn 2's 21 full blocks but the last),
    // worker 3 the first 30; the overlaps must come out the same either way.
    for (const r of [named, plain]) {
      r.indexer.applyEvent(storeEvent(w(2), t3, BS, 20, 1));
      r.indexer.applyEvent(storeEvent(w(3), t3, BS, 30, 2));
    }
    const turns = [
      { tokens: t1, tokensPrefix: { reused: -1, reusedTokens: 0, leaf: 10, leafTokens: 198 } },
      { tokens: t2, tokensPrefix: { reused: 10, reusedTokens: 198, leaf: 11, leafTokens: 345 } },
      { tokens: t3, tokensPrefix: { reused: 11, reusedTokens: 345, leaf: 12, leafTokens: 640 } },
    ];
    for (const [i, t] of turns.entries()) {
      const a = await named.router.route({ requestId: `n${i}`, ...t, explain: true });
      const b = await plain.router.route({ requestId: `p${i}`, tokens: t.tokens, explain: true });
      expect(a.overlapBlocks).toBe(b.overlapBlocks);
      expect(a.workerId).toBe(b.workerId);
      const terms = (d: typeof a) =>
        d.explanation?.candidates?.map((c) => [c.worker_id, c.device_blocks, c.cost]);
      expect(terms(a)).toEqual(terms(b));
      expect(terms(a)).toHaveLength(3);
    }
    // Turn 3 (650 tokens = 40 full blocks) overlaps worker 3's 30 blocks, worker 2's 20.
    const last = await named.router.route({ requestId: 'n-again', ...turns[2]!, explain: true });
    expect(last.explanation?.candidates?.map((c) => [c.worker_id, c.device_blocks])).toEqual([
      [1n, 0],
      [2n, 20],
      [3n, 30],
    ]);
    // Reused: turn 2 took floor(198 / 16) = 12 blocks of turn 1's chain, turn 3 floor(345 / 16) = 21
    // of turn 2's; the repeat of turn 3 names prefix 11 again, whose chain turn 3 took over (now
    // leaf 12's): it hashes whole.
    expect(named.router.hashChains.reusedBlocks).toBe(12 + 21);
    expect(plain.router.hashChains.reusedBlocks).toBe(0);
    // One chain kept (leaf 12: floor(640 / 16) = 40 blocks, capacity 50 blocks = 100 words per array).
    expect(named.router.hashChains.held).toBe(2 * 100 * 4);
  });

  it('a prompt given without tokensPrefix, or with LoRA, keeps nothing; a bad tokensPrefix names the field', async () => {
    const { router } = routerWithIndex();
    const t = toks(4, 100);
    await router.route({ requestId: 'a', tokens: t });
    await router.route({
      requestId: 'b',
      tokens: t,
      loraName: 'l',
      tokensPrefix: { reused: -1, reusedTokens: 0, leaf: 1, leafTokens: 96 },
    });
    expect(router.hashChains.held).toBe(0);
    for (const bad of [
      { reused: -2, reusedTokens: 0, leaf: 1, leafTokens: 96 },
      { reused: -1, reusedTokens: 0, leaf: 1, leafTokens: 101 },
      { reused: 1.5, reusedTokens: 0, leaf: 1, leafTokens: 96 },
      null,
    ]) {
      const e = await router
        .route({ requestId: 'c', tokens: t, tokensPrefix: bad as never })
        .catch((x: unknown) => x as KvrError);
      expect((e as KvrError).detail?.field).toBe('tokensPrefix');
    }
    expect(router.liveRequestCount).toBe(2);
  });
});

describe('HashChains', () => {
  const hashes = (t: Uint32Array) => {
    const n = Math.floor(t.length / BS);
    const local = new Uint32Array(2 * n);
    const seq = new Uint32Array(2 * n);
    computeBlockAndSequenceHashes(t, BS, undefined, local, seq);
    return { local, seq };
  };

  it('a turn takes over the chain it extends and grows it in place past its capacity', () => {
    expect(MAX_HASH_CHAIN_BYTES).toBe(32 * 1024 * 1024);
    const c = new HashChains(1 << 20);
    const t = toks(5, 1600);
    const h = hashes(t);
    // 160 tokens = 10 blocks: capacity ceil(12.5) = 13 blocks = 26 words, 8 bytes per word.
    c.keep({ reused: -1, reusedTokens: 0, leaf: 1, leafTokens: 160 }, BS, h.local, h.seq);
    expect([c.size, c.held]).toEqual([1, 26 * 8]);
    // 200 tokens = 12 blocks: fits in 13, same arrays, now under leaf 2 only.
    c.keep({ reused: 1, reusedTokens: 160, leaf: 2, leafTokens: 200 }, BS, h.local, h.seq);
    expect([c.size, c.held]).toEqual([1, 26 * 8]);
    // 1600 tokens = 100 blocks: regrown to 125 blocks = 250 words.
    c.keep({ reused: 2, reusedTokens: 200, leaf: 3, leafTokens: 1600 }, BS, h.local, h.seq);
    expect([c.size, c.held]).toEqual([1, 250 * 8]);
    const local = new Uint32Array(200);
    const seq = new Uint32Array(200);
    // Named prefix 3 of 1000 tokens: 62 blocks of the 100 kept, exactly the cold hashes.
    expect(c.take({ reused: 3, reusedTokens: 1000, leaf: 4, leafTokens: 1000 }, BS, 100, local, seq)).toBe(
      62,
    );
    expect([...local.subarray(0, 124)]).toEqual([...h.local.subarray(0, 124)]);
    expect([...seq.subarray(0, 124)]).toEqual([...h.seq.subarray(0, 124)]);
    expect(local[124]).toBe(0);
    // ... and no more than the prompt's own blocks.
    expect(c.take({ reused: 3, reusedTokens: 1600, leaf: 4, leafTokens: 1600 }, BS, 7, local, seq)).toBe(7);
    expect(c.take({ reused: 2, reusedTokens: 200, leaf: 4, leafTokens: 200 }, BS, 100, local, seq)).toBe(0);
    expect(c.reusedBlocks).toBe(62 + 7);
  });

  it('least recently used chains leave past the byte bound; a chain over the bound is not kept', () => {
    // Each 10-block chain holds 26 words x 8 bytes = 208 bytes; the bound fits three.
    const c = new HashChains(3 * 208);
    const h = hashes(toks(6, 160));
    for (const leaf of [1, 2, 3])
      c.keep({ reused: -1, reusedTokens: 0, leaf, leafTokens: 160 }, BS, h.local, h.seq);
    // Leaf 1 used again (same prefix): most recent; a fourth chain evicts leaf 2.
    c.keep({ reused: 1, reusedTokens: 160, leaf: 1, leafTokens: 160 }, BS, h.local, h.seq);
    c.keep({ reused: -1, reusedTokens: 0, leaf: 4, leafTokens: 160 }, BS, h.local, h.seq);
    expect([c.size, c.held, c.evicted]).toEqual([3, 3 * 208, 1]);
    const l = new Uint32Array(20);
    const s = new Uint32Array(20);
    const probe = (reused: number) =>
      c.take({ reused, reusedTokens: 160, leaf: 9, leafTokens: 160 }, BS, 10, l, s);
    expect([probe(1), probe(2), probe(3), probe(4)]).toEqual([10, 0, 10, 10]);
    // 100 blocks would need 250 words x 8 = 2000 bytes > 624: not kept, nothing else dropped.
    const big = hashes(toks(7, 1600));
    c.keep({ reused: -1, reusedTokens: 0, leaf: 5, leafTokens: 1600 }, BS, big.local, big.seq);
    expect([c.size, c.held, c.evicted]).toEqual([3, 3 * 208, 1]);
  });
});
