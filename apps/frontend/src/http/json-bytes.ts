/**
 * JSON straight from a request body's UTF-8 bytes (issue 14, agent bodies), without the whole-body
 * string: `parseJsonBytes(b)` returns exactly what `parseJson(utf8Text(b))` returns (the frontend's
 * lossless reader: integers of 16+ digits outside ±(2^53−1) as bigints, everything else as
 * `JSON.parse`), or `BAIL` when it cannot vouch for that and the caller must take that path itself.
 *
 * Why: decoding a 584 kB mixed-script body into one 1 MB two-byte string costs ~4–6 ms on this VM
 * (every string over ~128 kB gets freshly mapped pages, and touching them costs far more than the
 * copy); decoding the same text value by value, as small strings, costs a fraction of that.
 *
 * How: the structure (brackets, commas, colons, literals, numbers) is scanned byte by byte in JS;
 * strings are found with `Buffer.indexOf` (the next `"` and the next `\`, each looked up again only
 * once the scan passes it), so the bytes inside strings are never visited by JS code except for
 * the control-character check of strings without escapes. A string without escapes is decoded with
 * `utf8Slice` over its bytes (up to 8 printable ASCII bytes: `String.fromCharCode`, no native
 * call); a string with escapes is decoded with its quotes and handed to `JSON.parse`, which gives
 * the exact RFC 8259 value (`\uXXXX`, surrogate pairs, lone surrogates kept as code units, invalid
 * escapes and raw control characters rejected) as a flat string. Array elements are gathered on
 * one reused stack and each array is made once at its final size.
 *
 * Cost (CPU, load ~10, medians): the bench's 584 kB agent body 2.2 ms (decode + `parseJson` ~7 ms);
 * 250 000 small integers 13 ms (17-30); 150 000 one-letter strings 8 ms (12-13); a 612 kB
 * `prompt` of 100 000 token ids 5.1 ms (7.7). Bodies of many tiny values are where a JS scanner is
 * weakest; none of these is slower than the whole-string path.
 *
 * Exactness of per-value decoding: a string's bytes are delimited by ASCII bytes (`"`, and for the
 * structure around them only ASCII is valid), and an ASCII byte is never part of a UTF-8 sequence,
 * so every conforming decoder (V8's replaces ill-formed sequences by U+FFFD, maximal subparts)
 * restarts at it: decoding a string's bytes alone gives the same code units as the slice of the
 * whole body's decoding. Anything unusual returns `BAIL` instead of an error or a guess: a syntax
 * error (the caller's `parseJson` then produces today's error message), nesting deeper than
 * `MAX_DEPTH` (`parseJson`'s limit; `JSON.parse` goes deeper), a non-ASCII byte outside a string.
 */

import { KeyedChains } from '../keyed-chains.js';

/** Returned when the bytes must go through `parseJson(utf8Text(b))` (syntax errors included). */
export const BAIL: unique symbol = Symbol('json-bytes: bail');

/** Containers deeper than this bail out (`parseJson`'s reader refuses past 512; `JSON.parse` does not). */
const MAX_DEPTH = 512;

/** Thrown inside the parser, caught at its entry (one object: nothing is allocated per bail). */
const bailSignal = new Error('json-bytes: bail');

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/** Buffer's own decoders (what `toString('utf8' | 'latin1', s, e)` calls after checking its arguments). */
interface Slices {
  utf8Slice(start: number, end: number): string;
  latin1Slice(start: number, end: number): string;
}

/**
 * `b` (a whole body: UTF-8 bytes, a leading byte-order mark allowed) as `parseJson(utf8Text(b))`
 * would parse it, or `BAIL`. Never throws for any input. With `strings`, long strings whose bytes an
 * earlier body held are taken from it instead of being decoded (the same values: `StringCache`).
 */
export function parseJsonBytes(b: Buffer, strings: StringCache | null = null): unknown {
  const r = new Reader(b, strings);
  try {
    return r.document();
  } catch {
    // A syntax error, too deep, or anything unforeseen (a RangeError): the caller's path decides.
    // A bail leaves values on the stack: drop it.
    sharedStack = [];
    return BAIL;
  } finally {
    r.done();
  }
}

/** The `len` (0-8) ASCII bytes at `s` as a string. */
function shortAscii(b: Buffer, s: number, len: number): string {
  const f = String.fromCharCode;
  switch (len) {
    case 0:
      return '';
    case 1:
      return f(b[s]!);
    case 2:
      return f(b[s]!, b[s + 1]!);
    case 3:
      return f(b[s]!, b[s + 1]!, b[s + 2]!);
    case 4:
      return f(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!);
    case 5:
      return f(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!);
    case 6:
      return f(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!);
    case 7:
      return f(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!);
    default:
      return f(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!, b[s + 7]!);
  }
}

/** Array elements being parsed, reused across bodies (its store stays allocated, up to `STACK_KEEP` slots). */
let sharedStack: unknown[] = [];
const STACK_KEEP = 1 << 18;

class Reader {
  private p = 0;
  private readonly n: number;
  private readonly d: Slices;
  /** The next `"` at or after the scan position once looked up (−1 before the first lookup). */
  private nq = -1;
  /** The next `\` at or after the scan position once looked up (`n` when there is none). */
  private nb = -1;

  /** Elements of the arrays being parsed (`array`), shared by nested arrays: `top` is the first free slot. */
  private readonly stack: unknown[];
  private top = 0;

  constructor(
    private readonly b: Buffer,
    private readonly strings: StringCache | null,
  ) {
    this.n = b.length;
    this.d = b as unknown as Slices;
    this.stack = sharedStack;
  }

  /** Lets the shared stack go when one body made it larger than worth keeping. */
  done(): void {
    if (this.stack.length > STACK_KEEP) sharedStack = [];
  }

  document(): unknown {
    const b = this.b;
    // utf8Text drops a leading byte-order mark (U+FEFF, EF BB BF).
    if (this.n >= 3 && b[0] === 0xef && b[1] === 0xbb && b[2] === 0xbf) this.p = 3;
    const v = this.value(0);
    this.ws();
    if (this.p !== this.n) throw bailSignal;
    return v;
  }

  private ws(): void {
    const b = this.b;
    const n = this.n;
    let p = this.p;
    while (p < n) {
      const c = b[p]!;
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) p++;
      else break;
    }
    this.p = p;
  }

  private value(depth: number): unknown {
    this.ws();
    const c = this.b[this.p];
    switch (c) {
      case 0x22: // "
        return this.string();
      case 0x7b: // {
        return this.object(depth + 1);
      case 0x5b: // [
        return this.array(depth + 1);
      case 0x74: // t
        return this.literal(0x72, 0x75, 0x65, 4, true); // rue
      case 0x66: // f
        if (this.b[this.p + 4] !== 0x65) throw bailSignal;
        return this.literal(0x61, 0x6c, 0x73, 5, false); // als(e)
      case 0x6e: // n
        return this.literal(0x75, 0x6c, 0x6c, 4, null); // ull
      default:
        if (c === 0x2d || (c !== undefined && c >= 0x30 && c <= 0x39)) return this.number();
        throw bailSignal;
    }
  }

  private literal<T>(c1: number, c2: number, c3: number, len: number, v: T): T {
    const b = this.b;
    const p = this.p;
    if (b[p + 1] !== c1 || b[p + 2] !== c2 || b[p + 3] !== c3 || p + len > this.n) throw bailSignal;
    this.p = p + len;
    return v;
  }

  private object(depth: number): Record<string, unknown> {
    if (depth > MAX_DEPTH) throw bailSignal;
    const b = this.b;
    const out: Record<string, unknown> = {};
    this.p++;
    this.ws();
    if (b[this.p] === 0x7d) {
      this.p++;
      return out;
    }
    for (;;) {
      this.ws();
      if (b[this.p] !== 0x22) throw bailSignal;
      const key = this.string();
      this.ws();
      if (b[this.p] !== 0x3a) throw bailSignal;
      this.p++;
      const v = this.value(depth);
      // As JSON.parse: "__proto__" is an own data property (an assignment would set the prototype).
      if (key === '__proto__')
        Object.defineProperty(out, key, { value: v, enumerable: true, writable: true, configurable: true });
      else out[key] = v;
      this.ws();
      const c = b[this.p];
      this.p++;
      if (c === 0x2c) continue;
      if (c === 0x7d) return out;
      throw bailSignal;
    }
  }

  private array(depth: number): unknown[] {
    if (depth > MAX_DEPTH) throw bailSignal;
    const b = this.b;
    this.p++;
    this.ws();
    if (b[this.p] === 0x5d) {
      this.p++;
      return [];
    }
    // Elements go on the shared stack and the array is made once at its final size: growing it by
    // push would reallocate a large array's store several times, each in fresh pages (~2x slower
    // on a 250 000-number array here).
    const stack = this.stack;
    const start = this.top;
    for (;;) {
      const v = this.value(depth);
      stack[this.top++] = v;
      this.ws();
      const c = b[this.p];
      this.p++;
      if (c === 0x2c) continue;
      if (c === 0x5d) break;
      throw bailSignal;
    }
    const end = this.top;
    const out = stack.slice(start, end);
    // The stack keeps its capacity, not the values.
    stack.fill(undefined, start, end);
    this.top = start;
    return out;
  }

  /** The string whose opening quote is at `p`. */
  private string(): string {
    const b = this.b;
    const n = this.n;
    const s = this.p + 1;
    // Short ASCII strings (keys, roles, names) without a native call: up to 8 printable bytes
    // other than `\`, then the closing quote.
    let e = s;
    const stop = s + 8 < n ? s + 8 : n;
    while (e < stop) {
      const c = b[e]!;
      if (c === 0x22 || c === 0x5c || c < 0x20 || c > 0x7e) break;
      e++;
    }
    if (e < n && b[e] === 0x22) {
      this.p = e + 1;
      return shortAscii(b, s, e - s);
    }
    let q = this.nq;
    if (q < s) {
      q = b.indexOf(0x22, s);
      if (q < 0) throw bailSignal; // unterminated
      this.nq = q;
    }
    let bs = this.nb;
    if (bs < s) {
      bs = b.indexOf(0x5c, s);
      if (bs < 0) bs = n;
      this.nb = bs;
    }
    // A kept string? Looked up only when the string may be long enough to be one: an escape
    // before the first `"` (its end is not known yet), or that `"` at least STRING_CACHE_MIN away.
    const strings = this.strings;
    if (strings !== null && (bs < q || q - s >= STRING_CACHE_MIN) && n - s > STRING_CACHE_MIN) {
      const hit = strings.match(b, s);
      if (hit !== null) {
        this.p = s + hit.bytes.length + 1;
        return hit.value;
      }
    }
    if (bs > q) {
      // No escapes: the bytes are the value, once checked for raw control characters (JSON.parse refuses them).
      for (let i = s; i < q; i++) if (b[i]! < 0x20) throw bailSignal;
      this.p = q + 1;
      const v = this.d.utf8Slice(s, q);
      if (strings !== null && q - s >= STRING_CACHE_MIN) strings.remember(b, s, q, v);
      return v;
    }
    // Escapes: find the quote that ends the string (a `\` always takes the next byte with it).
    for (;;) {
      if (bs < q) {
        const next = bs + 2;
        if (next > n) throw bailSignal;
        bs = b.indexOf(0x5c, next);
        if (bs < 0) bs = n;
        if (q < next) {
          q = b.indexOf(0x22, next);
          if (q < 0) throw bailSignal;
        }
        continue;
      }
      break;
    }
    this.nq = q;
    this.nb = bs;
    this.p = q + 1;
    // JSON.parse of the quoted bytes: exact escapes, lone surrogates kept, control characters refused.
    let v: unknown;
    try {
      v = JSON.parse(this.d.utf8Slice(s - 1, q + 1));
    } catch {
      throw bailSignal;
    }
    if (strings !== null && q - s >= STRING_CACHE_MIN) strings.remember(b, s, q, v as string);
    return v as string;
  }

  /** A number as parseJson gives it: integers of more than 15 digits through BigInt (a bigint when unsafe). */
  private number(): number | bigint {
    const b = this.b;
    const start = this.p;
    let p = start;
    const neg = b[p] === 0x2d;
    if (neg) p++;
    const intStart = p;
    let c = b[p];
    let v = 0;
    if (c === 0x30) {
      p++;
    } else if (c !== undefined && c >= 0x31 && c <= 0x39) {
      do {
        v = v * 10 + (c - 0x30);
        c = b[++p];
      } while (c !== undefined && c >= 0x30 && c <= 0x39);
    } else throw bailSignal;
    const intDigits = p - intStart;
    c = b[p];
    let integer = true;
    if (c === 0x2e) {
      integer = false;
      c = b[++p];
      if (c === undefined || c < 0x30 || c > 0x39) throw bailSignal;
      do c = b[++p];
      while (c !== undefined && c >= 0x30 && c <= 0x39);
    }
    if (c === 0x65 || c === 0x45) {
      integer = false;
      c = b[++p];
      if (c === 0x2b || c === 0x2d) c = b[++p];
      if (c === undefined || c < 0x30 || c > 0x39) throw bailSignal;
      do c = b[++p];
      while (c !== undefined && c >= 0x30 && c <= 0x39);
    }
    this.p = p;
    if (integer) {
      // Up to 15 digits the sum is exact (< 2^53); -0 stays -0 as in JSON.parse.
      if (intDigits <= 15) return neg ? -v : v;
      const big = BigInt(this.d.latin1Slice(start, p));
      return big <= MAX_SAFE && big >= -MAX_SAFE ? Number(big) : big;
    }
    return Number(this.d.latin1Slice(start, p));
  }
}

/** Strings of at least this many bytes (between the quotes) are looked up in and kept by a `StringCache`. */
export const STRING_CACHE_MIN = 128;

/** Bytes of a string's head that pick its candidates (≤ `STRING_CACHE_MIN`). */
const HEAD_BYTES = 32;

/** Candidates kept per head (the newest first); an older one with the same head is dropped. */
const PER_HEAD = 4;

interface CachedString {
  /** The string's bytes between its quotes, as the body held them (escapes as sent). */
  readonly bytes: Buffer;
  /** What decoding those bytes gives. */
  readonly value: string;
  /** Bytes counted against the limit: the copy, the string (2 per UTF-16 unit at most), the entry. */
  readonly size: number;
  next: CachedString | null;
}

/** FNV-1a over the `HEAD_BYTES` bytes at `s` (the caller checked they are inside `b`). */
function headKey(b: Buffer, s: number): number {
  let h = 0x811c9dc5;
  for (let i = s; i < s + HEAD_BYTES; i++) h = Math.imul(h ^ b[i]!, 0x01000193);
  return h;
}

/**
 * Long strings of recent request bodies, by their bytes (issue 14). A conversation's next request
 * resends its whole history, so most of a chat or agent body is strings that an earlier body held
 * byte for byte: the system prompt, earlier messages, tool results. Decoding them again (UTF-8 of
 * mixed-script text ~2.4 ns per byte here, escapes through `JSON.parse`) and allocating them again
 * (what paces the major GCs of agent traffic) is what this saves.
 *
 * Exact, not probabilistic: a string of `STRING_CACHE_MIN` bytes or more finds its candidates by a
 * hash of its first 32 bytes, and a candidate is taken only when the body's bytes at the string
 * equal the candidate's bytes (one native compare) and a `"` follows them. The candidate's bytes are
 * a whole string's content (every `\` paired), so that `"` is the string's end, and equal bytes
 * decode to the equal value. A hash collision or a string that merely starts the same way costs a
 * compare, never a wrong value. The returned string is the same object every time, which also
 * spares the young generation.
 *
 * Bounded by `limitBytes` (copies + strings + entries), least recently used heads evicted first; a
 * string larger than an eighth of the limit is not kept.
 */
export class StringCache {
  private readonly chains: KeyedChains<CachedString>;

  constructor(readonly limitBytes: number) {
    this.chains = new KeyedChains<CachedString>(limitBytes, PER_HEAD, (e) => e.size);
  }

  /** Bytes held (the bound's measure). */
  get held(): number {
    return this.chains.held;
  }

  /** Strings evicted to stay within the limit. */
  get evicted(): number {
    return this.chains.evicted;
  }

  /** Strings kept. */
  get size(): number {
    return this.chains.count;
  }

  /** The kept string whose bytes start at `s` in `b` and end right before a `"`, or null. */
  match(b: Buffer, s: number): CachedString | null {
    const key = headKey(b, s);
    for (let e = this.chains.first(key); e !== null; e = e.next) {
      const end = s + e.bytes.length;
      if (end < b.length && b[end] === 0x22 && b.compare(e.bytes, 0, e.bytes.length, s, end) === 0) {
        this.chains.touch(key);
        return e;
      }
    }
    return null;
  }

  /** Keeps `value`, the decoding of `b[s, q)` (a whole string's content). */
  remember(b: Buffer, s: number, q: number, value: string): void {
    const size = q - s + 2 * value.length + 96;
    if (size > this.limitBytes / 8) return;
    const bytes = Buffer.allocUnsafeSlow(q - s);
    b.copy(bytes, 0, s, q);
    this.chains.add(headKey(b, s), { bytes, value, size, next: null });
  }
}

/** Bodies up to this size are gathered into one reused buffer (larger ones get their own). */
const SCRATCH_MAX = 4 << 20;
let scratch: Buffer | null = null;

/**
 * One buffer of a body received in `chunks` (`size` bytes). Joining the chunks into a fresh 500 kB
 * buffer costs ~2 ms on this VM (its pages are mapped fresh and faulted in one by one; the copy
 * itself is ~0.02 ms), so bodies up to `SCRATCH_MAX` are copied into one buffer kept for the
 * process and reused. The view is valid until the next call: parse it synchronously, and keep
 * nothing that points into it (decoded strings are copies).
 */
export function joinChunks(chunks: readonly Buffer[], size: number): Buffer {
  if (chunks.length === 1) return chunks[0]!;
  if (size > SCRATCH_MAX) return Buffer.concat(chunks, size);
  if (scratch === null || scratch.length < size) {
    // Sized up in 256 KiB steps; filled once so that its pages are in place.
    scratch = Buffer.allocUnsafeSlow(Math.min(SCRATCH_MAX, (size + 0x3ffff) & ~0x3ffff)).fill(0);
  }
  let at = 0;
  for (const c of chunks) {
    c.copy(scratch, at);
    at += c.length;
  }
  return scratch.subarray(0, size);
}
