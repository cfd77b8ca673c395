import { describe, expect, it } from 'vitest';
import { DecodeError } from '../errors.js';
import { hasLongDigitRun, parseJson, stringifyJson } from './json.js';

describe('parseJson (lossless integers)', () => {
  it('keeps integers above 2^53 exact as bigint', () => {
    // JSON.parse would give 7587872800778375000 and 18446744073709552000.
    expect(parseJson('7587872800778374919')).toBe(7587872800778374919n);
    expect(parseJson('[18446744073709551615]')).toEqual([18446744073709551615n]);
    // 2^53 + 1 = 9007199254740993 is the first integer a double cannot hold.
    expect(parseJson('{"a": 9007199254740993}')).toEqual({ a: 9007199254740993n });
    expect(parseJson('-9223372036854775808')).toBe(-9223372036854775808n);
  });

  it('returns safe integers and non-integers as numbers', () => {
    // 2^53 − 1 has 16 digits but is exact, so it stays a number.
    expect(parseJson('9007199254740991')).toBe(9007199254740991);
    expect(parseJson('[1, -2, 0.5, 1e3, 1234567890123456.5]')).toEqual([
      1, -2, 0.5, 1000, 1234567890123456.5,
    ]);
  });

  it('parses the other JSON values the same way JSON.parse does (slow path forced by a long integer)', () => {
    const text =
      '{"big": 12345678901234567890, "s": "a\\"b\\u00e9\\n", "t": true, "f": false, "n": null, "o": {"x": []}}';
    expect(parseJson(text)).toEqual({
      big: 12345678901234567890n,
      s: 'a"bé\n',
      t: true,
      f: false,
      n: null,
      o: { x: [] },
    });
  });

  it('keeps a "__proto__" key as an own property', () => {
    const v = parseJson('{"__proto__": {"polluted": 1}, "n": 12345678901234567890}') as Record<
      string,
      unknown
    >;
    expect(Object.getPrototypeOf(v)).toBe(Object.prototype);
    expect(Object.keys(v)).toEqual(['__proto__', 'n']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('does not take digits inside strings for integers', () => {
    expect(parseJson('{"id": "18446744073709551615"}')).toEqual({ id: '18446744073709551615' });
  });

  it.each([
    ['trailing comma', '[1, 2,]'],
    ['unterminated string', '{"a": "xyz'],
    ['bad literal', '[tru]'],
    ['leading zero', '[01]'],
    ['trailing data', '{} x'],
    ['raw control character', '"a\u0001b"'],
    ['bad escape', '"\\q"'],
    ['empty', ''],
  ])('rejects %s with a DecodeError (fast and slow path)', (_name, text) => {
    expect(() => parseJson(text)).toThrow(DecodeError);
    // The same defect next to a long integer takes the hand-written reader.
    expect(() => parseJson(`[12345678901234567890, ${text}]`)).toThrow(DecodeError);
  });

  it('limits nesting depth instead of overflowing the stack', () => {
    const deep = '['.repeat(10_000) + '12345678901234567890' + ']'.repeat(10_000);
    expect(() => parseJson(deep)).toThrow(/nesting too deep/);
  });
});

describe('stringifyJson', () => {
  it('writes bigints with all digits', () => {
    expect(stringifyJson({ a: 18446744073709551615n, b: [1n, 2], c: null })).toBe(
      '{"a":18446744073709551615,"b":[1,2],"c":null}',
    );
  });

  it('skips undefined members, writes typed arrays as arrays and escapes strings', () => {
    expect(stringifyJson({ u: undefined, t: new Uint32Array([4294967295, 0]), s: 'q"\n' })).toBe(
      '{"t":[4294967295,0],"s":"q\\"\\n"}',
    );
  });

  it('round-trips through parseJson exactly', () => {
    const v = { x: [0n, 2n ** 53n + 1n, 2n ** 64n - 1n], y: 'é', z: { w: false } };
    const back = parseJson(stringifyJson(v)) as { x: unknown[] };
    expect(back).toEqual({ x: [0, 9007199254740993n, 18446744073709551615n], y: 'é', z: { w: false } });
  });

  it('refuses values JSON cannot carry', () => {
    expect(() => stringifyJson(Number.NaN)).toThrow(TypeError);
    expect(() => stringifyJson(() => 1)).toThrow(TypeError);
  });
});

describe('hasLongDigitRun (fast-path guard)', () => {
  it('finds a 16-digit run wherever it sits, and never a 15-digit one', () => {
    expect(hasLongDigitRun('1234567890123456')).toBe(true);
    expect(hasLongDigitRun('x1234567890123456y')).toBe(true);
    expect(hasLongDigitRun('x123456789012345y')).toBe(false);
    expect(hasLongDigitRun('123456789012345,123456789012345')).toBe(false);
    expect(hasLongDigitRun(`${'a'.repeat(31)}1234567890123456`)).toBe(true);
    expect(hasLongDigitRun('')).toBe(false);
  });

  it('agrees with /\\d{16}/ on random digit-heavy texts', () => {
    // Seeded LCG; alphabet weighted toward digits so runs of every length near 16 occur.
    let x = 12345;
    const next = (): number => ((x = (Math.imul(x, 1103515245) + 12345) >>> 0) >>> 8) / 0x1000000;
    const alphabet = '0123456789012345678901234567890123456789,a ';
    const rx = /\d{16}/;
    for (let k = 0; k < 3000; k++) {
      const len = Math.floor(next() * 80);
      let s = '';
      for (let i = 0; i < len; i++) s += alphabet[Math.floor(next() * alphabet.length)];
      expect(hasLongDigitRun(s), s).toBe(rx.test(s));
    }
  });
});
