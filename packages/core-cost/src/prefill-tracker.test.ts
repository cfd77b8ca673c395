import { describe, expect, it } from 'vitest';
import { decayedPrefillTokens } from './prefill-tracker.js';
import { RankLoads } from './rank-loads.js';

describe('decayedPrefillTokens (§9.4 anchor decay)', () => {
  // FIFO: anchor 200 tokens + one queued 100 → sum 300.
  it('only the anchor decays, rounded up, clamped to [0, initial]', () => {
    expect(decayedPrefillTokens(300, 200, 1000, 0)).toBe(300);
    expect(decayedPrefillTokens(300, 200, 1000, 600)).toBe(180); // 100 + ceil(200 · 0.4)
    expect(decayedPrefillTokens(300, 200, 1000, 999)).toBe(101); // 100 + ceil(200 · 0.001) = 100 + 1
    expect(decayedPrefillTokens(300, 200, 1000, 1500)).toBe(100); // anchor done, the rest stays
    expect(decayedPrefillTokens(300, 200, 1000, -50)).toBe(300); // never above initial
  });

  it('no prediction (null, or NaN in the flat table) keeps the anchor whole; 0 ms means done', () => {
    expect(decayedPrefillTokens(300, 200, null, 10_000)).toBe(300);
    expect(decayedPrefillTokens(300, 200, NaN, 10_000)).toBe(300);
    expect(decayedPrefillTokens(300, 200, 0, 0)).toBe(100);
  });

  it('RankLoads.prefillAt reads the same decay from its flat arrays', () => {
    const L = new RankLoads();
    L.pfCount[3] = 2;
    L.pfSum[3] = 300;
    L.pfInit[3] = 200;
    L.pfExp[3] = 1000;
    L.pfSince[3] = 5000;
    expect(L.prefillAt(3, 5600)).toBe(180);
    L.pfExp[3] = NaN;
    expect(L.prefillAt(3, 9000)).toBe(300);
    expect(L.prefillAt(4, 9000)).toBe(0); // empty slot
  });
});
