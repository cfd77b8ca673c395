import { describe, expect, it } from 'vitest';
import { asU64, parseU64, u64FromHex, u64FromParts, u64Hi, u64Lo, u64ToHex } from './ids.js';

describe('u64 helpers', () => {
  it('splits and joins exactly above 2^53', () => {
    const v = 18446744073709551615n;
    expect(u64Lo(v)).toBe(0xffffffff);
    expect(u64Hi(v)).toBe(0xffffffff);
    expect(u64FromParts(0x89abcdef, 0x01234567)).toBe(0x0123456789abcdefn);
    expect(u64FromParts(u64Lo(7587872800778374919n), u64Hi(7587872800778374919n))).toBe(7587872800778374919n);
  });
  it('reinterprets signed i64 bit for bit', () => {
    expect(asU64(-1n)).toBe(18446744073709551615n);
    expect(asU64(-2)).toBe(18446744073709551614n);
  });
  it('parses decimal strings losslessly and rejects junk', () => {
    expect(parseU64('18446744073709551615')).toBe(18446744073709551615n);
    expect(() => parseU64('18446744073709551616')).toThrow(RangeError);
    expect(() => parseU64(1.5)).toThrow(RangeError);
    expect(() => parseU64(2 ** 60)).toThrow(RangeError);
    expect(() => parseU64('-1')).toThrow(RangeError);
  });
  it('hex form is lowercase without padding', () => {
    expect(u64ToHex(0x694d8a1c2b3e4f07n)).toBe('694d8a1c2b3e4f07');
    expect(u64ToHex(255n)).toBe('ff');
    expect(u64FromHex('ff')).toBe(255n);
    expect(() => u64FromHex('FF')).toThrow(RangeError);
  });
});
