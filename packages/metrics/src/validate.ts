/**
 * Input checks shared by the families. Every public entry point checks all of its arguments before
 * touching a metric, so a bad call never leaves half an update behind.
 */
import { invalidArgument as invalid } from '@kvrouter/protocols';

/** The kernel's one `invalid_argument` factory, under this package's short name. */
export { invalid };

/** A finite number >= 0 (durations, token counts, ratios). */
export function checkNonNeg(field: string, v: number): number {
  if (typeof v !== 'number' || !(v >= 0) || v === Infinity)
    throw invalid(field, 'must be a finite number >= 0', v);
  return v;
}

export function checkCount(field: string, v: number): number {
  if (!Number.isSafeInteger(v) || v < 0) throw invalid(field, 'must be an integer >= 0', v);
  return v;
}

export function checkRatio(field: string, v: number): number {
  if (typeof v !== 'number' || !(v >= 0 && v <= 1)) throw invalid(field, 'must be a number in [0, 1]', v);
  return v;
}

export function checkOneOf<T extends string>(field: string, allowed: readonly T[], v: unknown): T {
  if (typeof v !== 'string' || !(allowed as readonly string[]).includes(v))
    throw invalid(field, `must be one of ${allowed.map((a) => JSON.stringify(a)).join(', ')}`, v);
  return v as T;
}

export function checkString(field: string, v: unknown): string {
  if (typeof v !== 'string') throw invalid(field, 'must be a string', v);
  return v;
}

/** Worker ids are u64: label values are their decimal text, as upstream prints them. */
export function workerIdLabel(field: string, v: bigint | number): string {
  if (typeof v === 'bigint') {
    if (v < 0n || v >= 1n << 64n) throw invalid(field, 'must be a u64', v);
    return v.toString();
  }
  if (!Number.isSafeInteger(v) || v < 0) throw invalid(field, 'must be a u64', v);
  return String(v);
}

export function dpRankLabel(field: string, v: number): string {
  if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) throw invalid(field, 'must be a u32', v);
  return String(v);
}
