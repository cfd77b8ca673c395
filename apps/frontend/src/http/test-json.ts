/**
 * Test support: strict equality of two parsed JSON values, stricter than `toEqual` and
 * `isDeepStrictEqual`: the same type everywhere (number vs bigint), `Object.is` for numbers (-0),
 * the same prototype, the same own keys in the same order (insertion order: duplicate keys keep
 * the first position, as `JSON.parse` does) and only plain writable enumerable data properties
 * (an own `__proto__` included).
 */
import { expect } from 'vitest';

export function sameJson(got: unknown, want: unknown, path = '$'): void {
  // Plain comparisons first, `expect` only for what differs (a deep tree would make thousands of them).
  if (typeof want !== 'object' || want === null) {
    if (typeof got !== typeof want || !Object.is(got, want)) expect(show(got), path).toBe(show(want));
    return;
  }
  if (typeof got !== 'object' || got === null) {
    expect(got, path).toEqual(want);
    return;
  }
  const g = got as Record<string, unknown>;
  const w = want as Record<string, unknown>;
  if (Array.isArray(g) !== Array.isArray(w))
    expect(Array.isArray(g), `${path}: array`).toBe(Array.isArray(w));
  if (Object.getPrototypeOf(g) !== Object.getPrototypeOf(w))
    expect(Object.getPrototypeOf(g), `${path}: prototype`).toBe(Object.getPrototypeOf(w));
  const keys = Reflect.ownKeys(w);
  const gk = Reflect.ownKeys(g);
  if (gk.length !== keys.length || gk.some((k, i) => k !== keys[i]))
    expect(gk, `${path}: keys`).toEqual(keys);
  for (const k of keys) {
    if (Array.isArray(w) && k === 'length') continue;
    const dg = Object.getOwnPropertyDescriptor(g, k)!;
    const dw = Object.getOwnPropertyDescriptor(w, k)!;
    if (dg.enumerable !== dw.enumerable || dg.writable !== dw.writable || dg.configurable !== dw.configurable)
      expect([dg.enumerable, dg.writable, dg.configurable], `${path}.${String(k)}: attributes`).toEqual([
        dw.enumerable,
        dw.writable,
        dw.configurable,
      ]);
    sameJson(dg.value, dw.value, `${path}.${String(k)}`);
  }
}

/** A primitive with its type, -0 as `-0`. */
const show = (v: unknown): string => `${typeof v} ${Object.is(v, -0) ? '-0' : String(v)}`;
