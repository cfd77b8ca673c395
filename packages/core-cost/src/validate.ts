/**
 * Argument checks shared by the modules of this package. Every failure is a KvrError with code
 * `invalid_argument`, status 400 and `detail.field` naming the offending field, thrown before any
 * state is touched.
 */
import { invalidArgument as invalid } from '@kvrouter/protocols';

/** The kernel's one `invalid_argument` factory, under this package's short name. */
export { invalid };

export function finiteNonNeg(field: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0)
    throw invalid(field, 'must be a finite number >= 0', v);
  return v;
}

export function unitInterval(field: string, v: unknown): number {
  if (typeof v !== 'number' || !(v >= 0 && v <= 1)) throw invalid(field, 'must be between 0.0 and 1.0', v);
  return v;
}

export function nonNegInt(field: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0)
    throw invalid(field, 'must be an integer >= 0', v);
  return v;
}

export function posInt(field: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1)
    throw invalid(field, 'must be an integer >= 1', v);
  return v;
}

export function finite(field: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isFinite(v)) throw invalid(field, 'must be a finite number', v);
  return v;
}

export function bool(field: string, v: unknown): boolean {
  if (typeof v !== 'boolean') throw invalid(field, 'must be a boolean', v);
  return v;
}
