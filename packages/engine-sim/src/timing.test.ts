import { describe, expect, it } from 'vitest';
import { POLYNOMIAL_TIMING, passDurationMs, type DecodeShape } from './timing.js';

/** A decode batch of `batch` requests at KV usage `kvUsage` (the polynomials ignore context length). */
const decoding = (batch: number, kvUsage: number): DecodeShape => ({ batch, kvUsage, contextTokens: 0 });

describe('timing polynomials (docs/protocol.md §17 step 3)', () => {
  it('prefill matches hand values', () => {
    // 4.209989e-7·1000² + 1.518344e-2·1000 + 16.50142 = 0.4209989 + 15.18344 + 16.50142 = 32.1058589
    expect(POLYNOMIAL_TIMING.prefillMs(1000)).toBeCloseTo(32.1058589, 9);
    // 4.209989e-7·8192² = 4.209989e-7·67108864 = 28.2527579…; 1.518344e-2·8192 = 124.38274048
    // 28.2527579 + 124.38274048 + 16.50142 = 169.1369184
    expect(POLYNOMIAL_TIMING.prefillMs(8192)).toBeCloseTo(169.1369184, 6);
  });

  it('decode matches hand values and is floored at 1 ms', () => {
    // u = 0: 5.74; u = 1: −25.74 + 54.01 + 5.74 = 34.01; u = 0.5: −6.435 + 27.005 + 5.74 = 26.31
    expect(POLYNOMIAL_TIMING.decodeMs(0)).toBeCloseTo(5.74, 12);
    expect(POLYNOMIAL_TIMING.decodeMs(1)).toBeCloseTo(34.01, 12);
    expect(POLYNOMIAL_TIMING.decodeMs(0.5)).toBeCloseTo(26.31, 12);
    // Outside 0..1 the polynomial goes negative; u = 3: −231.66 + 162.03 + 5.74 = −63.89 → floor 1
    expect(POLYNOMIAL_TIMING.decodeMs(3)).toBe(1);
  });

  it('combines parts and applies both speedups', () => {
    // (prefill(1000) + decode(0.5) / 4) / 2 = (32.1058589 + 6.5775) / 2 = 19.34167945
    expect(passDurationMs(POLYNOMIAL_TIMING, 1000, decoding(1, 0.5), 2, 4)).toBeCloseTo(19.34167945, 9);
    // prefill only: the decode speedup does not touch it; 32.1058589 / 2
    expect(passDurationMs(POLYNOMIAL_TIMING, 1000, decoding(0, 0.5), 2, 4)).toBeCloseTo(16.05292945, 9);
    // decode only at u = 0: 5.74 / 4 / 1
    expect(passDurationMs(POLYNOMIAL_TIMING, 0, decoding(1, 0), 1, 4)).toBeCloseTo(1.435, 12);
    expect(passDurationMs(POLYNOMIAL_TIMING, 0, decoding(0, 0), 1, 1)).toBe(0);
  });
});
