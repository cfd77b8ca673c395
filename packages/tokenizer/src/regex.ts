/**
 * Oniguruma (what Hugging Face `tokenizers` compiles `Split` patterns with) → JavaScript RegExp
 * with the `u` flag. The differences that matter for tokenizer patterns:
 * - `\s` is Unicode White_Space in Oniguruma (includes U+0085, excludes U+FEFF); JavaScript's `\s`
 *   is the other way round, so `\s` / `\S` become explicit classes;
 * - `(?i:...)` groups (JavaScript before V8 12.5 has no modifier groups) become per-letter classes,
 *   with the Unicode case-folding partners Oniguruma also accepts (ſ for s, K for k);
 * - POSIX brackets, backreferences, possessive quantifiers, atomic groups and other modifiers are
 *   rejected (the caller falls back to the reference implementation).
 */

export class UnsupportedPattern extends Error {}

/** Unicode White_Space, as class contents. */
const WS = '\\t-\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';

/** Extra characters matched case-insensitively by Oniguruma's Unicode case folding. */
const FOLD: Record<string, string> = { s: 'sSſ', k: 'kKK' };

export function translatePattern(src: string): string {
  let out = '';
  let i = 0;
  let inClass = false;
  /** Nesting depth of groups at which a `(?i:` opened, innermost last. */
  const iDepth: number[] = [];
  let depth = 0;
  const ci = (): boolean => iDepth.length > 0;
  while (i < src.length) {
    const c = src[i]!;
    if (c === '\\') {
      const d = src[i + 1];
      if (d === undefined) throw new UnsupportedPattern('trailing backslash');
      if (d === 's') out += inClass ? WS : `[${WS}]`;
      else if (d === 'S') {
        if (inClass) throw new UnsupportedPattern('\\S inside a class');
        out += `[^${WS}]`;
      } else if (d === 'p' || d === 'P') {
        const close = src.indexOf('}', i);
        if (src[i + 2] !== '{' || close < 0) throw new UnsupportedPattern('\\p without {…}');
        out += src.slice(i, close + 1);
        i = close + 1;
        continue;
      } else if (/[0-9]/.test(d) && !inClass) throw new UnsupportedPattern('backreference');
      else if (/[hHAzZGbBkgRXKx]/.test(d) && !(d === 'x' && /[0-9a-fA-F]{2}/.test(src.slice(i + 2, i + 4))))
        throw new UnsupportedPattern(`\\${d}`);
      else if (d === 'x') {
        out += src.slice(i, i + 4);
        i += 4;
        continue;
      } else if (/[dwWD]/.test(d)) throw new UnsupportedPattern(`\\${d} (ASCII vs Unicode semantics)`);
      else if (/[nrtfv]/.test(d)) out += `\\${d}`;
      else if (/[-\\^$.*+?()[\]{}|/!"#%&',:;<=>@_`~]/.test(d))
        out += /[-]/.test(d) && !inClass ? '-' : needsEscape(d, inClass);
      else throw new UnsupportedPattern(`\\${d}`);
      i += 2;
      continue;
    }
    if (inClass) {
      if (c === '[') throw new UnsupportedPattern('nested class');
      if (c === ']') inClass = false;
      out += ci() && /[a-zA-Z]/.test(c) ? foldedInClass(c) : c;
      i++;
      continue;
    }
    if (c === '[') {
      if (src[i + 1] === ':' || (src[i + 1] === '^' && src[i + 2] === ':'))
        throw new UnsupportedPattern('POSIX bracket');
      inClass = true;
      out += c;
      if (src[i + 1] === '^') {
        out += '^';
        i++;
      }
      // A ']' first in a class is a literal in Oniguruma.
      if (src[i + 1] === ']') {
        out += '\\]';
        i++;
      }
      i++;
      continue;
    }
    if (c === '(') {
      depth++;
      if (src[i + 1] === '?') {
        const rest = src.slice(i + 2);
        if (rest.startsWith('i:')) {
          iDepth.push(depth);
          out += '(?:';
          i += 4;
          continue;
        }
        if (rest.startsWith(':') || rest.startsWith('=') || rest.startsWith('!')) {
          out += `(?${rest[0]}`;
          i += 3;
          continue;
        }
        if (rest.startsWith('<=') || rest.startsWith('<!')) {
          out += `(?${rest.slice(0, 2)}`;
          i += 4;
          continue;
        }
        throw new UnsupportedPattern(`group (?${rest.slice(0, 2)}`);
      }
      out += '(?:';
      i++;
      continue;
    }
    if (c === ')') {
      if (iDepth[iDepth.length - 1] === depth) iDepth.pop();
      depth--;
      out += c;
      i++;
      continue;
    }
    if ((c === '+' || c === '?' || c === '*' || c === '}') && src[i + 1] === '+')
      throw new UnsupportedPattern('possessive quantifier');
    if (ci() && /[a-zA-Z]/.test(c)) out += `[${foldedInClass(c)}]`;
    else if (c === '/') out += '\\/';
    else out += c;
    i++;
  }
  if (inClass || depth !== 0) throw new UnsupportedPattern('unbalanced pattern');
  return out;
}

function foldedInClass(c: string): string {
  const l = c.toLowerCase();
  return FOLD[l] ?? `${l}${l.toUpperCase()}`;
}

function needsEscape(d: string, inClass: boolean): string {
  if (/[\\^$.*+?()[\]{}|/]/.test(d) || (inClass && d === '-')) return `\\${d}`;
  return d;
}

/** A JavaScript regex for a Hugging Face `Split` pattern (`{Regex}` or `{String}`). */
export function compilePattern(pattern: { Regex?: unknown; String?: unknown }): RegExp {
  if (typeof pattern.Regex === 'string') return new RegExp(translatePattern(pattern.Regex), 'gu');
  if (typeof pattern.String === 'string')
    return new RegExp(pattern.String.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&'), 'gu');
  throw new UnsupportedPattern('pattern is neither Regex nor String');
}
