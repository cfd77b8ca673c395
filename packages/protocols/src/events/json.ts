/**
 * Lossless JSON for u64 values (docs/protocol.md §1). `JSON.parse` turns 7587872800778374919 into
 * 7587872800778375000; this reader keeps every integer literal outside the safe range as a bigint, and
 * the writer prints bigints with all their digits.
 */
import { DecodeError } from '../errors.js';

/**
 * An integer literal of 16+ digits may exceed 2^53; below that `JSON.parse` is exact, so texts without
 * such a run (the common case) take the native parser. Digits inside strings only cost the slow path.
 *
 * Skip search instead of `/\d{16}/`: a non-digit at i rules out every run covering i, so the probe jumps
 * 16 characters; a digit is checked backwards only until the first non-digit. On an 8k-token id array
 * (51 kB) this is ~8x faster than the regex (which tries a match at every digit), on prose ~6x.
 */
export function hasLongDigitRun(s: string): boolean {
  const n = s.length;
  let i = 15;
  while (i < n) {
    let c = s.charCodeAt(i);
    if (c < 0x30 || c > 0x39) {
      i += 16;
      continue;
    }
    const stop = i - 15;
    let j = i - 1;
    while (j >= stop) {
      c = s.charCodeAt(j);
      if (c < 0x30 || c > 0x39) break;
      j--;
    }
    if (j < stop) return true;
    i = j + 16;
  }
  return false;
}
const MAX_DEPTH = 512;

/** Parses JSON; integers beyond ±(2^53−1) come back as `bigint`, everything else as `JSON.parse` would. */
export function parseJson(text: string): unknown {
  if (!hasLongDigitRun(text)) {
    try {
      return JSON.parse(text) as unknown;
    } catch (e) {
      // Re-parse with the reader below to get an offset-bearing, typed error.
      void e;
    }
  }
  return new JsonReader(text).parseDocument();
}

class JsonReader {
  private pos = 0;
  constructor(private readonly s: string) {}

  parseDocument(): unknown {
    const v = this.value(0);
    this.ws();
    if (this.pos < this.s.length) this.fail('unexpected trailing data');
    return v;
  }

  private fail(what: string): never {
    const at = this.pos < this.s.length ? `'${this.s[this.pos]}' at offset ${this.pos}` : 'end of input';
    throw new DecodeError(`json: ${what} (${at})`, { field: '<root>', offset: this.pos });
  }

  private ws(): void {
    const s = this.s;
    let p = this.pos;
    for (;;) {
      const c = s.charCodeAt(p);
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) p++;
      else break;
    }
    this.pos = p;
  }

  private value(depth: number): unknown {
    if (depth > MAX_DEPTH) this.fail('nesting too deep');
    this.ws();
    const c = this.s.charCodeAt(this.pos);
    switch (c) {
      case 0x7b: // {
        return this.object(depth);
      case 0x5b: // [
        return this.array(depth);
      case 0x22: // "
        return this.string();
      case 0x74: // t
        return this.literal('true', true);
      case 0x66: // f
        return this.literal('false', false);
      case 0x6e: // n
        return this.literal('null', null);
      default:
        if (c === 0x2d || (c >= 0x30 && c <= 0x39)) return this.number();
        return this.fail('unexpected character');
    }
  }

  private literal<T>(word: string, v: T): T {
    if (!this.s.startsWith(word, this.pos)) this.fail('invalid literal');
    this.pos += word.length;
    return v;
  }

  private object(depth: number): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    this.pos++;
    this.ws();
    if (this.s.charCodeAt(this.pos) === 0x7d) {
      this.pos++;
      return out;
    }
    for (;;) {
      this.ws();
      if (this.s.charCodeAt(this.pos) !== 0x22) this.fail('expected a string key');
      const key = this.string();
      this.ws();
      if (this.s.charCodeAt(this.pos) !== 0x3a) this.fail("expected ':'");
      this.pos++;
      const v = this.value(depth + 1);
      // A plain assignment of "__proto__" would replace the prototype instead of adding a key.
      if (key === '__proto__')
        Object.defineProperty(out, key, { value: v, enumerable: true, writable: true, configurable: true });
      else out[key] = v;
      this.ws();
      const c = this.s.charCodeAt(this.pos);
      if (c === 0x2c) {
        this.pos++;
        continue;
      }
      if (c === 0x7d) {
        this.pos++;
        return out;
      }
      this.fail("expected ',' or '}'");
    }
  }

  private array(depth: number): unknown[] {
    const out: unknown[] = [];
    this.pos++;
    this.ws();
    if (this.s.charCodeAt(this.pos) === 0x5d) {
      this.pos++;
      return out;
    }
    for (;;) {
      out.push(this.value(depth + 1));
      this.ws();
      const c = this.s.charCodeAt(this.pos);
      if (c === 0x2c) {
        this.pos++;
        continue;
      }
      if (c === 0x5d) {
        this.pos++;
        return out;
      }
      this.fail("expected ',' or ']'");
    }
  }

  private string(): string {
    const s = this.s;
    const start = this.pos;
    let p = start + 1;
    let escaped = false;
    for (;;) {
      if (p >= s.length) {
        this.pos = p;
        this.fail('unterminated string');
      }
      const c = s.charCodeAt(p);
      if (c === 0x22) break;
      if (c < 0x20) {
        this.pos = p;
        this.fail('control character in string');
      }
      if (c === 0x5c) {
        escaped = true;
        p += 2;
      } else p++;
    }
    this.pos = p + 1;
    if (!escaped) return s.slice(start + 1, p);
    // The native parser decodes escapes exactly (surrogates included) and rejects invalid ones.
    try {
      return JSON.parse(s.slice(start, p + 1)) as string;
    } catch {
      this.pos = start;
      return this.fail('invalid escape in string');
    }
  }

  private number(): number | bigint {
    const s = this.s;
    const start = this.pos;
    let p = start;
    if (s.charCodeAt(p) === 0x2d) p++;
    const intStart = p;
    if (s.charCodeAt(p) === 0x30) p++;
    else if (isDigit(s.charCodeAt(p))) while (isDigit(s.charCodeAt(p))) p++;
    else {
      this.pos = p;
      this.fail('invalid number');
    }
    const intDigits = p - intStart;
    let integer = true;
    if (s.charCodeAt(p) === 0x2e) {
      integer = false;
      p++;
      if (!isDigit(s.charCodeAt(p))) {
        this.pos = p;
        this.fail('invalid number');
      }
      while (isDigit(s.charCodeAt(p))) p++;
    }
    const e = s.charCodeAt(p);
    if (e === 0x65 || e === 0x45) {
      integer = false;
      p++;
      const sign = s.charCodeAt(p);
      if (sign === 0x2b || sign === 0x2d) p++;
      if (!isDigit(s.charCodeAt(p))) {
        this.pos = p;
        this.fail('invalid number');
      }
      while (isDigit(s.charCodeAt(p))) p++;
    }
    this.pos = p;
    const tok = s.slice(start, p);
    if (!integer || intDigits <= 15) return Number(tok);
    const b = BigInt(tok);
    return b <= MAX_SAFE && b >= -MAX_SAFE ? Number(b) : b;
  }
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const isDigit = (c: number): boolean => c >= 0x30 && c <= 0x39;

/**
 * JSON text of a value tree of null, booleans, finite numbers, bigints (all digits), strings, arrays,
 * typed arrays (as arrays) and plain objects (undefined members skipped, as `JSON.stringify` does).
 */
export function stringifyJson(v: unknown): string {
  const parts: string[] = [];
  write(v, parts);
  return parts.join('');
}

function write(v: unknown, out: string[]): void {
  switch (typeof v) {
    case 'string':
      out.push(JSON.stringify(v));
      return;
    case 'number':
      if (!Number.isFinite(v)) throw new TypeError(`stringifyJson: non-finite number ${v}`);
      out.push(String(v));
      return;
    case 'bigint':
      out.push(v.toString());
      return;
    case 'boolean':
      out.push(v ? 'true' : 'false');
      return;
    case 'object':
      break;
    default:
      throw new TypeError(`stringifyJson: unsupported ${typeof v}`);
  }
  if (v === null) {
    out.push('null');
    return;
  }
  if (Array.isArray(v) || ArrayBuffer.isView(v)) {
    const a = v as ArrayLike<unknown>;
    out.push('[');
    for (let i = 0; i < a.length; i++) {
      if (i > 0) out.push(',');
      write(a[i], out);
    }
    out.push(']');
    return;
  }
  out.push('{');
  let first = true;
  for (const k of Object.keys(v)) {
    const x = (v as Record<string, unknown>)[k];
    if (x === undefined) continue;
    if (!first) out.push(',');
    first = false;
    out.push(JSON.stringify(k), ':');
    write(x, out);
  }
  out.push('}');
}
