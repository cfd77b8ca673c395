/**
 * Identifiers and exact 64-bit values (docs/protocol.md §1). A u64 is a `bigint` at API boundaries and a
 * (lo, hi) pair of u32 words inside typed arrays on hot paths; a JS `number` never carries one.
 */
declare const brand: unique symbol;
type Brand<T, B extends string> = T & { readonly [brand]: B };

export type U64 = bigint;
export type WorkerId = Brand<bigint, 'WorkerId'>;
export type RouterId = Brand<bigint, 'RouterId'>;
export type EventId = Brand<bigint, 'EventId'>;
export type LocalBlockHash = Brand<bigint, 'LocalBlockHash'>;
export type SequenceHash = Brand<bigint, 'SequenceHash'>;
export type ExternalSequenceBlockHash = Brand<bigint, 'ExternalSequenceBlockHash'>;
export type DpRank = number;

export interface WorkerWithDpRank {
  worker_id: WorkerId;
  dp_rank: DpRank;
}

export const U64_MAX = (1n << 64n) - 1n;

/** Reinterpret any integer (signed i64 included) as u64, bit for bit. */
export function asU64(v: bigint | number): bigint {
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v)) throw new RangeError(`not an exact integer: ${v}`);
    v = BigInt(v);
  }
  return BigInt.asUintN(64, v);
}

/** Parses a u64 from a bigint, a safe integer number or a decimal string; throws RangeError otherwise. */
export function parseU64(v: unknown): bigint {
  if (typeof v === 'bigint') {
    if (v < 0n || v > U64_MAX) throw new RangeError(`u64 out of range: ${v}`);
    return v;
  }
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v) || v < 0) throw new RangeError(`not a u64: ${v}`);
    return BigInt(v);
  }
  if (typeof v === 'string' && /^[0-9]{1,20}$/.test(v)) {
    const b = BigInt(v);
    if (b > U64_MAX) throw new RangeError(`u64 out of range: ${v}`);
    return b;
  }
  throw new RangeError(`not a u64: ${String(v)}`);
}

export const u64Lo = (v: bigint): number => Number(v & 0xffffffffn);
export const u64Hi = (v: bigint): number => Number((v >> 32n) & 0xffffffffn);
export const u64FromParts = (lo: number, hi: number): bigint => (BigInt(hi >>> 0) << 32n) | BigInt(lo >>> 0);

/** Lowercase hex, no `0x`, no padding (discovery keys, §1). */
export const u64ToHex = (v: bigint): string => v.toString(16);
export function u64FromHex(s: string): bigint {
  if (!/^[0-9a-f]{1,16}$/.test(s)) throw new RangeError(`not a lowercase hex u64: ${s}`);
  return BigInt('0x' + s);
}

export const workerKey = (w: WorkerWithDpRank): string => `${w.worker_id}:${w.dp_rank}`;
export const asWorkerId = (v: bigint | number | string): WorkerId => parseU64(v) as WorkerId;
