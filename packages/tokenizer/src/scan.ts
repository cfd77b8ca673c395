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
import type { PieceSink, PreTokenizer } from './pretokenize.js';

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

function isWs(c: number): boolean {
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
  if (isWs(cp)) return WS;
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

const CL100K = (digits: string): string =>
  `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}${digits}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+`;

/** JSON of the pattern chain → scanner factory. */
export const SCANNERS = new Map<string, () => Scanner>([
  [JSON.stringify([CL100K('')]), () => new Cl100kScanner(1)],
  [JSON.stringify([CL100K('{1,3}')]), () => new Cl100kScanner(3)],
]);
