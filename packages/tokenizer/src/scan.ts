/**
 * Hand-written pre-tokenizer scanners for the patterns of known tokenizer families: one pass over
 * character classes from a table, no regex engine, no match arrays, no substrings. Each scanner
 * reproduces its pattern's leftmost-first alternation exactly (the parity and property tests run
 * it against the generic regex path and the reference).
 *
 * cl100k family (Qwen2/3 with `\p{N}`, Llama 3 with `\p{N}{1,3}`):
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}{1,K} | ' '?[^\s\p{L}\p{N}]+[\r\n]*
 *   | \s*[\r\n]+ | \s+(?!\S) | \s+
 */
import type { PieceSink, PreTokenizer } from './piece.js';

export type Scanner = PreTokenizer;

/** Character classes. */
const O = 0; // anything else
const L = 1; // \p{L}
const N = 2; // \p{N}
const WS = 3; // Unicode White_Space other than \r and \n
const NL = 4; // \r, \n

let bmp: Uint8Array | null = null;
const astralCache = new Map<number, number>();
const RE_L = /\p{L}/u;
const RE_N = /\p{N}/u;

/** Rust `char::is_whitespace` (Unicode White_Space) for BMP code units; also lstrip/rstrip of added tokens. */
export function isWhitespace(c: number): boolean {
  return (
    (c >= 9 && c <= 13) ||
    c === 32 ||
    c === 0x85 ||
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000
  );
}

function classify(cp: number): number {
  if (cp === 10 || cp === 13) return NL;
  if (isWhitespace(cp)) return WS;
  const ch = String.fromCodePoint(cp);
  if (RE_L.test(ch)) return L;
  if (RE_N.test(ch)) return N;
  return O;
}

/** The class of every BMP code unit (surrogates: O; pairs are looked up as code points). */
function table(): Uint8Array {
  if (bmp === null) {
    bmp = new Uint8Array(65536);
    for (let c = 0; c < 65536; c++) bmp[c] = c >= 0xd800 && c < 0xe000 ? O : classify(c);
  }
  return bmp;
}

function astral(cp: number): number {
  let k = astralCache.get(cp);
  if (k === undefined) {
    k = classify(cp);
    if (astralCache.size < 65536) astralCache.set(cp, k);
  }
  return k;
}

/** Case-insensitive letters of the contractions, as Oniguruma folds them (ſ is s). */
function lowerAscii(c: number): number {
  if (c === 0x17f) return 115; // ſ
  return c >= 65 && c <= 90 ? c + 32 : c;
}

class Cl100kScanner implements Scanner {
  readonly kind: string;
  private readonly cls = table();

  constructor(private readonly maxDigits: number) {
    this.kind = `scan:cl100k-n${maxDigits}`;
  }

  run(s: string, emit: PieceSink): void {
    const cls = this.cls;
    const n = s.length;
    // Class and width (1 or 2 code units) of the character at j, in `k` and `w`.
    let k = O;
    let w = 1;
    const at = (j: number): void => {
      const c = s.charCodeAt(j);
      if (c < 0xd800 || c >= 0xe000) {
        k = cls[c]!;
        w = 1;
      } else if (c < 0xdc00 && j + 1 < n) {
        const d = s.charCodeAt(j + 1);
        if (d >= 0xdc00 && d < 0xe000) {
          k = astral(0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00));
          w = 2;
        } else {
          k = O;
          w = 1;
        }
      } else {
        k = O;
        w = 1;
      }
    };
    let i = 0;
    while (i < n) {
      const c = s.charCodeAt(i);
      // 1. Contractions.
      if (c === 39 && i + 1 < n) {
        const a = lowerAscii(s.charCodeAt(i + 1));
        if (a === 115 || a === 116 || a === 109 || a === 100) {
          emit(i, i + 2);
          i += 2;
          continue;
        }
        if (i + 2 < n) {
          const b = lowerAscii(s.charCodeAt(i + 2));
          if ((a === 114 && b === 101) || (a === 118 && b === 101) || (a === 108 && b === 108)) {
            emit(i, i + 3);
            i += 3;
            continue;
          }
        }
      }
      at(i);
      const k0 = k;
      const w0 = w;
      // 2. An optional non-letter, non-digit, non-newline character, then letters.
      if (k0 === L || ((k0 === O || k0 === WS) && i + w0 < n && (at(i + w0), k === L))) {
        let j = k0 === L ? i + w0 : i + w0 + w;
        while (j < n) {
          at(j);
          if (k !== L) break;
          j += w;
        }
        emit(i, j);
        i = j;
        continue;
      }
      // 3. Up to maxDigits numbers.
      if (k0 === N) {
        let j = i + w0;
        for (let d = 1; d < this.maxDigits && j < n; d++) {
          at(j);
          if (k !== N) break;
          j += w;
        }
        emit(i, j);
        i = j;
        continue;
      }
      // 4. An optional space, other characters, then newlines.
      let j = -1;
      if (k0 === O) j = i + w0;
      else if (c === 32 && i + 1 < n && (at(i + 1), k === O)) j = i + 1 + w;
      if (j >= 0) {
        while (j < n) {
          at(j);
          if (k !== O) break;
          j += w;
        }
        while (j < n) {
          const d = s.charCodeAt(j);
          if (d !== 13 && d !== 10) break;
          j++;
        }
        emit(i, j);
        i = j;
        continue;
      }
      // 5-7. Whitespace (all of it is BMP): up to the last newline of the run; else the run less
      // its last character when a non-space follows; else the run.
      let e = i;
      let lastNl = -1;
      while (e < n) {
        const k1 = cls[s.charCodeAt(e)]!;
        const d = s.charCodeAt(e);
        if (d >= 0xd800 && d < 0xe000) break;
        if (k1 === NL) lastNl = e;
        else if (k1 !== WS) break;
        e++;
      }
      let end: number;
      if (lastNl >= 0) end = lastNl + 1;
      else if (e === n || e - i < 2) end = e;
      else end = e - 1;
      emit(i, end);
      i = end;
    }
  }
}

/** o200k classes (gpt-oss): letters split by case, marks apart. */
const UP = 5; // \p{Lu} \p{Lt}
const LO = 6; // \p{Ll}
const BOTH = 7; // \p{Lm} \p{Lo}
const MARK = 8; // \p{M}
const RE_UP = /[\p{Lu}\p{Lt}]/u;
const RE_LO = /\p{Ll}/u;
const RE_M = /\p{M}/u;

function classify200k(cp: number): number {
  const k = classify(cp);
  if (k !== O && k !== L) return k;
  const ch = String.fromCodePoint(cp);
  if (k === L) return RE_UP.test(ch) ? UP : RE_LO.test(ch) ? LO : BOTH;
  return RE_M.test(ch) ? MARK : O;
}

let bmp200k: Uint8Array | null = null;
const astral200k = new Map<number, number>();

/** In the upper-case-run class `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`. */
const inA = (k: number): boolean => k === UP || k === BOTH || k === MARK;
/** In the lower-case-run class `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`. */
const inB = (k: number): boolean => k === LO || k === BOTH || k === MARK;
/** `[^\r\n\p{L}\p{N}]` */
const inP = (k: number): boolean => k === O || k === WS || k === MARK;

/**
 * o200k family (gpt-oss):
 *   [^\r\n\p{L}\p{N}]?A*B+C? | [^\r\n\p{L}\p{N}]?A+B*C? | \p{N}{1,3} | ' '?[^\s\p{L}\p{N}]+[\r\n/]*
 *   | \s*[\r\n]+ | \s+(?!\S) | \s+
 * with A = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], B = [\p{Ll}\p{Lm}\p{Lo}\p{M}], C = the contractions.
 * A*B+ with backtracking: after the longest A-run, B+ starts at the first position (from the
 * right) where a B character stands: the character after the run if it is lower case (then B+
 * runs on), else the last B character inside the run (then the match ends after it).
 */
class O200kScanner implements Scanner {
  readonly kind = 'scan:o200k';
  private readonly cls: Uint8Array;
  private s = '';
  private n = 0;
  /** Class and width of the character at the last `at` position. */
  private k = O;
  private w = 1;

  constructor() {
    if (bmp200k === null) {
      bmp200k = new Uint8Array(65536);
      for (let c = 0; c < 65536; c++) bmp200k[c] = c >= 0xd800 && c < 0xe000 ? O : classify200k(c);
    }
    this.cls = bmp200k;
  }

  private at(j: number): void {
    const s = this.s;
    const c = s.charCodeAt(j);
    if (c < 0xd800 || c >= 0xe000) {
      this.k = this.cls[c]!;
      this.w = 1;
      return;
    }
    if (c < 0xdc00 && j + 1 < this.n) {
      const d = s.charCodeAt(j + 1);
      if (d >= 0xdc00 && d < 0xe000) {
        const cp = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        let k = astral200k.get(cp);
        if (k === undefined) {
          k = classify200k(cp);
          if (astral200k.size < 65536) astral200k.set(cp, k);
        }
        this.k = k;
        this.w = 2;
        return;
      }
    }
    this.k = O;
    this.w = 1;
  }

  /** End of A*B+ from q, or -1. */
  private alt1(q: number): number {
    const n = this.n;
    let j = q;
    let lastB = -1;
    for (; j < n; j += this.w) {
      this.at(j);
      if (!inA(this.k)) break;
      if (this.k !== UP) lastB = j + this.w;
    }
    if (j < n && this.k === LO) {
      for (j += this.w; j < n; j += this.w) {
        this.at(j);
        if (!inB(this.k)) break;
      }
      return j;
    }
    return lastB;
  }

  /** End of A+B* from q, or -1. */
  private alt2(q: number): number {
    const n = this.n;
    let j = q;
    for (; j < n; j += this.w) {
      this.at(j);
      if (!inA(this.k)) break;
    }
    if (j === q) return -1;
    for (; j < n; j += this.w) {
      this.at(j);
      if (!inB(this.k)) break;
    }
    return j;
  }

  /** `e` extended over an optional contraction. */
  private contraction(e: number): number {
    const s = this.s;
    if (e + 1 >= this.n || s.charCodeAt(e) !== 39) return e;
    const a = lowerAscii(s.charCodeAt(e + 1));
    if (a === 115 || a === 116 || a === 109 || a === 100) return e + 2;
    if (e + 2 < this.n) {
      const b = lowerAscii(s.charCodeAt(e + 2));
      if ((a === 114 && b === 101) || (a === 118 && b === 101) || (a === 108 && b === 108)) return e + 3;
    }
    return e;
  }

  run(s: string, emit: PieceSink): void {
    this.s = s;
    const n = (this.n = s.length);
    let i = 0;
    while (i < n) {
      this.at(i);
      const k0 = this.k;
      const w0 = this.w;
      let e = -1;
      const p = inP(k0) && i + w0 < n;
      const ab = inA(k0) || inB(k0);
      if (p) e = this.alt1(i + w0);
      if (e < 0 && ab) e = this.alt1(i);
      if (e < 0 && p) e = this.alt2(i + w0);
      if (e < 0 && ab) e = this.alt2(i);
      if (e >= 0) {
        e = this.contraction(e);
        emit(i, e);
        i = e;
        continue;
      }
      if (k0 === N) {
        let j = i + w0;
        for (let d = 1; d < 3 && j < n; d++) {
          this.at(j);
          if (this.k !== N) break;
          j += this.w;
        }
        emit(i, j);
        i = j;
        continue;
      }
      let j = -1;
      if (k0 === O || k0 === MARK) j = i + w0;
      else if (s.charCodeAt(i) === 32 && i + 1 < n && (this.at(i + 1), this.k === O || this.k === MARK))
        j = i + 1 + this.w;
      if (j >= 0) {
        for (; j < n; j += this.w) {
          this.at(j);
          if (this.k !== O && this.k !== MARK) break;
        }
        while (j < n) {
          const d = s.charCodeAt(j);
          if (d !== 13 && d !== 10 && d !== 47) break;
          j++;
        }
        emit(i, j);
        i = j;
        continue;
      }
      // Whitespace, as in the cl100k scanner.
      const cls = this.cls;
      let end = i;
      let lastNl = -1;
      while (end < n) {
        const d = s.charCodeAt(end);
        if (d >= 0xd800 && d < 0xe000) break;
        const k1 = cls[d]!;
        if (k1 === NL) lastNl = end;
        else if (k1 !== WS) break;
        end++;
      }
      if (lastNl >= 0) end = lastNl + 1;
      else if (end < n && end - i >= 2) end--;
      emit(i, end);
      i = end;
    }
    this.s = '';
  }
}

const O200K =
  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

const CL100K = (digits: string): string =>
  `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}${digits}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+`;

/** JSON of the pattern chain → scanner factory. */
export const SCANNERS = new Map<string, () => Scanner>([
  [JSON.stringify([CL100K('')]), () => new Cl100kScanner(1)],
  [JSON.stringify([CL100K('{1,3}')]), () => new Cl100kScanner(3)],
  [JSON.stringify([O200K]), () => new O200kScanner()],
]);
