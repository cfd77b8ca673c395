/**
 * `DYN_METRICS_{REQUEST_DURATION,INPUT_SEQUENCE,OUTPUT_SEQUENCE,TTFT,ITL}_{MIN,MAX,COUNT}` (docs/configuration.md
 * "Monitoring"): per-histogram overrides of the `log(min, max, count)` bucket generation. Pure
 * functions: the env arrives as a record, errors name the variable (`detail.field`).
 */
import { KvrError } from '@kvrouter/protocols';
import {
  DEFAULT_LOG_SPECS,
  logBuckets,
  MAX_BUCKET_COUNT,
  type LogBucketSpec,
  type OverridableHistogram,
} from './buckets.js';

/** Env stem of each overridable histogram. */
export const OVERRIDE_ENV: Readonly<Record<OverridableHistogram, string>> = Object.freeze({
  requestDuration: 'DYN_METRICS_REQUEST_DURATION',
  inputSequence: 'DYN_METRICS_INPUT_SEQUENCE',
  outputSequence: 'DYN_METRICS_OUTPUT_SEQUENCE',
  ttft: 'DYN_METRICS_TTFT',
  itl: 'DYN_METRICS_ITL',
});

const KEYS = Object.keys(DEFAULT_LOG_SPECS) as OverridableHistogram[];

export type BucketOverrides = Partial<Record<OverridableHistogram, Partial<LogBucketSpec>>>;
export type FrontendBucketSpecs = Record<OverridableHistogram, LogBucketSpec>;

const err = (v: string, reason: string, got: string | number) =>
  new KvrError(
    'invalid_argument',
    `${v} ${reason}, got ${typeof got === 'string' ? JSON.stringify(got) : got}`,
    400,
    {
      field: v,
    },
  );

const FLOAT_RE = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/**
 * Reads the 15 variables from `env` (unset or empty = not given) and returns only what was given.
 * Text must be a decimal number (MIN/MAX) or integer (COUNT); ranges are checked by
 * `resolveFrontendBuckets`, where the defaults of the other end are known.
 */
export function bucketOverridesFromEnv(env: Readonly<Record<string, string | undefined>>): BucketOverrides {
  const out: BucketOverrides = {};
  for (const k of KEYS) {
    const stem = OVERRIDE_ENV[k];
    const o: Partial<LogBucketSpec> = {};
    for (const [field, suffix] of [
      ['min', '_MIN'],
      ['max', '_MAX'],
      ['count', '_COUNT'],
    ] as const) {
      const name = stem + suffix;
      const raw = env[name];
      if (raw === undefined || raw.trim() === '') continue;
      const s = raw.trim();
      if (field === 'count') {
        if (!/^\d+$/.test(s)) throw err(name, 'must be an integer', raw);
        o.count = Number(s);
      } else {
        if (!FLOAT_RE.test(s)) throw err(name, 'must be a number', raw);
        o[field] = Number(s);
      }
    }
    if (Object.keys(o).length > 0) out[k] = o;
  }
  return out;
}

/** The config keys of the same overrides (`@kvrouter/config` resolves CLI > env > default). */
export interface BucketConfigLike {
  metricsRequestDurationMin?: number;
  metricsRequestDurationMax?: number;
  metricsRequestDurationCount?: number;
  metricsInputSequenceMin?: number;
  metricsInputSequenceMax?: number;
  metricsInputSequenceCount?: number;
  metricsOutputSequenceMin?: number;
  metricsOutputSequenceMax?: number;
  metricsOutputSequenceCount?: number;
  metricsTtftMin?: number;
  metricsTtftMax?: number;
  metricsTtftCount?: number;
  metricsItlMin?: number;
  metricsItlMax?: number;
  metricsItlCount?: number;
}

const CONFIG_STEM: Readonly<Record<OverridableHistogram, string>> = {
  requestDuration: 'RequestDuration',
  inputSequence: 'InputSequence',
  outputSequence: 'OutputSequence',
  ttft: 'Ttft',
  itl: 'Itl',
};

export function bucketOverridesFromConfig(cfg: BucketConfigLike): BucketOverrides {
  const c = cfg as Record<string, number | undefined>;
  const out: BucketOverrides = {};
  for (const k of KEYS) {
    const o: Partial<LogBucketSpec> = {};
    const stem = `metrics${CONFIG_STEM[k]}`;
    if (c[`${stem}Min`] !== undefined) o.min = c[`${stem}Min`];
    if (c[`${stem}Max`] !== undefined) o.max = c[`${stem}Max`];
    if (c[`${stem}Count`] !== undefined) o.count = c[`${stem}Count`];
    if (Object.keys(o).length > 0) out[k] = o;
  }
  return out;
}

/**
 * Merges overrides over the §16 defaults and checks each histogram: MIN finite > 0, MAX finite >
 * MIN, COUNT integer in [1, 512]. Unlike upstream, which logs and falls back to the defaults, a bad
 * value is an error naming the variable, so a typo cannot silently change the dashboards.
 */
export function resolveFrontendBuckets(overrides: BucketOverrides = {}): FrontendBucketSpecs {
  const out = {} as FrontendBucketSpecs;
  for (const k of KEYS) {
    const s = { ...DEFAULT_LOG_SPECS[k], ...definedOnly(overrides[k]) };
    const stem = OVERRIDE_ENV[k];
    if (typeof s.min !== 'number' || !Number.isFinite(s.min) || !(s.min > 0))
      throw err(`${stem}_MIN`, 'must be a finite number > 0', s.min);
    if (typeof s.max !== 'number' || !Number.isFinite(s.max))
      throw err(`${stem}_MAX`, 'must be a finite number', s.max);
    if (!(s.min < s.max)) {
      // Name the variable that was given; with both given, MIN (config's convention).
      if (overrides[k]?.min !== undefined)
        throw err(`${stem}_MIN`, `must be less than ${stem}_MAX (${s.max})`, s.min);
      throw err(`${stem}_MAX`, `must be greater than ${stem}_MIN (${s.min})`, s.max);
    }
    if (!Number.isInteger(s.count) || s.count < 1 || s.count > MAX_BUCKET_COUNT)
      throw err(`${stem}_COUNT`, `must be an integer in [1, ${MAX_BUCKET_COUNT}]`, s.count);
    out[k] = { min: s.min, max: s.max, count: s.count };
  }
  return out;
}

function definedOnly(o: Partial<LogBucketSpec> | undefined): Partial<LogBucketSpec> {
  const r: Partial<LogBucketSpec> = {};
  if (o?.min !== undefined) r.min = o.min;
  if (o?.max !== undefined) r.max = o.max;
  if (o?.count !== undefined) r.count = o.count;
  return r;
}

/** The five bucket lists the frontend histograms use. */
export function frontendBucketLists(specs: FrontendBucketSpecs): Record<OverridableHistogram, number[]> {
  const out = {} as Record<OverridableHistogram, number[]>;
  for (const k of KEYS) out[k] = logBuckets(specs[k].min, specs[k].max, specs[k].count);
  return out;
}
