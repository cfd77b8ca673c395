/**
 * Small scanners for text that arrives in pieces: where a JSON value ends (or that it has not ended
 * yet), and how much of a buffer may be released while a marker could still be forming at its end.
 */

const WS = new Set([' ', '\t', '\n', '\r']);

export function skipWs(s: string, i: number): number {
  while (i < s.length && WS.has(s[i]!)) i++;
  return i;
}

/** `INCOMPLETE`: the value runs past the end of the buffer. `INVALID`: it cannot be JSON. */
export const INCOMPLETE = -1;
export const INVALID = -2;

/** End (exclusive) of the JSON string starting at `s[i] === '"'`. */
function scanString(s: string, i: number): number {
  for (let j = i + 1; j < s.length; j++) {
    const c = s[j];
    if (c === '\\') j++;
    else if (c === '"') return j + 1;
  }
  return INCOMPLETE;
}

/**
 * End (exclusive) of the JSON value starting at `i` (after whitespace), INCOMPLETE or INVALID.
 * Nesting is checked by bracket kind; scalars end at the first delimiter (a scalar touching the
 * buffer end is INCOMPLETE: `12` may become `123`).
 */
export function scanValue(s: string, i: number): number {
  i = skipWs(s, i);
  if (i >= s.length) return INCOMPLETE;
  const c = s[i];
  if (c === '"') return scanString(s, i);
  if (c === '{' || c === '[') {
    const stack: string[] = [];
    for (let j = i; j < s.length; j++) {
      const d = s[j];
      if (d === '"') {
        const e = scanString(s, j);
        if (e < 0) return INCOMPLETE;
        j = e - 1;
      } else if (d === '{' || d === '[') stack.push(d === '{' ? '}' : ']');
      else if (d === '}' || d === ']') {
        if (stack.pop() !== d) return INVALID;
        if (stack.length === 0) return j + 1;
      }
    }
    return INCOMPLETE;
  }
  if (/[-0-9tfn]/.test(c!)) {
    let j = i;
    while (j < s.length && /[-+0-9.eEtruefalsn]/.test(s[j]!)) j++;
    if (j === s.length) return INCOMPLETE;
    const lit = s.slice(i, j);
    return lit === 'true' || lit === 'false' || lit === 'null' || /^-?\d+(\.\d+)?([eE][-+]?\d+)?$/.test(lit)
      ? j
      : INVALID;
  }
  return INVALID;
}

export interface ObjectField {
  key: string;
  /** Offset of the value's first character. */
  start: number;
  /** End (exclusive), or INCOMPLETE. */
  end: number;
}

export interface ObjectScan {
  fields: ObjectField[];
  /** End (exclusive) of the object, INCOMPLETE or INVALID. */
  end: number;
}

/** The top-level fields of the object starting at `s[i] === '{'` as far as the buffer goes. */
export function scanObject(s: string, i: number): ObjectScan {
  const fields: ObjectField[] = [];
  if (s[i] !== '{') return { fields, end: INVALID };
  let j = skipWs(s, i + 1);
  if (j >= s.length) return { fields, end: INCOMPLETE };
  if (s[j] === '}') return { fields, end: j + 1 };
  for (;;) {
    j = skipWs(s, j);
    if (j >= s.length) return { fields, end: INCOMPLETE };
    if (s[j] !== '"') return { fields, end: INVALID };
    const ke = scanString(s, j);
    if (ke < 0) return { fields, end: INCOMPLETE };
    let key: string;
    try {
      key = JSON.parse(s.slice(j, ke)) as string;
    } catch {
      return { fields, end: INVALID };
    }
    j = skipWs(s, ke);
    if (j >= s.length) return { fields, end: INCOMPLETE };
    if (s[j] !== ':') return { fields, end: INVALID };
    const start = skipWs(s, j + 1);
    if (start >= s.length) return { fields, end: INCOMPLETE };
    const end = scanValue(s, start);
    if (end === INVALID) return { fields, end: INVALID };
    fields.push({ key, start, end });
    if (end === INCOMPLETE) return { fields, end: INCOMPLETE };
    j = skipWs(s, end);
    if (j >= s.length) return { fields, end: INCOMPLETE };
    if (s[j] === '}') return { fields, end: j + 1 };
    if (s[j] !== ',') return { fields, end: INVALID };
    j++;
  }
}

/**
 * Length of the longest suffix of `s` that is a proper prefix of one of `markers`: those characters
 * must be held back, the next piece may complete a marker.
 */
export function heldSuffix(s: string, markers: readonly string[]): number {
  let best = 0;
  for (const m of markers) {
    const max = Math.min(m.length - 1, s.length);
    for (let k = max; k > best; k--) if (s.endsWith(m.slice(0, k))) best = k;
  }
  return best;
}

/** First occurrence of any marker at or after `from`: [index, marker], or null. */
export function findFirst(s: string, markers: readonly string[], from = 0): [number, string] | null {
  let best: [number, string] | null = null;
  for (const m of markers) {
    const i = s.indexOf(m, from);
    if (i >= 0 && (best === null || i < best[0])) best = [i, m];
  }
  return best;
}
