/**
 * Field checks for discovery records. The same rules serve a caller's input (`invalid_argument`)
 * and a record read back from discovery (`decode_error`); either way the error names the field.
 */
import { DecodeError, type KvrError, invalidArgument } from '@kvrouter/protocols';

export type Fail = (field: string, msg: string) => KvrError;
export const inputFail: Fail = (field, msg) => invalidArgument(field, msg);
export const decodeFail: Fail = (field, msg) => new DecodeError(`${field}: ${msg}`, { field });

export type Obj = Record<string, unknown>;

export function describe(v: unknown): string {
  if (v === null) return 'null';
  if (v === undefined) return 'nothing';
  if (Array.isArray(v)) return `array(${v.length})`;
  if (typeof v === 'string') return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v);
  if (typeof v === 'number' || typeof v === 'bigint' || typeof v === 'boolean') return `${typeof v} ${v}`;
  return typeof v;
}

export function obj(v: unknown, field: string, f: Fail): Obj {
  if (typeof v !== 'object' || v === null || Array.isArray(v) || ArrayBuffer.isView(v))
    throw f(field, `expected an object, got ${describe(v)}`);
  return v as Obj;
}

export function str(v: unknown, field: string, f: Fail): string {
  if (typeof v !== 'string' || v.length === 0)
    throw f(field, `expected a non-empty string, got ${describe(v)}`);
  return v;
}

export function strOrNull(v: unknown, field: string, f: Fail): string | null {
  return v === null || v === undefined ? null : str(v, field, f);
}

export function bool(v: unknown, field: string, f: Fail): boolean {
  if (typeof v !== 'boolean') throw f(field, `expected a boolean, got ${describe(v)}`);
  return v;
}

/** An integer in [min, max] that a JS number holds exactly (counts, sizes, ranks). */
export function int(v: unknown, field: string, f: Fail, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const n = typeof v === 'bigint' && v >= BigInt(min) && v <= BigInt(max) ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < min || n > max)
    throw f(field, `expected an integer in [${min}, ${max}], got ${describe(v)}`);
  return n;
}

export function intOrNull(v: unknown, field: string, f: Fail, min: number, max?: number): number | null {
  return v === null || v === undefined ? null : int(v, field, f, min, max);
}

export function u64(v: unknown, field: string, f: Fail): bigint {
  if (typeof v === 'bigint' && v >= 0n && v < 1n << 64n) return v;
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return BigInt(v);
  throw f(field, `expected a u64 integer, got ${describe(v)}`);
}

export function oneOf<T extends string>(v: unknown, field: string, f: Fail, allowed: readonly T[]): T {
  if (typeof v !== 'string' || !(allowed as readonly string[]).includes(v))
    throw f(field, `expected one of ${allowed.join('|')}, got ${describe(v)}`);
  return v as T;
}
