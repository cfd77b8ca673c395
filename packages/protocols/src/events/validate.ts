/**
 * Field readers shared by the JSON and msgpack decoders. A decoded value tree holds integers as
 * `number` or `bigint` (whichever the format produced); these readers normalise them and throw a
 * `DecodeError` whose message starts with the field path (`a.b[3].c: expected u64`). Paths are only
 * built on the error branch, so the success path allocates nothing extra.
 */
import { DecodeError } from '../errors.js';
import { U64_MAX } from '../ids.js';

export type Obj = Record<string, unknown>;

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const I64_MIN = -(1n << 63n);
const U32_MAX = 0xffffffff;

export function describe(v: unknown): string {
  if (v === null) return 'null';
  if (v === undefined) return 'nothing';
  if (Array.isArray(v)) return `array(${v.length})`;
  if (v instanceof Uint8Array) return `bytes(${v.length})`;
  switch (typeof v) {
    case 'string':
      return v.length > 40 ? `string "${v.slice(0, 40)}…"` : `string "${v}"`;
    case 'number':
    case 'bigint':
    case 'boolean':
      return String(v);
    default:
      return typeof v;
  }
}

export function fail(path: string, expected: string, got?: unknown): never {
  path ||= '<root>';
  const msg =
    arguments.length > 2 ? `${path}: expected ${expected}, got ${describe(got)}` : `${path}: ${expected}`;
  throw new DecodeError(msg, { field: path });
}

export const join = (base: string, key: string): string => (base ? `${base}.${key}` : key);
export const at = (base: string, i: number): string => `${base}[${i}]`;

export function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array);
}

export function obj(v: unknown, path: string): Obj {
  if (!isObj(v)) fail(path, 'object', v);
  return v;
}

export function arr(v: unknown, path: string, max?: number, what = 'elements'): unknown[] {
  if (!Array.isArray(v)) fail(path, 'array', v);
  if (max !== undefined && v.length > max) fail(path, `too many ${what} (${v.length} > limit ${max})`);
  return v;
}

/**
 * u64 from a number (safe integer), a bigint or a decimal string. `signed` additionally accepts a
 * negative i64 and reinterprets it bit for bit (engine hashes, §1).
 */
function toU64(v: unknown, signed: boolean): bigint | undefined {
  switch (typeof v) {
    case 'bigint':
      if (v >= 0n) return v <= U64_MAX ? v : undefined;
      return signed && v >= I64_MIN ? BigInt.asUintN(64, v) : undefined;
    case 'number':
      if (!Number.isSafeInteger(v)) return undefined;
      if (v >= 0) return BigInt(v);
      return signed ? BigInt.asUintN(64, BigInt(v)) : undefined;
    case 'string': {
      if (v.length === 0 || v.length > 20) return undefined;
      for (let i = 0; i < v.length; i++) {
        const c = v.charCodeAt(i);
        if (c < 0x30 || c > 0x39) return undefined;
      }
      const b = BigInt(v);
      return b <= U64_MAX ? b : undefined;
    }
    default:
      return undefined;
  }
}

export function u64(v: unknown, path: string, signed = false): bigint {
  const r = toU64(v, signed);
  if (r === undefined) fail(path, 'u64', v);
  return r;
}

export function u64OrNull(v: unknown, path: string, signed = false): bigint | null {
  return v === null || v === undefined ? null : u64(v, path, signed);
}

export function u32(v: unknown, path: string): number {
  if (typeof v === 'number') {
    // A float -0 on the wire is integer 0 (kept as -0 it would encode differently).
    if (Number.isInteger(v) && v >= 0 && v <= U32_MAX) return v === 0 ? 0 : v;
  } else if (typeof v === 'bigint' && v >= 0n && v <= BigInt(U32_MAX)) return Number(v);
  return fail(path, 'u32', v);
}

export function u32OrNull(v: unknown, path: string): number | null {
  return v === null || v === undefined ? null : u32(v, path);
}

/** A u64 count or duration that must stay exact as a JS number (< 2^53). */
export function count(v: unknown, path: string): number {
  if (typeof v === 'number') {
    if (Number.isSafeInteger(v) && v >= 0) return v === 0 ? 0 : v;
  } else if (typeof v === 'bigint' && v >= 0n && v <= MAX_SAFE) return Number(v);
  return fail(path, 'u64 below 2^53', v);
}

export function countOrNull(v: unknown, path: string): number | null {
  return v === null || v === undefined ? null : count(v, path);
}

export function str(v: unknown, path: string): string {
  if (typeof v !== 'string') fail(path, 'string', v);
  return v;
}

export function strOrNull(v: unknown, path: string): string | null {
  return v === null || v === undefined ? null : str(v, path);
}

export function bool(v: unknown, path: string): boolean {
  if (typeof v !== 'boolean') fail(path, 'boolean', v);
  return v;
}

export function bytes(v: unknown, path: string): Uint8Array {
  if (!(v instanceof Uint8Array)) fail(path, 'bytes', v);
  return v;
}

/** A finite number (floats may arrive as integers, and 64-bit integers as bigints). */
export function finite(v: unknown, path: string): number {
  if (typeof v === 'number' && Number.isFinite(v)) return v;
  if (typeof v === 'bigint') return Number(v);
  return fail(path, 'number', v);
}

/** Externally tagged enum `{Variant: body}` or a bare unit variant `"Variant"`: returns the tag. */
export function tagOf(v: unknown, path: string, units: readonly string[], bodies: readonly string[]): string {
  if (typeof v === 'string') {
    if (units.includes(v)) return v;
    if (bodies.includes(v)) fail(path, `variant "${v}" needs a body`);
    fail(path, `unknown kind "${v}"`);
  }
  if (!isObj(v)) fail(path, `one of ${[...units, ...bodies].join(', ')}`, v);
  const keys = Object.keys(v);
  if (keys.length !== 1) fail(path, `exactly one variant key, got ${keys.length} (${keys.join(', ')})`);
  const k = keys[0];
  if (bodies.includes(k)) return k;
  if (units.includes(k)) fail(path, `unit variant "${k}" must be a bare string`);
  return fail(path, `unknown kind "${k}"`);
}
