import { readFileSync } from 'node:fs';
import { inflateRawSync } from 'node:zlib';
import { KvrError } from '@kvrouter/protocols';
import { describe, expect, it } from 'vitest';
import { SimEngine } from './engine.js';
import { parsePlannerProfile, parsePlannerProfileNpz, profileTiming } from './timing-profile.js';

const upstreamShape = {
  prefill_isl: [100, 1100],
  prefill_ttft_ms: [20, 70],
  decode_active_kv_tokens: [0, 1000],
  decode_context_length: [100, 500],
  decode_itl: [
    [4, 8],
    [10, 20],
  ],
};

describe('--planner-profile-data', () => {
  const t = profileTiming(parsePlannerProfile(JSON.stringify(upstreamShape), 'p.json'), 1000);

  it('prefill: linear in new tokens, clamped at the ends', () => {
    // 600 is halfway from 100 to 1100: 20 + 0.5 · (70 − 20) = 45.
    expect(t.prefillMs(600)).toBeCloseTo(45, 12);
    // 350: 20 + 0.25 · 50 = 32.5.
    expect(t.prefillMs(350)).toBeCloseTo(32.5, 12);
    expect(t.prefillMs(50)).toBe(20);
    expect(t.prefillMs(5000)).toBe(70);
  });

  it('decode: bilinear in (active KV tokens, mean context), clamped, at least 1 ms', () => {
    // batch 2 holding 600 context tokens: x = 600 (tx 0.6), y = 300 (ty 0.5).
    // Row x=0: 4 + 0.5 · (8 − 4) = 6; row x=1000: 10 + 0.5 · (20 − 10) = 15; 6 + 0.6 · (15 − 6) = 11.4.
    expect(t.decodeStepMs!({ kvUsage: 0.6, batch: 2, contextTokens: 600 })).toBeCloseTo(11.4, 12);
    // x = min(2000, 1000 total) = 1000, y = 2000 / 1 clamped to 500: the corner 20.
    expect(t.decodeStepMs!({ kvUsage: 1, batch: 1, contextTokens: 2000 })).toBe(20);
    // Below both axes: the corner 4.
    expect(t.decodeStepMs!({ kvUsage: 0, batch: 1, contextTokens: 0 })).toBe(4);
  });

  it('reads the kv-usage / batch-size axes too', () => {
    const p = parsePlannerProfile(
      JSON.stringify({
        prefill_isl: [1],
        prefill_ttft_ms: [9],
        decode_kv_usage: [0, 1],
        decode_batch_size: [1, 9],
        decode_itl: [
          [2, 4],
          [6, 12],
        ],
      }),
      'q.json',
    );
    const q = profileTiming(p, 4096);
    // u 0.25, batch 3 (ty = 2/8 = 0.25): row u=0: 2 + 0.25 · 2 = 2.5; row u=1: 6 + 0.25 · 6 = 7.5;
    // 2.5 + 0.25 · (7.5 − 2.5) = 3.75.
    expect(q.decodeStepMs!({ kvUsage: 0.25, batch: 3, contextTokens: 123 })).toBeCloseTo(3.75, 12);
    // A single prefill point is a constant.
    expect(q.prefillMs(5000)).toBe(9);
  });

  it('drives the engine: a 600-token prefill, then a decode at (601 tokens, context 601)', () => {
    // 250 blocks of 4 = 1000 KV tokens.
    const eng = new SimEngine({ blockSize: 4, numGpuBlocks: 250, speedupRatio: 2 }, { timing: t });
    eng.enqueue({ id: 'a', tokenIds: Uint32Array.from({ length: 600 }, (_, i) => i + 1), maxTokens: 2 }, 0);
    // 45 / speedup 2.
    expect(eng.step(0).durationMs).toBeCloseTo(22.5, 12);
    // x = 601 (tx 0.601), y = 601 clamped to 500: 8 + 0.601 · (20 − 8) = 15.212; / 2.
    expect(eng.step(30).durationMs).toBeCloseTo(7.606, 12);
  });

  const bad: [string, string, string][] = [
    ['not JSON', '{', 'not valid JSON'],
    ['an array', '[]', 'expected a JSON object'],
    ['a missing axis', JSON.stringify({ ...upstreamShape, prefill_isl: undefined }), 'prefill_isl'],
    [
      'a decreasing axis',
      JSON.stringify({ ...upstreamShape, prefill_isl: [1100, 100] }),
      'prefill_isl[1]: values must increase',
    ],
    [
      'a length mismatch',
      JSON.stringify({ ...upstreamShape, prefill_ttft_ms: [1] }),
      'prefill_ttft_ms: expected 2 numbers',
    ],
    [
      'a short grid',
      JSON.stringify({ ...upstreamShape, decode_itl: [[1, 2]] }),
      'decode_itl: expected 2 rows',
    ],
    [
      'a ragged row',
      JSON.stringify({ ...upstreamShape, decode_itl: [[1, 2], [3]] }),
      'decode_itl[1]: expected 2 numbers',
    ],
    ['a negative time', JSON.stringify({ ...upstreamShape, prefill_ttft_ms: [-1, 2] }), 'prefill_ttft_ms[0]'],
    [
      'two x axes',
      JSON.stringify({ ...upstreamShape, decode_kv_usage: [0, 1] }),
      'exactly one of decode_active_kv_tokens, decode_kv_usage',
    ],
    [
      'usage over 1',
      JSON.stringify({ ...upstreamShape, decode_active_kv_tokens: undefined, decode_kv_usage: [0, 2] }),
      'fractions in [0, 1]',
    ],
  ];
  it.each(bad)('rejects %s, naming the flag and file', (_name, text, problem) => {
    try {
      parsePlannerProfile(text, '/data/prof.json');
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(KvrError);
      expect((e as KvrError).message).toContain('--planner-profile-data /data/prof.json: ');
      expect((e as KvrError).message).toContain(problem);
      expect((e as KvrError).detail).toEqual({ flag: '--planner-profile-data' });
    }
  });
});

describe('--planner-profile-data as upstream .npz', () => {
  // Written by numpy 2.4 (savez: stored zip64 members; savez_compressed: deflated) from the same
  // arrays as `upstreamShape`, with int64 / int32 / float32 axes and decode_itl in Fortran order.
  const npz = (f: string): Uint8Array => readFileSync(new URL(`./testdata/${f}`, import.meta.url));
  const inflate = (b: Uint8Array): Uint8Array => inflateRawSync(b);

  for (const [file, inflater] of [
    ['profile.npz', undefined],
    ['profile-compressed.npz', inflate],
  ] as const) {
    it(`${file}: the same times as the JSON form`, () => {
      const t = profileTiming(parsePlannerProfileNpz(npz(file), file, inflater), 1000);
      expect(t.prefillMs(600)).toBeCloseTo(45, 12);
      expect(t.decodeStepMs!({ kvUsage: 0.6, batch: 2, contextTokens: 600 })).toBeCloseTo(11.4, 12);
      // x = 100 (tx 0.1), y = 100: 4 + 0.1 · (10 − 4) = 4.6 (transposed: 4 + 0.1 · (8 − 4) = 4.4).
      expect(t.decodeStepMs!({ kvUsage: 0.1, batch: 1, contextTokens: 100 })).toBeCloseTo(4.6, 12);
      // decode_itl[1][0] = 10 at (x 1000, y 100); read as row-major it would be 8.
      expect(t.decodeStepMs!({ kvUsage: 1, batch: 10, contextTokens: 1000 })).toBe(10);
    });
  }

  it('names the flag and file for unreadable archives', () => {
    expect(() => parsePlannerProfileNpz(npz('profile-compressed.npz'), 'c.npz')).toThrow(
      /--planner-profile-data c.npz: not a readable .npz \(prefill_isl.npy: compressed member, no inflater\)/,
    );
    expect(() => parsePlannerProfileNpz(new Uint8Array(100), 'z.npz')).toThrow(
      /--planner-profile-data z.npz: not a readable .npz/,
    );
  });
});
