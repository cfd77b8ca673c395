import { describe, expect, it } from 'vitest';
import { KvrError } from '@kvrouter/protocols';
import {
  DecodeLatch,
  DEFAULT_BUSY_THRESHOLDS,
  effectiveBusyThresholds,
  isWorkerBusy,
  NO_BUSY_THRESHOLDS,
  promoteAdmissionControl,
  RankBusyState,
  validateBusyThresholds,
  type BusyThresholds,
} from './busy.js';

const only = (t: Partial<BusyThresholds>): BusyThresholds => ({ ...NO_BUSY_THRESHOLDS, ...t });
const cap = { totalKvBlocks: 100, maxNumBatchedTokens: 100 };

describe('rank busy predicates', () => {
  it('absolute prefill threshold (strictly greater)', () => {
    const s = new RankBusyState();
    const t = only({ activePrefillTokens: 1000 });
    s.observe({ active_prefill_tokens: 1000 });
    expect(s.isBusy(t, cap)).toBe(false);
    s.observe({ active_prefill_tokens: 1001 });
    expect(s.isBusy(t, cap)).toBe(true);
  });

  it('prefill threshold as a multiple of max_num_batched_tokens', () => {
    const s = new RankBusyState();
    const t = only({ activePrefillTokensFrac: 2 });
    // 2 × 100 = 200
    s.observe({ active_prefill_tokens: 200 });
    expect(s.isBusy(t, cap)).toBe(false);
    s.observe({ active_prefill_tokens: 201 });
    expect(s.isBusy(t, cap)).toBe(true);
    expect(s.isBusy(t, { ...cap, maxNumBatchedTokens: 1000 })).toBe(false);
  });

  it('null thresholds skip their check; admission none clears all', () => {
    const s = new RankBusyState();
    s.observe({ active_prefill_tokens: 1e12, active_decode_blocks: 1e6, kv_used_blocks: 1e6 });
    expect(s.isBusy(NO_BUSY_THRESHOLDS, cap)).toBe(false);
    expect(s.isBusy(effectiveBusyThresholds('none', DEFAULT_BUSY_THRESHOLDS), cap)).toBe(false);
    expect(s.isBusy(effectiveBusyThresholds('token-capacity', DEFAULT_BUSY_THRESHOLDS), cap)).toBe(true);
    expect(() => effectiveBusyThresholds('on' as 'none', DEFAULT_BUSY_THRESHOLDS)).toThrow(
      "--admission-control must be one of ('token-capacity', 'none'), got 'on'",
    );
  });

  it('decode latch: set by either signal, cleared only when both are at or under (hysteresis)', () => {
    const s = new RankBusyState();
    const t = only({ activeDecodeBlocks: 0.5 }); // limit 0.5 × 100 = 50
    s.observe({ active_decode_blocks: 51 });
    expect(s.isBusy(t, cap)).toBe(true);
    // the worker reports low occupancy, but the router's decode count still holds the latch
    s.observe({ kv_used_blocks: 10 });
    expect(s.isBusy(t, cap)).toBe(true);
    // decode back at the limit: both ≤ 50 → clears
    s.observe({ active_decode_blocks: 50 });
    expect(s.isBusy(t, cap)).toBe(false);
    // now the worker's occupancy sets it; a low decode reading does not clear it
    s.observe({ kv_used_blocks: 60 });
    expect(s.isBusy(t, cap)).toBe(true);
    s.observe({ active_decode_blocks: 0 });
    expect(s.isBusy(t, cap)).toBe(true);
    expect(s.latch.set).toBe(true);
    // an ActiveLoad without kv_used_blocks keeps the last value
    s.observe({ active_decode_blocks: 0, kv_used_blocks: null });
    expect(s.isBusy(t, cap)).toBe(true);
    s.observe({ kv_used_blocks: 50 });
    expect(s.isBusy(t, cap)).toBe(false);
    expect(s.latch.set).toBe(false);
  });

  it('missing total_kv_blocks skips the decode check', () => {
    const l = new DecodeLatch();
    l.observe(1e6, 1e6);
    expect(l.evaluate(0.5, null)).toBe(false);
    expect(l.evaluate(null, 100)).toBe(false);
    expect(l.evaluate(0.5, 100)).toBe(true);
  });

  it('any one condition is enough', () => {
    const s = new RankBusyState();
    s.observe({ active_prefill_tokens: 10, active_decode_blocks: 99 });
    expect(s.isBusy(DEFAULT_BUSY_THRESHOLDS, cap)).toBe(false); // 99 ≤ 1.0 × 100
    s.observe({ active_decode_blocks: 101 });
    expect(s.isBusy(DEFAULT_BUSY_THRESHOLDS, cap)).toBe(true);
  });

  it('rejects negative signals without changing state', () => {
    const s = new RankBusyState();
    s.observe({ active_prefill_tokens: 5 });
    expect(() => s.observe({ active_prefill_tokens: -1 })).toThrow(KvrError);
    expect(() => s.observe({ active_prefill_tokens: 7, kv_used_blocks: -1 })).toThrow(KvrError);
    expect(() => s.observe({ active_decode_blocks: 70, kv_used_blocks: NaN })).toThrow(KvrError);
    expect(s.activePrefillTokens).toBe(5);
    expect(s.latch.lastDecodeBlocks).toBeNull();
  });
});

describe('worker busy and admission control', () => {
  it('a worker is busy only if all its ranks are', () => {
    expect(isWorkerBusy([true, true])).toBe(true);
    expect(isWorkerBusy([true, false])).toBe(false);
    expect(isWorkerBusy([])).toBe(false);
  });

  it('promotion from none when a threshold was given explicitly', () => {
    expect(promoteAdmissionControl('none', true)).toEqual({ mode: 'token-capacity', promoted: true });
    expect(promoteAdmissionControl('none', false)).toEqual({ mode: 'none', promoted: false });
    expect(promoteAdmissionControl('token-capacity', true)).toEqual({
      mode: 'token-capacity',
      promoted: false,
    });
  });

  it('validation messages (docs/configuration.md)', () => {
    expect(() => validateBusyThresholds(only({ activeDecodeBlocks: 1.5 }))).toThrow(
      '--active-decode-blocks-threshold must be between 0.0 and 1.0, got 1.5',
    );
    expect(() => validateBusyThresholds(only({ activePrefillTokens: -1 }))).toThrow(
      '--active-prefill-tokens-threshold must be >= 0, got -1',
    );
    expect(() => validateBusyThresholds(only({ activePrefillTokensFrac: -2 }))).toThrow(
      '--active-prefill-tokens-threshold-frac must be >= 0, got -2',
    );
    expect(validateBusyThresholds(DEFAULT_BUSY_THRESHOLDS)).toBe(DEFAULT_BUSY_THRESHOLDS);
    expect(validateBusyThresholds(NO_BUSY_THRESHOLDS)).toBe(NO_BUSY_THRESHOLDS);
  });
});
