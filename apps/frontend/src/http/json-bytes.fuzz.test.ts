/**
 * `parseJsonBytes` against the reference it replaces, `parseJson(utf8Text(bytes))` (the frontend's
 * lossless reader over the whole decoded body), on random JSON texts: random values (unicode of
 * every plane, lone surrogates, `__proto__` and duplicate keys, numbers of every shape and length
 * including u64 and past-double ones, nesting up to past the 512 limit) serialized with random
 * whitespace and random escapes (short, `\uXXXX` of any code unit, surrogate pairs), then the same
 * bytes with invalid UTF-8 put inside strings, and byte edits of them. For every text the parser
 * must return exactly the reference's value (same types, -0, bigints, key order, own
 * `__proto__`), or `BAIL`; a text the reference refuses must give `BAIL`, and a valid text nested
 * no deeper than the limit must never bail (else the comparison would prove nothing).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseJson } from '@kvrouter/protocols';
import { fuzzParams, fuzzTimeout, mutatedBytes } from '@kvrouter/testkit';
import { utf8Text } from './body-thread.js';
import { BAIL, parseJsonBytes, STRING_CACHE_MIN, StringCache } from './json-bytes.js';
import { sameJson } from './test-json.js';

const T = fuzzTimeout(60_000);

/** A value tree whose objects are entry lists (so that keys can repeat) and whose numbers are texts. */
type Tree =
  | { t: 'lit'; v: null | boolean }
  | { t: 'num'; text: string }
  | { t: 'str'; v: string }
  | { t: 'arr'; items: Tree[] }
  | { t: 'obj'; entries: [string, Tree][] };

const digits = (min: number, max: number) =>
  fc.array(fc.integer({ min: 0, max: 9 }), { minLength: min, maxLength: max }).map((d) => d.join(''));

/** JSON number texts: short and long integers (u64, i64, past 2^64), fractions, exponents in every form. */
const numberText: fc.Arbitrary<string> = fc.oneof(
  fc.integer().map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((d) => JSON.stringify(d)),
  fc.bigInt({ min: -(1n << 70n), max: 1n << 70n }).map(String),
  fc.constantFrom(
    '0',
    '-0',
    '-0.0',
    '0e0',
    '1E+2',
    '1e-400',
    '1e400',
    '-1e400',
    '9007199254740991',
    '9007199254740992',
    '-9007199254740993',
    '18446744073709551615',
    '123456789012345',
    '1234567890123456',
    '0.1000000000000000055511151231257827',
    '2.2250738585072011e-308',
    '4.9e-324',
  ),
  fc
    .tuple(
      fc.boolean(),
      fc.integer({ min: 1, max: 9 }),
      digits(0, 24),
      fc.option(digits(1, 20), { nil: undefined }),
      fc.option(fc.tuple(fc.constantFrom('e', 'E'), fc.constantFrom('', '+', '-'), digits(1, 4)), {
        nil: undefined,
      }),
    )
    .map(
      ([neg, first, rest, frac, exp]) =>
        `${neg ? '-' : ''}${first}${rest}${frac !== undefined ? `.${frac}` : ''}${exp ? exp.join('') : ''}`,
    ),
);

/** Strings of any UTF-16 code units (lone surrogates included), of characters of every plane, and ASCII with specials. */
const str: fc.Arbitrary<string> = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 12 }),
  fc.string({ unit: 'grapheme', maxLength: 12 }),
  fc.string({
    unit: fc.constantFrom('"', '\\', '/', '\n', '\t', '\u0000', '\u001f', 'a', 'é', '世', '🙂', '\u2028'),
    maxLength: 16,
  }),
  fc.constantFrom('__proto__', 'constructor', 'toString', '0', '1', '4294967295', '-1', ''),
);

const tree: fc.Arbitrary<Tree> = fc.letrec<{ v: Tree }>((tie) => ({
  v: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constantFrom(null, true, false).map((v): Tree => ({ t: 'lit', v })),
    numberText.map((text): Tree => ({ t: 'num', text })),
    str.map((v): Tree => ({ t: 'str', v })),
    fc.array(tie('v'), { maxLength: 5 }).map((items): Tree => ({ t: 'arr', items })),
    fc.array(fc.tuple(str, tie('v')), { maxLength: 5 }).map((entries): Tree => ({ t: 'obj', entries })),
  ),
})).v;

/** Deterministic choices of the serializer (whitespace, escapes) from one seed. */
function chooser(seed: number): (n: number) => number {
  let x = seed >>> 0 || 1;
  return (n) => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) % n;
  };
}

const WS = ['', '', '', ' ', '\n', '\t', '\r\n  '];
const SHORT: Record<string, string> = {
  '"': '\\"',
  '\\': '\\\\',
  '\b': '\\b',
  '\f': '\\f',
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
};

function quote(s: string, pick: (n: number) => number, escapes: boolean): string {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const ch = s[i]!;
    const c = ch.charCodeAt(0);
    const hex = c.toString(16).padStart(4, '0');
    const u = `\\u${pick(2) ? hex : hex.toUpperCase()}`;
    const low = s.charCodeAt(i + 1);
    if (c >= 0xd800 && c <= 0xdbff && low >= 0xdc00 && low <= 0xdfff && !(escapes && pick(2))) {
      // A whole astral character, raw (4 UTF-8 bytes).
      out += s.slice(i, i + 2);
      i++;
    } else if (SHORT[ch] !== undefined) out += pick(3) === 0 ? u : SHORT[ch];
    else if (c < 0x20 || (c >= 0xd800 && c <= 0xdfff)) out += u;
    else if (ch === '/' && escapes && pick(2)) out += '\\/';
    else out += escapes && pick(4) === 0 ? u : ch;
  }
  return `${out}"`;
}

function serialize(t: Tree, pick: (n: number) => number, escapes: boolean): string {
  const ws = () => WS[pick(WS.length)]!;
  switch (t.t) {
    case 'lit':
      return String(t.v);
    case 'num':
      return t.text;
    case 'str':
      return quote(t.v, pick, escapes);
    case 'arr':
      return `[${ws()}${t.items.map((x) => serialize(x, pick, escapes) + ws()).join(`,${ws()}`)}]`;
    case 'obj':
      return `{${ws()}${t.entries
        .map(([k, v]) => `${quote(k, pick, escapes)}${ws()}:${ws()}${serialize(v, pick, escapes)}${ws()}`)
        .join(`,${ws()}`)}}`;
  }
}

/** The reference: what the frontend did with a whole body (decode, then the lossless reader). */
function reference(b: Buffer): { ok: true; v: unknown } | { ok: false } {
  try {
    return { ok: true, v: parseJson(utf8Text(b)) };
  } catch {
    return { ok: false };
  }
}

/** The parser agrees with the reference on `b`: the same value, or BAIL (always BAIL when the reference refuses). */
function agrees(b: Buffer, mayBail: boolean, strings: StringCache | null = null): void {
  const ref = reference(b);
  const got = parseJsonBytes(b, strings);
  if (!ref.ok) {
    expect(got).toBe(BAIL);
    return;
  }
  if (got === BAIL) {
    expect(mayBail, `bailed on valid JSON: ${b.toString('utf8').slice(0, 200)}`).toBe(true);
    return;
  }
  sameJson(got, ref.v);
}

const doc = fc.record({
  t: tree,
  seed: fc.integer(),
  escapes: fc.boolean(),
  bom: fc.boolean(),
  // Extra nesting around the value: 0, a little, or around the 512 limit.
  wrap: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 8 }), fc.integer({ min: 505, max: 520 })),
  wrapObj: fc.boolean(),
});

type Doc = typeof doc extends fc.Arbitrary<infer R> ? R : never;

function docBytes(d: Doc): Buffer {
  const pick = chooser(d.seed);
  let text = serialize(d.t, pick, d.escapes);
  for (let i = 0; i < d.wrap; i++) text = d.wrapObj ? `{"k":${text}}` : `[${text}]`;
  const b = Buffer.from(WS[pick(WS.length)]! + text + WS[pick(WS.length)]!, 'utf8');
  return d.bom ? Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), b]) : b;
}

/** Nesting of the tree plus the wrapping (containers). */
function depth(t: Tree): number {
  if (t.t === 'arr') return 1 + Math.max(0, ...t.items.map(depth));
  if (t.t === 'obj') return 1 + Math.max(0, ...t.entries.map(([, v]) => depth(v)));
  return 0;
}

describe('parseJsonBytes = parseJson(utf8Text(bytes))', () => {
  it(
    'random JSON texts: the same value, and no bail below the nesting limit',
    () => {
      fc.assert(
        fc.property(doc, (d) => {
          const b = docBytes(d);
          agrees(b, depth(d.t) + d.wrap > 500);
        }),
        fuzzParams(400, 20_000),
      );
    },
    T,
  );

  it(
    'invalid UTF-8 inside strings decodes to the same U+FFFD as the whole body',
    () => {
      const bad = fc.uint8Array({ minLength: 1, maxLength: 4 }).map((a) => a.map((x) => 0x80 | x));
      fc.assert(
        fc.property(doc, fc.array(fc.tuple(fc.nat(), bad), { minLength: 1, maxLength: 4 }), (d, inserts) => {
          let b = docBytes({ ...d, wrap: Math.min(d.wrap, 8) });
          // Put the bytes right after opening quotes (the string starts there whatever the rest is).
          const quotes: number[] = [];
          for (let i = 0; i < b.length; i++) if (b[i] === 0x22) quotes.push(i);
          if (quotes.length === 0) return;
          for (const [at, bytes] of inserts) {
            const q = quotes[at % quotes.length]! + 1;
            b = Buffer.concat([b.subarray(0, q), bytes, b.subarray(q)]);
            for (let j = 0; j < quotes.length; j++) if (quotes[j]! >= q) quotes[j]! += bytes.length;
          }
          agrees(b, true);
        }),
        fuzzParams(300, 10_000),
      );
    },
    T,
  );

  it(
    'byte edits of valid texts: the same value or BAIL, and BAIL whenever the reference refuses',
    () => {
      fc.assert(
        fc.property(
          doc.map((d) => docBytes({ ...d, wrap: Math.min(d.wrap, 3) })).chain((b) => mutatedBytes(b)),
          (b) => agrees(Buffer.from(b), true),
        ),
        fuzzParams(600, 30_000),
      );
    },
    T,
  );
});

/**
 * Long strings that look alike: one random base text, then variants that share its first 32 bytes
 * or more (the cache's candidates for each other) and differ after (a character changed, cut
 * short, extended, an escape-worthy character at the end), each at least `STRING_CACHE_MIN` bytes.
 */
const lookalikes: fc.Arbitrary<string[]> = fc
  .tuple(
    fc.string({ unit: 'binary', minLength: 40, maxLength: 120 }),
    fc.array(fc.tuple(fc.nat(), fc.constantFrom('', '"', '\\', '\n', 'é', '\u{1f600}', 'x', '\ud800')), {
      minLength: 1,
      maxLength: 6,
    }),
  )
  .map(([head, edits]) => {
    const base = head.repeat(Math.ceil(STRING_CACHE_MIN / head.length) + 1);
    const out = [base];
    for (const [at, ch] of edits) {
      const i = 40 + (at % (base.length - 40));
      out.push(base.slice(0, i) + ch + base.slice(i + 1), base.slice(0, i) + ch, base + ch);
    }
    return out;
  });

describe('parseJsonBytes with a StringCache = parseJson(utf8Text(bytes))', () => {
  it(
    'bodies of look-alike long strings (same heads, one a prefix of another, escapes at the end), parsed one after another with one small cache: every value the same',
    () => {
      fc.assert(
        fc.property(
          lookalikes,
          fc.array(fc.tuple(fc.array(fc.nat(), { minLength: 1, maxLength: 5 }), fc.integer(), fc.boolean()), {
            minLength: 2,
            maxLength: 12,
          }),
          fc.integer({ min: 16, max: 256 }),
          (pool, bodies, kib) => {
            // Small enough that bodies evict each other's strings now and then.
            const strings = new StringCache(kib * 1024);
            for (const [picks, seed, escapes] of bodies) {
              const t: Tree = {
                t: 'arr',
                items: picks.map((k) => ({ t: 'str', v: pool[k % pool.length]! })),
              };
              const b = Buffer.from(serialize(t, chooser(seed), escapes), 'utf8');
              agrees(b, false, strings);
              // The same body again: its long strings now come from the cache.
              agrees(b, false, strings);
            }
          },
        ),
        fuzzParams(200, 5_000),
      );
    },
    T,
  );

  it(
    'byte edits of a body parsed before: the same value or BAIL, never a kept string where the bytes differ',
    () => {
      fc.assert(
        fc.property(
          lookalikes.chain((pool) => {
            const b = Buffer.from(JSON.stringify(pool), 'utf8');
            return fc.tuple(fc.constant(b), mutatedBytes(b));
          }),
          ([b, edited]) => {
            const strings = new StringCache(1 << 20);
            agrees(b, false, strings);
            agrees(Buffer.from(edited), true, strings);
          },
        ),
        fuzzParams(300, 10_000),
      );
    },
    T,
  );
});
