import type { Rng } from '@kvrouter/testkit';

/** (lo, hi) pairs of blocks given by their low words, high word 7. */
export const chain = (...lows: number[]): Uint32Array => Uint32Array.from(lows.flatMap((l) => [l, 7]));

/**
 * A random chain of `minLen..maxLen` blocks, prefix-consistent as sequence hashes are: block k has
 * low word k and, for a random number of leading blocks, the high word of one of four families,
 * then a high word unique to `uid`. Low words collide across families on purpose. Draws family,
 * length and shared length from `rng` in that order.
 */
export function familyChain(rng: Rng, uid: number, minLen: number, maxLen: number): Uint32Array {
  const fam = rng.int(0, 3);
  const n = rng.int(minLen, maxLen);
  const shared = rng.int(0, n);
  const c = new Uint32Array(2 * n);
  for (let k = 0; k < n; k++) {
    c[2 * k] = k;
    c[2 * k + 1] = k < shared ? fam : (0x80000000 | (uid << 4) | fam) >>> 0;
  }
  return c;
}
