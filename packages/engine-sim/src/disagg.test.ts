import { localBlockHashes, sequenceHashes } from '@kvrouter/protocols';
import { describe, expect, it } from 'vitest';
import { SimEngine } from './engine.js';

const prompt = (n: number, base = 1): Uint32Array => Uint32Array.from({ length: n }, (_, i) => base + i);

describe('SimEngine: disaggregated decode (kvTransferred)', () => {
  it('a transferred 1000-token prompt pays one decode step, not prefill, and stores its 15 full blocks', () => {
    const eng = new SimEngine();
    const p = prompt(1000);
    eng.enqueue({ id: 'd', tokenIds: p, maxTokens: 2, kvTransferred: true }, 0);
    const r = eng.step(0);
    // 1000 tokens = 16 blocks (15 full + 1 partial) allocated as received: u = 16 / 16384 = 0.0009765625
    // decode(u) = −25.74·u² + 54.01·u + 5.74 = −0.0000245475769 + 0.052744140625 + 5.74 = 5.792719593
    // (the aggregated prefill of the same prompt takes 32.1058589 ms)
    expect(r.prefillTokens).toBe(0);
    expect(r.decodeRequests).toBe(1);
    expect(r.durationMs).toBeCloseTo(5.792719593, 8);
    expect(r.emitted).toEqual([{ requestId: 'd', tokenIds: [expect.any(Number)], cachedTokens: 0 }]);
    const seq = sequenceHashes(localBlockHashes(p, 64));
    expect(r.kvEvents).toHaveLength(1);
    const ev = r.kvEvents[0].data;
    expect('stored' in ev && ev.stored.blocks.map((b) => b.block_hash)).toEqual(seq);
    expect(r.load.kv_used_blocks).toBe(16);
    // Second token: a normal decode step; then the request finishes and its blocks stay cached.
    const r2 = eng.step(10);
    expect(r2.emitted[0].finishReason).toBe('length');
    expect(eng.ranks[0].audit()).toEqual([]);
    expect(eng.stats().prefillTokensComputed).toBe(0);
  });

  it('a cached prefix is still reported as cachedTokens and not stored again', () => {
    const eng = new SimEngine();
    const p = prompt(1000);
    eng.enqueue({ id: 'a', tokenIds: p.slice(0, 640), maxTokens: 1 }, 0);
    eng.step(0);
    eng.enqueue({ id: 'd', tokenIds: p, maxTokens: 1, kvTransferred: true }, 100);
    const r = eng.step(100);
    // 640 tokens = 10 full cached blocks; a hit is capped at floor((1000 − 1) / 64) = 15 ≥ 10
    expect(r.emitted[0].cachedTokens).toBe(640);
    expect(r.prefillTokens).toBe(0);
    const ev = r.kvEvents[0].data;
    // blocks 10..14 are new
    expect('stored' in ev && ev.stored.start_position).toBe(10);
    expect('stored' in ev && ev.stored.blocks).toHaveLength(5);
  });

  it('rejects a non-boolean kvTransferred naming the field', () => {
    const eng = new SimEngine();
    expect(() =>
      eng.enqueue({ id: 'x', tokenIds: prompt(4), maxTokens: 1, kvTransferred: 1 as unknown as boolean }, 0),
    ).toThrow(/kvTransferred/);
  });
});
