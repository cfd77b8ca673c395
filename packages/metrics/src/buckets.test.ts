import { describe, expect, it } from 'vitest';
import { BUCKETS, expBuckets, linearBuckets, logBuckets, MAX_BUCKET_COUNT, roundSig } from './buckets.js';
import { fieldOf } from './test-helpers.js';

describe('roundSig', () => {
  it('rounds to 2 significant figures in decimal', () => {
    expect(roundSig(6.3496)).toBe(6.3); // 6.3|496 -> 6.3
    expect(roundSig(255.99999999999994)).toBe(260); // 25|5.99 -> 26 x 10
    expect(roundSig(0.0035495)).toBe(0.0035); // 0.0035|495 -> 0.0035
    expect(roundSig(0.0468763)).toBe(0.047); // 0.046|8763 -> 0.047
    expect(roundSig(0)).toBe(0);
  });
});

describe('logBuckets', () => {
  it('reproduces the example of §16: log(1, 256, 10)', () => {
    // points 256^(i/9) = 2^(8i/9): 1, 1.852, 3.429, 6.350, 11.76, 21.77, 40.32, 74.66, 138.2, 256
    // rounded: 1, 1.9, 3.4, 6.3, 12, 22, 40, 75, 140, 260 (6.3496 < 6.35 rounds down)
    expect(logBuckets(1, 256, 10)).toEqual([0, 1, 1.9, 3.4, 6.3, 12, 22, 40, 75, 140, 260]);
  });

  it('removes duplicates that rounding creates', () => {
    // 1.2^(i/4): 1, 1.0466, 1.0954, 1.1465, 1.2 -> 1.0, 1.0, 1.1, 1.1, 1.2 -> 1, 1.1, 1.2
    expect(logBuckets(1, 1.2, 5)).toEqual([0, 1, 1.1, 1.2]);
  });

  it('with n = 2 has exactly min and max, with n = 1 only min', () => {
    expect(logBuckets(0.5, 8, 2)).toEqual([0, 0.5, 8]);
    expect(logBuckets(0.123, 8, 1)).toEqual([0, 0.12]);
  });

  it('rejects a bad range or count naming the argument', () => {
    expect(fieldOf(() => logBuckets(0, 1, 3))).toBe('min');
    expect(fieldOf(() => logBuckets(-1, 1, 3))).toBe('min');
    expect(fieldOf(() => logBuckets(NaN, 1, 3))).toBe('min');
    expect(fieldOf(() => logBuckets(2, 2, 3))).toBe('max');
    expect(fieldOf(() => logBuckets(1, Infinity, 3))).toBe('max');
    expect(fieldOf(() => logBuckets(1, 2, 0))).toBe('count');
    expect(fieldOf(() => logBuckets(1, 2, 2.5))).toBe('count');
    expect(fieldOf(() => logBuckets(1, 2, MAX_BUCKET_COUNT + 1))).toBe('count');
    expect(logBuckets(1, 1e6, MAX_BUCKET_COUNT).length).toBeGreaterThan(2);
  });
});

describe('expBuckets / linearBuckets', () => {
  it('exp(a, r, n) = a·r^k exactly as decimals', () => {
    expect(expBuckets(0.01, 3, 4)).toEqual([0.01, 0.03, 0.09, 0.27]);
    expect(expBuckets(1, 10, 3)).toEqual([1, 10, 100]);
    expect(fieldOf(() => expBuckets(0, 2, 3))).toBe('a');
    expect(fieldOf(() => expBuckets(1, 1, 3))).toBe('r');
    expect(fieldOf(() => expBuckets(1, 2, 0))).toBe('count');
  });

  it('linear steps are exact decimals', () => {
    expect(linearBuckets(0, 0.1, 4)).toEqual([0, 0.1, 0.2, 0.3]); // not 0.30000000000000004
    expect(fieldOf(() => linearBuckets(0, 0, 3))).toBe('step');
  });
});

describe('BUCKETS: every histogram of §16 against hand-computed lists', () => {
  it('request_duration_seconds: log(1, 256, 10)', () => {
    // see the §16 example above
    expect(BUCKETS.requestDuration).toEqual([0, 1, 1.9, 3.4, 6.3, 12, 22, 40, 75, 140, 260]);
  });

  it('input_sequence_tokens (and cached_tokens): log(50, 128000, 12)', () => {
    // r = 2560^(1/11) = e^(7.8478/11) = e^0.71344 = 2.0410
    // 50, 102.05, 208.28, 425.10, 867.62, 1770.8, 3614.2, 7376.5, 15055, 30728, 62715, 128000
    // -> 50, 100, 210, 430, 870, 1800, 3600, 7400, 15000, 31000, 63000, 130000
    expect(BUCKETS.inputSequence).toEqual([
      0, 50, 100, 210, 430, 870, 1800, 3600, 7400, 15000, 31000, 63000, 130000,
    ]);
  });

  it('output_sequence_tokens: log(50, 32000, 10)', () => {
    // r = 640^(1/9) = e^(6.4615/9) = e^0.71795 = 2.0502
    // 50, 102.51, 210.17, 430.89, 883.41, 1811.2, 3713.3, 7613.0, 15608, 32000
    // -> 50, 100, 210, 430, 880, 1800, 3700, 7600, 16000, 32000
    expect(BUCKETS.outputSequence).toEqual([0, 50, 100, 210, 430, 880, 1800, 3700, 7600, 16000, 32000]);
  });

  it('time_to_first_token_seconds: log(0.001, 480, 18)', () => {
    // r = 480000^(1/17) = e^(13.0815/17) = e^0.76950 = 2.1587
    // 0.001, 0.0021587, 0.0046600, 0.010059, 0.021715, 0.046876, 0.10119, 0.21844, 0.47155,
    // 1.0179, 2.1974, 4.7435, 10.240, 22.104, 47.717, 103.01, 222.36, 480
    expect(BUCKETS.ttft).toEqual([
      0, 0.001, 0.0022, 0.0047, 0.01, 0.022, 0.047, 0.1, 0.22, 0.47, 1, 2.2, 4.7, 10, 22, 48, 100, 220, 480,
    ]);
  });

  it('inter_token_latency_seconds: log(0.001, 2, 13)', () => {
    // r = 2000^(1/12) = e^(7.6009/12) = e^0.63341 = 1.8840
    // 0.001, 0.0018840, 0.0035495, 0.0066874, 0.012599, 0.023737, 0.044721 (= sqrt(2000)/1000),
    // 0.084256, 0.15874, 0.29907, 0.56345, 1.0616, 2
    expect(BUCKETS.itl).toEqual([
      0, 0.001, 0.0019, 0.0035, 0.0067, 0.013, 0.024, 0.045, 0.084, 0.16, 0.3, 0.56, 1.1, 2,
    ]);
  });

  it('kv_hit_rate: 0, 0.05, ..., 1.0 (21 points)', () => {
    // k/20 for k = 0..20
    expect(BUCKETS.kvHitRate).toEqual([
      0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9,
      0.95, 1,
    ]);
  });

  it('kv_transfer_estimated_latency_seconds: log(0.001, 10, 15)', () => {
    // 0.001 · 10^(4i/14) = 10^(-3 + 0.285714 i): 0.001, 0.0019307, 0.0037276, 0.0071969, 0.013895,
    // 0.026827, 0.051795, 0.1, 0.19307, 0.37276, 0.71969, 1.3895, 2.6827, 5.1795, 10
    expect(BUCKETS.kvTransferLatency).toEqual([
      0, 0.001, 0.0019, 0.0037, 0.0072, 0.014, 0.027, 0.052, 0.1, 0.19, 0.37, 0.72, 1.4, 2.7, 5.2, 10,
    ]);
  });

  it('overhead block_hashing / seq_hashing: exp(0.001, 2, 15)', () => {
    // 0.001 · 2^k, k = 0..14
    expect(BUCKETS.overheadHashing).toEqual([
      0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096, 8.192,
      16.384,
    ]);
  });

  it('overhead indexer_find_matches / scheduling / total: exp(0.01, 3, 17)', () => {
    // 3^k, k = 0..16: 1 3 9 27 81 243 729 2187 6561 19683 59049 177147 531441 1594323 4782969
    // 14348907 43046721, times 0.01
    expect(BUCKETS.overheadRouting).toEqual([
      0.01, 0.03, 0.09, 0.27, 0.81, 2.43, 7.29, 21.87, 65.61, 196.83, 590.49, 1771.47, 5314.41, 15943.23,
      47829.69, 143489.07, 430467.21,
    ]);
  });

  it('tokenizer_latency_ms (implementation choice): 0.5 · 2^k up to 512', () => {
    expect(BUCKETS.tokenizerLatencyMs).toEqual([0.5, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512]);
  });
});
