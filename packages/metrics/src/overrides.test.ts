import { describe, expect, it } from 'vitest';
import { KvrError } from '@kvrouter/protocols';
import { FrontendMetrics } from './frontend.js';
import {
  bucketOverridesFromConfig,
  bucketOverridesFromEnv,
  frontendBucketLists,
  resolveFrontendBuckets,
} from './overrides.js';
import { createRegistry } from './registry.js';
import { histogramOf, scrape } from './test-helpers.js';

const errOf = (f: () => unknown): KvrError => {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(KvrError);
    return e as KvrError;
  }
  throw new Error('did not throw');
};

describe('bucketOverridesFromEnv', () => {
  it('reads only the variables that are set and non-empty', () => {
    expect(
      bucketOverridesFromEnv({
        DYN_METRICS_TTFT_MIN: '0.01',
        DYN_METRICS_TTFT_COUNT: ' 4 ',
        DYN_METRICS_ITL_MAX: '',
        DYN_METRICS_REQUEST_DURATION_MAX: '1e3',
        UNRELATED: 'x',
      }),
    ).toEqual({ ttft: { min: 0.01, count: 4 }, requestDuration: { max: 1000 } });
    expect(bucketOverridesFromEnv({})).toEqual({});
  });

  it('rejects text that is not a number, naming the variable', () => {
    const e = errOf(() => bucketOverridesFromEnv({ DYN_METRICS_INPUT_SEQUENCE_MAX: 'lots' }));
    expect(e.detail?.field).toBe('DYN_METRICS_INPUT_SEQUENCE_MAX');
    expect(e.message).toBe('DYN_METRICS_INPUT_SEQUENCE_MAX must be a number, got "lots"');
    expect(e.status).toBe(400);
    expect(errOf(() => bucketOverridesFromEnv({ DYN_METRICS_ITL_COUNT: '2.5' })).detail?.field).toBe(
      'DYN_METRICS_ITL_COUNT',
    );
    expect(errOf(() => bucketOverridesFromEnv({ DYN_METRICS_ITL_COUNT: '-3' })).detail?.field).toBe(
      'DYN_METRICS_ITL_COUNT',
    );
  });
});

describe('bucketOverridesFromConfig', () => {
  it('maps the config keys of @kvrouter/config', () => {
    expect(
      bucketOverridesFromConfig({ metricsOutputSequenceCount: 5, metricsItlMin: 0.002, metricsItlMax: 4 }),
    ).toEqual({ outputSequence: { count: 5 }, itl: { min: 0.002, max: 4 } });
  });
});

describe('resolveFrontendBuckets', () => {
  it('defaults are the §16 specs', () => {
    expect(resolveFrontendBuckets()).toEqual({
      requestDuration: { min: 1, max: 256, count: 10 },
      inputSequence: { min: 50, max: 128000, count: 12 },
      outputSequence: { min: 50, max: 32000, count: 10 },
      ttft: { min: 0.001, max: 480, count: 18 },
      itl: { min: 0.001, max: 2, count: 13 },
    });
  });

  it('merges a partial override over the defaults of the same histogram', () => {
    const s = resolveFrontendBuckets({ ttft: { max: 10, count: 5 } });
    expect(s.ttft).toEqual({ min: 0.001, max: 10, count: 5 });
    // log(0.001, 10, 5): 0.001 · 10^(i) for i = 0..4 (ratio 10000^(1/4) = 10)
    expect(frontendBucketLists(s).ttft).toEqual([0, 0.001, 0.01, 0.1, 1, 10]);
    expect(s.itl).toEqual({ min: 0.001, max: 2, count: 13 });
  });

  it('names the variable that breaks MIN < MAX', () => {
    // Only MIN given, above the default MAX 480.
    const a = errOf(() => resolveFrontendBuckets({ ttft: { min: 500 } }));
    expect(a.detail?.field).toBe('DYN_METRICS_TTFT_MIN');
    expect(a.message).toBe('DYN_METRICS_TTFT_MIN must be less than DYN_METRICS_TTFT_MAX (480), got 500');
    // Only MAX given, below the default MIN 50.
    const b = errOf(() => resolveFrontendBuckets({ outputSequence: { max: 10 } }));
    expect(b.detail?.field).toBe('DYN_METRICS_OUTPUT_SEQUENCE_MAX');
    expect(b.message).toBe(
      'DYN_METRICS_OUTPUT_SEQUENCE_MAX must be greater than DYN_METRICS_OUTPUT_SEQUENCE_MIN (50), got 10',
    );
  });

  it('rejects non-positive MIN, non-finite MAX and out-of-range COUNT', () => {
    expect(errOf(() => resolveFrontendBuckets({ itl: { min: 0 } })).detail?.field).toBe(
      'DYN_METRICS_ITL_MIN',
    );
    expect(errOf(() => resolveFrontendBuckets({ itl: { min: NaN } })).detail?.field).toBe(
      'DYN_METRICS_ITL_MIN',
    );
    expect(errOf(() => resolveFrontendBuckets({ itl: { max: Infinity } })).detail?.field).toBe(
      'DYN_METRICS_ITL_MAX',
    );
    expect(errOf(() => resolveFrontendBuckets({ requestDuration: { count: 0 } })).detail?.field).toBe(
      'DYN_METRICS_REQUEST_DURATION_COUNT',
    );
    expect(errOf(() => resolveFrontendBuckets({ inputSequence: { count: 513 } })).detail?.field).toBe(
      'DYN_METRICS_INPUT_SEQUENCE_COUNT',
    );
  });
});

describe('overrides reach the frontend histograms only', () => {
  it('DYN_METRICS_TTFT_* changes the frontend TTFT buckets, not the router one', async () => {
    const registry = createRegistry();
    const f = new FrontendMetrics(registry, {
      buckets: bucketOverridesFromEnv({
        DYN_METRICS_TTFT_MIN: '0.01',
        DYN_METRICS_TTFT_MAX: '10',
        DYN_METRICS_TTFT_COUNT: '4',
      }),
    });
    f.timeToFirstTokenSeconds.observe({ model: 'm' }, 0.5);
    const h = histogramOf(await scrape(registry), 'dynamo_frontend_time_to_first_token_seconds', {
      model: 'm',
    })!;
    // log(0.01, 10, 4): ratio 1000^(1/3) = 10 -> 0.01, 0.1, 1, 10
    expect(h.le).toEqual([0, 0.01, 0.1, 1, 10]);
    // 0.5 falls in (0.1, 1]
    expect(h.cumulative).toEqual([0, 0, 0, 1, 1, 1]);
    expect(f.buckets.ttft).toEqual([0, 0.01, 0.1, 1, 10]);
  });

  it('a bad override registers nothing', async () => {
    const registry = createRegistry();
    expect(() => new FrontendMetrics(registry, { buckets: { itl: { count: 0 } } })).toThrow(KvrError);
    expect((await registry.metrics()).trim()).toBe('');
    // and the registry is still usable
    new FrontendMetrics(registry);
    expect(await registry.metrics()).toContain('dynamo_frontend_requests_total');
  });
});
