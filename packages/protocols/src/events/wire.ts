/**
 * Byte-level plumbing shared by every codec: msgpack with exact 64-bit integers, lossless JSON, input
 * size limits, and the `Codec` shape (value tree <-> typed message, then <-> bytes or text).
 */
import { Decoder, Encoder } from '@msgpack/msgpack';
import { DecodeError } from '../errors.js';
import { parseJson, stringifyJson } from './json.js';

export interface DecodeLimits {
  /** Maximum blocks (stored blocks or removed hashes) in one KV event. Default 65 536. */
  maxBlocks?: number;
  /** Maximum encoded size in bytes (JSON: UTF-16 code units of the text). Default 32 MiB. */
  maxBytes?: number;
}

export const DEFAULT_MAX_BLOCKS = 65_536;
/** Same as the request plane's maximum frame (§5.7). */
export const DEFAULT_MAX_BYTES = 32 * 1024 * 1024;

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * bigint -> number when exact, so the msgpack encoder picks the smallest integer format (a bigint is
 * always written as 9 bytes). Values above 2^53 stay bigint and encode as uint64.
 */
export const u64Out = (v: bigint): number | bigint => (v <= MAX_SAFE ? Number(v) : v);
export const u64OutOrNull = (v: bigint | null): number | bigint | null => (v === null ? null : u64Out(v));

const encoder = new Encoder({ useBigInt64: true, ignoreUndefined: true });

export function encodeMsgpack(v: unknown): Uint8Array {
  return encoder.encode(v);
}

const decoders = new Map<number, Decoder>();

function decoderFor(maxBytes: number): Decoder {
  let d = decoders.get(maxBytes);
  if (!d) {
    // Each element takes at least one byte, so a declared length above the input size is a lie;
    // capping lengths at maxBytes stops a tiny header from making the decoder allocate a huge array.
    const cap = Math.min(maxBytes, 0xffffffff);
    d = new Decoder({
      useBigInt64: true,
      maxStrLength: cap,
      maxBinLength: cap,
      maxArrayLength: cap,
      maxMapLength: cap,
      maxExtLength: cap,
    });
    if (decoders.size > 8) decoders.clear();
    decoders.set(maxBytes, d);
  }
  return d;
}

/** Decodes exactly one msgpack value filling `bytes`; any malformation is a `DecodeError` on `what`. */
export function decodeMsgpack(bytes: Uint8Array, what: string, maxBytes = DEFAULT_MAX_BYTES): unknown {
  if (!(bytes instanceof Uint8Array)) throw new DecodeError(`${what}: expected bytes`, { field: what });
  checkSize(bytes.length, what, maxBytes);
  if (bytes.length === 0) throw new DecodeError(`${what}: empty input`, { field: what });
  try {
    return decoderFor(maxBytes).decode(bytes);
  } catch (e) {
    const m = e instanceof Error ? e.message : String(e);
    throw new DecodeError(`${what}: malformed msgpack (${m})`, { field: what });
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

function decodeJsonText(input: string | Uint8Array, what: string, maxBytes = DEFAULT_MAX_BYTES): unknown {
  let text: string;
  if (typeof input === 'string') text = input;
  else if (input instanceof Uint8Array) {
    checkSize(input.length, what, maxBytes);
    try {
      text = utf8.decode(input);
    } catch {
      throw new DecodeError(`${what}: invalid UTF-8`, { field: what });
    }
  } else throw new DecodeError(`${what}: expected JSON text or bytes`, { field: what });
  checkSize(text.length, what, maxBytes);
  try {
    return parseJson(text);
  } catch (e) {
    if (e instanceof DecodeError)
      throw new DecodeError(`${what}: ${e.message}`, { ...e.detail, field: what });
    throw e;
  }
}

function checkSize(n: number, what: string, maxBytes: number): void {
  if (n > maxBytes)
    throw new DecodeError(`${what}: input too large (${n} > limit ${maxBytes} bytes)`, { field: what });
}

export interface ResolvedLimits {
  maxBlocks: number;
  maxBytes: number;
}

export function resolveLimits(l: DecodeLimits | undefined): ResolvedLimits {
  return { maxBlocks: l?.maxBlocks ?? DEFAULT_MAX_BLOCKS, maxBytes: l?.maxBytes ?? DEFAULT_MAX_BYTES };
}

/**
 * `fromValue` validates a decoded value tree (integers as number | bigint) and builds the typed message;
 * `path` is the prefix for error messages ('' = top level). `signed` = msgpack, where negative i64
 * hashes are reinterpreted (§1); JSON hashes must be non-negative.
 */
export type FromValue<T> = (v: unknown, path: string, lim: ResolvedLimits, signed: boolean) => T;
export type ToValue<T> = (x: T) => unknown;

export interface Codec<T> {
  /** Name used as the error path root when the whole input is unreadable. */
  readonly name: string;
  encodeMsgpack(x: T): Uint8Array;
  decodeMsgpack(bytes: Uint8Array, limits?: DecodeLimits): T;
  encodeJson(x: T): string;
  decodeJson(input: string | Uint8Array, limits?: DecodeLimits): T;
  /** Plain value tree (bigints above 2^53 kept) for embedding in a larger message. */
  toValue(x: T): unknown;
  /**
   * Validates an already decoded tree (e.g. a request-plane payload) under the msgpack rules:
   * negative i64 engine hashes are reinterpreted as u64.
   */
  fromValue(v: unknown, limits?: DecodeLimits): T;
}

export function makeCodec<T>(name: string, from: FromValue<T>, to: ToValue<T>): Codec<T> {
  return {
    name,
    encodeMsgpack: (x) => encodeMsgpack(to(x)),
    decodeMsgpack: (bytes, limits) => {
      const lim = resolveLimits(limits);
      return from(decodeMsgpack(bytes, name, lim.maxBytes), '', lim, true);
    },
    encodeJson: (x) => stringifyJson(to(x)),
    decodeJson: (input, limits) => {
      const lim = resolveLimits(limits);
      return from(decodeJsonText(input, name, lim.maxBytes), '', lim, false);
    },
    toValue: to,
    fromValue: (v, limits) => from(v, '', resolveLimits(limits), true),
  };
}
