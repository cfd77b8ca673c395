/**
 * `--planner-profile-data`: pass times interpolated from profiled points instead of the §17
 * polynomials. The file is JSON with the arrays of upstream's mocker NPZ (a `numpy.load` dumped with
 * `{k: v.tolist()}` reads as is):
 *
 * ```json
 * { "prefill_isl": [128, 1024, 8192], "prefill_ttft_ms": [20, 40, 180],
 *   "decode_active_kv_tokens": [0, 100000], "decode_context_length": [128, 4096],
 *   "decode_itl": [[5, 6], [9, 12]] }
 * ```
 *
 * The `.npz` itself is read too (`parsePlannerProfileNpz`). `decode_itl[i][j]` is the step time at x = `decode_active_kv_tokens[i]` and y =
 * `decode_context_length[j]`. Either axis may instead be given as `decode_kv_usage` (active / total
 * KV, 0..1) or `decode_batch_size` (requests decoding). Prefill is linear in the pass's new tokens,
 * decode bilinear; both are clamped at the table's edges (no extrapolation) and decode is at least 1 ms.
 */
import { KvrError } from '@kvrouter/protocols';
import { parseNpz, type InflateRaw, type NpyArray } from './npz.js';
import type { DecodeShape, TimingModel } from './timing.js';

type XAxis = 'decode_active_kv_tokens' | 'decode_kv_usage';
type YAxis = 'decode_context_length' | 'decode_batch_size';

export interface PlannerProfile {
  prefillIsl: Float64Array;
  prefillMs: Float64Array;
  decodeX: Float64Array;
  decodeXAxis: XAxis;
  decodeY: Float64Array;
  decodeYAxis: YAxis;
  /** Row-major, `decodeX.length × decodeY.length`. */
  decodeMs: Float64Array;
}

function fail(source: string, problem: string): never {
  throw new KvrError('invalid_argument', `--planner-profile-data ${source}: ${problem}`, 400, {
    flag: '--planner-profile-data',
  });
}

function axis(o: Record<string, unknown>, key: string, source: string, lo: number): Float64Array {
  const v = o[key];
  if (!Array.isArray(v) || v.length === 0) fail(source, `${key}: expected a non-empty array of numbers`);
  const a = new Float64Array(v.length);
  for (let i = 0; i < v.length; i++) {
    const x: unknown = v[i];
    if (typeof x !== 'number' || !Number.isFinite(x) || x < lo)
      fail(source, `${key}[${i}]: expected a finite number >= ${lo}, got ${JSON.stringify(x)}`);
    if (i > 0 && x <= a[i - 1])
      fail(source, `${key}[${i}]: values must increase strictly (${a[i - 1]} then ${x})`);
    a[i] = x;
  }
  return a;
}

function values(v: unknown, key: string, n: number, source: string): Float64Array {
  if (!Array.isArray(v) || v.length !== n) fail(source, `${key}: expected ${n} numbers`);
  const a = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const x: unknown = v[i];
    if (typeof x !== 'number' || !Number.isFinite(x) || x < 0)
      fail(source, `${key}[${i}]: expected a finite number >= 0 (ms), got ${JSON.stringify(x)}`);
    a[i] = x;
  }
  return a;
}

function oneOf<K extends string>(o: Record<string, unknown>, keys: readonly K[], source: string): K {
  const present = keys.filter((k) => k in o);
  if (present.length !== 1)
    fail(
      source,
      `expected exactly one of ${keys.join(', ')}${present.length > 1 ? `, got ${present.join(' and ')}` : ''}`,
    );
  return present[0];
}

/** Parses and checks a JSON file; every error names the flag, the file and the field. */
export function parsePlannerProfile(text: string, source: string): PlannerProfile {
  let o: unknown;
  try {
    o = JSON.parse(text);
  } catch (e) {
    fail(source, `not valid JSON (${e instanceof Error ? e.message : String(e)})`);
  }
  if (typeof o !== 'object' || o === null || Array.isArray(o))
    fail(source, 'expected a JSON object of arrays');
  return profileFromArrays(o as Record<string, unknown>, source);
}

/** The same from upstream's `.npz` itself (`inflateRaw` for `savez_compressed` files). */
export function parsePlannerProfileNpz(
  bytes: Uint8Array,
  source: string,
  inflateRaw?: InflateRaw,
): PlannerProfile {
  let arrays: Map<string, NpyArray>;
  try {
    arrays = parseNpz(bytes, inflateRaw);
  } catch (e) {
    fail(source, `not a readable .npz (${e instanceof Error ? e.message : String(e)})`);
  }
  const o: Record<string, unknown> = {};
  for (const [k, a] of arrays) {
    const flat = Array.from(a.data);
    if (a.shape.length === 2) {
      const cols = a.shape[1];
      o[k] = Array.from({ length: a.shape[0] }, (_, i) => flat.slice(i * cols, (i + 1) * cols));
    } else o[k] = flat;
  }
  return profileFromArrays(o, source);
}

function profileFromArrays(r: Record<string, unknown>, source: string): PlannerProfile {
  const prefillIsl = axis(r, 'prefill_isl', source, 0);
  const prefillMs = values(r.prefill_ttft_ms, 'prefill_ttft_ms', prefillIsl.length, source);
  const decodeXAxis = oneOf(r, ['decode_active_kv_tokens', 'decode_kv_usage'] as const, source);
  const decodeYAxis = oneOf(r, ['decode_context_length', 'decode_batch_size'] as const, source);
  const decodeX = axis(r, decodeXAxis, source, 0);
  const decodeY = axis(r, decodeYAxis, source, 0);
  if (decodeXAxis === 'decode_kv_usage' && decodeX[decodeX.length - 1] > 1)
    fail(source, 'decode_kv_usage: values are fractions in [0, 1]');
  const rows = r.decode_itl;
  if (!Array.isArray(rows) || rows.length !== decodeX.length) {
    fail(source, `decode_itl: expected ${decodeX.length} rows (one per ${decodeXAxis} value)`);
  }
  const decodeMs = new Float64Array(decodeX.length * decodeY.length);
  for (let i = 0; i < decodeX.length; i++)
    decodeMs.set(values(rows[i], `decode_itl[${i}]`, decodeY.length, source), i * decodeY.length);
  return { prefillIsl, prefillMs, decodeX, decodeXAxis, decodeY, decodeYAxis, decodeMs };
}

/** Index i and weight t with x between xs[i] and xs[i + 1] (t = 0 at i), clamped to the ends. */
function bracket(xs: Float64Array, x: number): [number, number] {
  const n = xs.length;
  if (n === 1 || x <= xs[0]) return [0, 0];
  if (x >= xs[n - 1]) return [n - 1, 0];
  let lo = 0;
  let hi = n - 1;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (xs[mid] <= x) lo = mid;
    else hi = mid;
  }
  return [lo, (x - xs[lo]) / (xs[lo + 1] - xs[lo])];
}

export function interp1(xs: Float64Array, ys: Float64Array, x: number): number {
  const [i, t] = bracket(xs, x);
  return t === 0 ? ys[i] : ys[i] + t * (ys[i + 1] - ys[i]);
}

/** Bilinear on a row-major grid `z[i · ny + j]` at (x, y), clamped at the edges. */
export function interp2(xs: Float64Array, ys: Float64Array, z: Float64Array, x: number, y: number): number {
  const ny = ys.length;
  const [i, tx] = bracket(xs, x);
  const [j, ty] = bracket(ys, y);
  const i1 = tx === 0 ? i : i + 1;
  const j1 = ty === 0 ? j : j + 1;
  const a = z[i * ny + j] + ty * (z[i * ny + j1] - z[i * ny + j]);
  const b = z[i1 * ny + j] + ty * (z[i1 * ny + j1] - z[i1 * ny + j]);
  return a + tx * (b - a);
}

/**
 * The engine's `TimingModel` over a profile. `totalKvTokens` (blocks × block size) turns the kv
 * usage fraction into active tokens when the table's x axis is in tokens.
 */
export function profileTiming(p: PlannerProfile, totalKvTokens: number): TimingModel {
  const shapeX = (s: DecodeShape): number =>
    p.decodeXAxis === 'decode_kv_usage' ? s.kvUsage : Math.min(s.contextTokens, totalKvTokens);
  const shapeY = (s: DecodeShape): number =>
    p.decodeYAxis === 'decode_batch_size' ? s.batch : s.batch > 0 ? s.contextTokens / s.batch : 0;
  const step = (s: DecodeShape): number =>
    Math.max(1, interp2(p.decodeX, p.decodeY, p.decodeMs, shapeX(s), shapeY(s)));
  return {
    prefillMs: (x) => interp1(p.prefillIsl, p.prefillMs, x),
    // Without the batch shape, assume one request holding the whole active KV.
    decodeMs: (u) => step({ kvUsage: u, batch: 1, contextTokens: u * totalKvTokens }),
    decodeStepMs: step,
  };
}
