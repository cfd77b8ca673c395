import { KvrError } from '@kvrouter/protocols';

/** A bad argument to this package's API: status 400, `detail.field` names it. */
export function invalidArg(field: string, message: string): KvrError {
  return new KvrError('invalid_argument', `${field}: ${message}`, 400, { field });
}

export function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

const MAX_U64 = (1n << 64n) - 1n;

export function checkU64(v: unknown, field: string): bigint {
  if (typeof v !== 'bigint' || v < 0n || v > MAX_U64)
    throw invalidArg(field, `must be a u64 bigint, got ${describe(v)}`);
  return v;
}

export function checkU32(v: unknown, field: string): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 0xffffffff)
    throw invalidArg(field, `must be a u32 integer, got ${describe(v)}`);
  return v;
}

export function checkPositive(v: unknown, field: string, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0 || v > max)
    throw invalidArg(field, `must be a number in (0, ${max}], got ${describe(v)}`);
  return v;
}

export function checkCount(v: unknown, field: string): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0)
    throw invalidArg(field, `must be a non-negative integer, got ${describe(v)}`);
  return v;
}

export function describe(v: unknown): string {
  if (typeof v === 'bigint') return `${v}n`;
  if (typeof v === 'string') return JSON.stringify(v);
  if (v === null || typeof v !== 'object') return String(v);
  return Array.isArray(v) ? 'an array' : 'an object';
}
