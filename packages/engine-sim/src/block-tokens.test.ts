/**
 * `EngineDeps.blockTokenIds`: Stored blocks carry the tokens they hold (what vLLM's `BlockStored`
 * publishes as `token_ids`), including generated tokens once a block of output fills.
 */
import { describe, expect, it } from 'vitest';
import { SimEngine } from './engine.js';
import type { EngineKvEvent } from './types.js';

const blocksOf = (evs: EngineKvEvent[]) =>
  evs.flatMap((e) => ('stored' in e.data ? e.data.stored.blocks : []));

describe('SimEngine: per-block token ids', () => {
  it('prompt blocks carry tokens [i·bs, (i+1)·bs) and hash to the §2.4 vectors', () => {
    const eng = new SimEngine({ blockSize: 4 }, { blockTokenIds: true });
    // Tokens 0..9 with bs 4: blocks [0,1,2,3] and [4,5,6,7]; tokens 8, 9 stay in a private partial block.
    eng.enqueue({ id: 'a', tokenIds: Uint32Array.from({ length: 10 }, (_, i) => i), maxTokens: 5 }, 0);
    const blocks = blocksOf(eng.step(0).kvEvents);
    expect(blocks.map((b) => [...b.token_ids!])).toEqual([
      [0, 1, 2, 3],
      [4, 5, 6, 7],
    ]);
    // §2.4: local hashes of tokens 0..9, bs 4 = [9143094415614847814, 12124091508212882195];
    // sequence hashes = [9143094415614847814, 9510318385840434533].
    expect(blocks.map((b) => b.tokens_hash)).toEqual([9143094415614847814n, 12124091508212882195n]);
    expect(blocks.map((b) => b.block_hash)).toEqual([9143094415614847814n, 9510318385840434533n]);
  });

  it('a block completed by generated tokens carries those tokens', () => {
    const eng = new SimEngine({ blockSize: 4 }, { blockTokenIds: true });
    // Prompt of 3 tokens; the first generated token (emitted by the prefill pass) is position 3, but its
    // KV is computed by the next pass, which fills block 0 = [10, 11, 12, g0].
    eng.enqueue({ id: 'a', tokenIds: [10, 11, 12], maxTokens: 4 }, 0);
    const first = eng.step(0);
    expect(blocksOf(first.kvEvents)).toEqual([]);
    const g0 = first.emitted[0].tokenIds[0];
    const second = eng.step(100);
    expect(blocksOf(second.kvEvents).map((b) => [...b.token_ids!])).toEqual([[10, 11, 12, g0]]);
  });

  it('off by default: blocks have no token_ids field', () => {
    const eng = new SimEngine({ blockSize: 4 });
    eng.enqueue({ id: 'a', tokenIds: [1, 2, 3, 4, 5], maxTokens: 1 }, 0);
    const blocks = blocksOf(eng.step(0).kvEvents);
    expect(blocks).toHaveLength(1);
    expect('token_ids' in blocks[0]).toBe(false);
  });
});
