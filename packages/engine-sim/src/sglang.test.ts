import { KvrError, localBlockHashes, sequenceHashes } from '@kvrouter/protocols';
import { describe, expect, it } from 'vitest';
import type { EngineConfig } from './config.js';
import { SimEngine } from './engine.js';
import type { EngineKvEvent, StepResult } from './types.js';

const seqOf = (tokens: ArrayLike<number>, bs: number): bigint[] =>
  sequenceHashes(localBlockHashes(Uint32Array.from(tokens), bs));

function storedBlocks(
  evs: EngineKvEvent[],
): { parent: bigint | null; start: number | null; blocks: bigint[] }[] {
  return evs
    .filter((e) => 'stored' in e.data)
    .map((e) => {
      const s = (
        e.data as {
          stored: {
            parent_hash: bigint | null;
            start_position: number | null;
            blocks: { block_hash: bigint }[];
          };
        }
      ).stored;
      return { parent: s.parent_hash, start: s.start_position, blocks: s.blocks.map((b) => b.block_hash) };
    });
}

const removedCount = (evs: EngineKvEvent[]): number =>
  evs.reduce((a, e) => a + ('removed' in e.data ? e.data.removed.block_hashes.length : 0), 0);

function sgl(partial: Partial<EngineConfig>): SimEngine {
  return new SimEngine({ engineType: 'sglang', ...partial });
}

// prefill(x) of §17: 4.209989e-7·x² + 1.518344e-2·x + 16.50142.
const prefill = (x: number): number => 4.209989e-7 * x * x + 1.518344e-2 * x + 16.50142;

describe('SGLang flavour: radix cache', () => {
  it('matches a prefix at token granularity while KV events stay per block', () => {
    const eng = sgl({ blockSize: 4, numGpuBlocks: 64 });
    const a = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
    eng.enqueue({ id: 'a', tokenIds: a, maxTokens: 1 }, 0);
    const r1 = eng.step(0);
    expect(r1.prefillTokens).toBe(10);
    // 10 tokens = blocks [1..4], [5..8] + 2 tokens: two Stored blocks in one chain.
    const sa = seqOf(a, 4);
    expect(storedBlocks(r1.kvEvents)).toEqual([{ parent: null, start: 0, blocks: sa }]);
    expect(r1.emitted).toEqual([
      { requestId: 'a', tokenIds: [expect.any(Number)], cachedTokens: 0, finishReason: 'length' },
    ]);

    // b shares a's first 6 tokens, which end inside a's second block.
    const b = [1, 2, 3, 4, 5, 6, 99, 98];
    eng.enqueue({ id: 'b', tokenIds: b, maxTokens: 1 }, 10);
    const r2 = eng.step(10);
    expect(r2.emitted[0].cachedTokens).toBe(6);
    expect(r2.prefillTokens).toBe(2);
    // 4.209989e-7·4 + 1.518344e-2·2 + 16.50142 = 0.0000016840 + 0.03036688 + 16.50142
    expect(r2.durationMs).toBeCloseTo(16.531788564, 9);
    // b's block 1 ([5, 6, 99, 98]) is new; its parent is the shared block 0.
    const sb = seqOf(b, 4);
    expect(sb[0]).toBe(sa[0]);
    expect(storedBlocks(r2.kvEvents)).toEqual([{ parent: sa[0], start: 1, blocks: [sb[1]] }]);
    expect(eng.cachedBlocks()).toEqual(new Set([sa[0], sa[1], sb[1]]));
    expect(eng.ranks[0].audit()).toEqual([]);
  });

  it('a fully cached prompt still computes its last token', () => {
    const eng = sgl({ blockSize: 4, numGpuBlocks: 64 });
    const p = [5, 6, 7, 8, 9, 10, 11, 12];
    eng.enqueue({ id: 'a', tokenIds: p, maxTokens: 1 }, 0);
    eng.step(0);
    eng.enqueue({ id: 'b', tokenIds: p, maxTokens: 1 }, 1);
    const r = eng.step(1);
    // Hit limited to len − 1 = 7; the 8th token is shared, not stored again.
    expect(r.emitted[0].cachedTokens).toBe(7);
    expect(r.prefillTokens).toBe(1);
    expect(r.kvEvents).toEqual([]);
    expect(eng.ranks[0].audit()).toEqual([]);
  });
});

describe('SGLang flavour: scheduling', () => {
  it('runs extend passes before decode, within the chunk budget, chunking only long prompts', () => {
    // chunk (max_num_batched_tokens) 8; a 5-token prompt is taken whole or not at all, the 20-token one is chunked.
    const eng = sgl({ blockSize: 4, numGpuBlocks: 64, maxNumBatchedTokens: 8 });
    eng.enqueue({ id: 'a', tokenIds: [1, 2, 3, 4, 5], maxTokens: 3 }, 0);
    eng.enqueue({ id: 'b', tokenIds: [11, 12, 13, 14, 15], maxTokens: 3 }, 0);
    eng.enqueue({ id: 'c', tokenIds: Array.from({ length: 20 }, (_, i) => 100 + i), maxTokens: 3 }, 0);
    const passes: StepResult[] = [];
    for (let t = 0; eng.hasWork(0); t += 100) passes.push(eng.step(t));
    // 1: a (5; b's 5 > 3 left). 2: b (5) + c's first 3. 3, 4: c 8 + 8. 5: c's last 1. 6, 7: decode a, b, c.
    expect(passes.map((p) => p.prefillTokens)).toEqual([5, 8, 8, 8, 1, 0, 0]);
    expect(passes.map((p) => p.decodeRequests)).toEqual([0, 0, 0, 0, 0, 3, 3]);
    expect(passes.map((p) => p.emitted.map((e) => e.requestId).join(''))).toEqual([
      'a',
      'b',
      '',
      '',
      'c',
      'abc',
      'abc',
    ]);
    expect(passes[6].emitted.every((e) => e.finishReason === 'length')).toBe(true);
    expect(passes[4].durationMs).toBeCloseTo(prefill(1), 9);
    expect(eng.ranks[0].audit()).toEqual([]);
  });

  it('charges --sglang-max-prefill-tokens per pass; the first request of a pass may exceed it', () => {
    const eng = sgl({ blockSize: 4, numGpuBlocks: 64, maxNumBatchedTokens: 100, sglangMaxPrefillTokens: 6 });
    eng.enqueue({ id: 'a', tokenIds: [1, 2, 3, 4, 5], maxTokens: 1 }, 0);
    eng.enqueue({ id: 'b', tokenIds: [11, 12, 13, 14, 15], maxTokens: 1 }, 0);
    eng.enqueue({ id: 'c', tokenIds: Array.from({ length: 20 }, (_, i) => 100 + i), maxTokens: 1 }, 0);
    const x: number[] = [];
    for (let t = 0; eng.hasWork(0); t += 100) x.push(eng.step(t).prefillTokens);
    // a: 5 of 6, b's 5 > 1 left; b alone; c (20 > 6) alone, whole.
    expect(x).toEqual([5, 5, 20]);
  });

  it('retracts the request with the fewest generated tokens when decode runs out of KV', () => {
    // 40 tokens of KV. a: 2 + 22 (needs 23). b: 2 + 21 (needs 22).
    const eng = sgl({ blockSize: 2, numGpuBlocks: 20 });
    eng.enqueue({ id: 'a', tokenIds: [1, 2], maxTokens: 22 }, 0);
    eng.enqueue({ id: 'b', tokenIds: [3, 4], maxTokens: 21 }, 0);
    const passes: StepResult[] = [];
    for (let t = 0; eng.hasWork(0); t += 100) {
      passes.push(eng.step(t));
      expect(eng.ranks[0].audit()).toEqual([]);
    }
    const at = (n: number): StepResult => passes[n - 1];
    // Pass 1: a's 2 + 22 reserved < 40 free; b's 2 + 21 >= 40 − 24 = 16 left: a alone.
    expect(at(1).emitted.map((e) => e.requestId)).toEqual(['a']);
    // Pass 2: new_token_ratio = 0.7 − (0.7 − 0.098)/600 = 0.6989966667; a reserves 21 · 0.6989966667 = 14.6789;
    // free 40 − 2 = 38, left 23.3211 > 2 + 21: b is admitted (an extend pass; a waits).
    expect(at(2).emitted.map((e) => e.requestId)).toEqual(['b']);
    expect(at(2).prefillTokens).toBe(2);
    // Passes 3–20 decode both; before pass k + 2 each holds k + 1 tokens (k generated). Pass 21: k = 19,
    // 40 held, 2 needed: a (tied at 19 generated, first in running order) is retracted. Its 20 tokens
    // become evictable and its whole leaf (10 blocks of 2) is evicted for b's next token.
    for (let n = 3; n <= 20; n++) expect(at(n)).toMatchObject({ decodeRequests: 2, preempted: 0 });
    expect(at(21)).toMatchObject({ decodeRequests: 1, preempted: 1, prefillTokens: 0 });
    expect(at(21).emitted.map((e) => e.requestId)).toEqual(['b']);
    expect(removedCount(at(21).kvEvents)).toBe(10);
    // Pass 22: b holds 21, reserves 1 · 0.7 (ratio reset); left 40 − 21 − 0.7 = 18.3 < 21 + 3 for a: b's last decode.
    expect(at(22)).toMatchObject({ decodeRequests: 1, prefillTokens: 0 });
    expect(at(22).emitted[0]).toMatchObject({ requestId: 'b', finishReason: 'length' });
    // Pass 23: a recomputes prompt + 19 outputs = 21 tokens (nothing cached). b left 2 + 20 = 22 tokens
    // cached, 18 are free: its whole 22-token leaf (11 blocks) is evicted for a.
    expect(at(23)).toMatchObject({ prefillTokens: 21, decodeRequests: 0 });
    expect(removedCount(at(23).kvEvents)).toBe(11);
    expect(at(23).emitted.map((e) => e.requestId)).toEqual(['a']);
    // Then two decodes: a ends with all 22 tokens, never a repeat of one it had before retraction.
    expect(passes).toHaveLength(25);
    const aTokens = passes.flatMap((p) => p.emitted.filter((e) => e.requestId === 'a'));
    expect(aTokens).toHaveLength(22);
    expect(aTokens[0].cachedTokens).toBe(0);
    expect(eng.stats().preemptions).toBe(1);
    expect(eng.load().kv_used_blocks).toBe(0);
  });

  it('rejects prompts over the prefill budget with chunked prefill off, naming the field', () => {
    const eng = sgl({ enableChunkedPrefill: false, sglangMaxPrefillTokens: 8 });
    try {
      eng.enqueue({ id: 'a', tokenIds: Array.from({ length: 9 }, (_, i) => i + 1), maxTokens: 1 }, 0);
      expect.unreachable();
    } catch (e) {
      expect((e as KvrError).code).toBe('request_too_large');
      expect((e as KvrError).message).toContain('sglang_max_prefill_tokens 8');
    }
    expect(eng.hasWork(0)).toBe(false);
  });

  it('a transferred prompt (disaggregated decode) pays no prefill and emits after one decode pass', () => {
    const eng = sgl({ blockSize: 4, numGpuBlocks: 64 });
    eng.enqueue(
      { id: 'a', tokenIds: Array.from({ length: 9 }, (_, i) => i + 1), maxTokens: 2, kvTransferred: true },
      0,
    );
    const r = eng.step(0);
    expect(r).toMatchObject({ prefillTokens: 0, decodeRequests: 1 });
    expect(r.emitted[0]).toMatchObject({ requestId: 'a', cachedTokens: 0 });
    // Tokens 0..7 arrive (two blocks), token 8 is computed by the decode step: still two full blocks.
    expect(storedBlocks(r.kvEvents)).toEqual([
      { parent: null, start: 0, blocks: seqOf([1, 2, 3, 4, 5, 6, 7, 8], 4) },
    ]);
    expect(eng.ranks[0].audit()).toEqual([]);
  });
});

describe('reasoning tokens', () => {
  const reasoning = { startThinkingTokenId: 151667, endThinkingTokenId: 151668, thinkingRatio: 0.5 };
  for (const engineType of ['vllm', 'sglang'] as const) {
    it(`${engineType}: floor(ratio · max_tokens) tokens open the output, wrapped in the markers`, () => {
      const run = (r: typeof reasoning | null, maxTokens: number) => {
        const eng = new SimEngine({ engineType, reasoning: r });
        eng.enqueue({ id: 'a', tokenIds: [1, 2, 3], maxTokens }, 0);
        const out: number[] = [];
        let last: StepResult['emitted'][number] | undefined;
        for (let t = 0; eng.hasWork(0); t += 100) {
          for (const e of eng.step(t).emitted) {
            out.push(...e.tokenIds);
            last = e;
          }
        }
        return { out, last: last!, stats: eng.stats() };
      };
      // floor(0.5 · 7) = 3: <think> x </think> y y y y.
      const withR = run(reasoning, 7);
      const plain = run(null, 7);
      expect(withR.out[0]).toBe(151667);
      expect(withR.out[2]).toBe(151668);
      expect(withR.out.filter((t) => t === 151667 || t === 151668)).toHaveLength(2);
      // Same draws underneath: every non-marker position is the plain run's token.
      for (const i of [1, 3, 4, 5, 6]) expect(withR.out[i]).toBe(plain.out[i]);
      expect(withR.last.reasoningTokens).toBe(3);
      expect(withR.stats.reasoningTokens).toBe(3);
      expect(plain.last.reasoningTokens).toBeUndefined();
      // floor(0.5 · 3) = 1 cannot hold both markers: no span.
      const short = run(reasoning, 3);
      expect(short.out).not.toContain(151667);
      expect(short.last.reasoningTokens).toBe(0);
    });
  }
});
