/** Argument checks of this package's API; failures are `invalidArgument` (status 400, `detail.field`). */
import { U64_MAX, describeValue as describe, invalidArgument } from '@kvrouter/protocols';

export function checkU64(v: unknown, field: string): bigint {
  if (typeof v !== 'bigint' || v < 0n || v > U64_MAX)
    throw invalidArgument(field, `must be a u64 bigint, got ${describe(v)}`);
  return v;
}

export function checkU32(v: unknown, field: string): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 0xffffffff)
    throw invalidArgument(field, `must be a u32 integer, got ${describe(v)}`);
  return v;
}

export function checkPositive(v: unknown, field: string, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0 || v > max)
    throw invalidArgument(field, `must be a number in (0, ${max}], got ${describe(v)}`);
  return v;
}

export function checkCount(v: unknown, field: string): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0)
    throw invalidArgument(field, `must be a non-negative integer, got ${describe(v)}`);
  return v;
}
