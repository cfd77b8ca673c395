import type { SimConfig, UnitSummary } from '@kvrouter/sim';
import { describe, expect, it } from 'vitest';
import { decodeLoad, idealTtftMs } from './sweep.js';

const sim = { engine: {}, dispatchDelayMs: 0 } as unknown as SimConfig;

describe('the TTFT limit of a load point (ideal TTFT with no queueing at the oracle hit rate)', () => {
  it('prefills the uncached share in budget chunks with the §17 polynomial, plus the decode steps of that load', () => {
    // isl 1000 at hit rate 0.5: 500 tokens, one chunk: 4.209989e-7·500² + 1.518344e-2·500 + 16.50142
    // = 0.10524973 + 7.59172 + 16.50142 = 24.19838973 ms on an idle engine.
    expect(idealTtftMs([1000], 0.5, sim, undefined)).toBeCloseTo(24.19838973, 6);
    // Half the engine time decoding, a 10 ms step: + 0.5 · (1 chunk + half a step of waiting) · 10 = 7.5.
    expect(idealTtftMs([1000], 0.5, sim, undefined, { share: 0.5, stepMs: 10 })).toBeCloseTo(31.69838973, 6);
    // 20 000 uncached tokens: chunks 8192, 8192, 3616 (budget 8192); always decoding, an 8 ms step:
    // 2 · (4.209989e-7·8192² + 1.518344e-2·8192 + 16.50142) + (4.209989e-7·3616² + 1.518344e-2·3616
    // + 16.50142) = 2 · (28.25275 + 124.38274 + 16.50142) + (5.50476 + 54.90332 + 16.50142)
    // = 2 · 169.13691 + 76.9095 = 415.18332, + (3 + 0.5) · 8 = 28.
    const p = (x: number) => 4.209989e-7 * x * x + 1.518344e-2 * x + 16.50142;
    expect(2 * p(8192) + p(3616)).toBeCloseTo(415.18332, 4);
    expect(idealTtftMs([20000], 0, sim, undefined, { share: 1, stepMs: 8 })).toBeCloseTo(443.18332, 4);
  });

  it('measures the decode load as the share of engine time in decoding passes and the mean decode-only pass', () => {
    const u = (decodingMs: number, decodeSteps: number, decodeStepMs: number) =>
      ({ decodingMs, decodeSteps, decodeStepMs }) as UnitSummary;
    // 2 engines over 1000 ms: 400 ms of decoding passes of 2000 → 0.2; 10 decode-only passes, 80 ms → 8.
    expect(decodeLoad([u(300, 10, 80), u(100, 0, 0)], 1000)).toEqual({ share: 0.2, stepMs: 8 });
    expect(decodeLoad([u(0, 0, 0)], 0)).toEqual({ share: 0, stepMs: 0 });
  });
});
