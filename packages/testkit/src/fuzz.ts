/**
 * Case counts of the fuzz targets (`*.fuzz.test.ts`, fast-check). Each target names two counts: a
 * bounded one that `npm test` runs (seconds) and a large one that `pnpm fuzz` runs (it sets
 * `KVR_FUZZ=1`). `FUZZ_RUNS=<n>` overrides both, e.g. to rerun one target briefly or for hours;
 * `FUZZ_SEED=<n>` replays a failure fast-check reported.
 */
import fc from 'fast-check';

export interface FuzzParams {
  numRuns: number;
  seed?: number;
}

function positiveInt(name: string, raw: string): number {
  const n = Number(raw);
  if (!Number.isInteger(n) || n <= 0)
    throw new Error(`${name}: expected a positive integer, got ${JSON.stringify(raw)}`);
  return n;
}

/** The case count for this run: `FUZZ_RUNS`, else `full` under `pnpm fuzz`, else `ci`. */
export function fuzzRuns(ci: number, full: number): number {
  const env = process.env.FUZZ_RUNS;
  if (env !== undefined && env !== '') return positiveInt('FUZZ_RUNS', env);
  return process.env.KVR_FUZZ === '1' ? full : ci;
}

/** fast-check parameters (`numRuns`, and `seed` when `FUZZ_SEED` is set). */
export function fuzzParams(ci: number, full: number): FuzzParams {
  const seed = process.env.FUZZ_SEED;
  const p: FuzzParams = { numRuns: fuzzRuns(ci, full) };
  if (seed !== undefined && seed !== '') p.seed = Number(seed) | 0;
  return p;
}

/** Whether this is a `pnpm fuzz` run (tests then allow themselves a longer timeout). */
export const fuzzTimeout = (ciMs: number): number =>
  process.env.KVR_FUZZ === '1' || process.env.FUZZ_RUNS ? 0 : ciMs;

/** One edit of a byte string: what a bit flip, a lost or repeated packet, or a cut frame does to it. */
export type ByteEdit =
  | { kind: 'flip'; at: number; mask: number }
  | { kind: 'set'; at: number; value: number }
  | { kind: 'insert'; at: number; bytes: Uint8Array }
  | { kind: 'delete'; at: number; len: number }
  | { kind: 'truncate'; at: number }
  | { kind: 'repeat'; at: number; len: number };

/** `base` with `edits` applied in order (positions taken modulo the current length). */
export function applyByteEdits(base: Uint8Array, edits: readonly ByteEdit[]): Uint8Array {
  let b = Uint8Array.from(base);
  for (const e of edits) {
    const n = b.length;
    const at = n === 0 ? 0 : e.at % (n + 1);
    switch (e.kind) {
      case 'flip':
        if (n > 0) b[at % n]! ^= e.mask || 1;
        break;
      case 'set':
        if (n > 0) b[at % n] = e.value;
        break;
      case 'insert': {
        const o = new Uint8Array(n + e.bytes.length);
        o.set(b.subarray(0, at));
        o.set(e.bytes, at);
        o.set(b.subarray(at), at + e.bytes.length);
        b = o;
        break;
      }
      case 'delete': {
        const o = new Uint8Array(n - Math.min(e.len, n - at));
        o.set(b.subarray(0, at));
        o.set(b.subarray(at + e.len), at);
        b = o;
        break;
      }
      case 'truncate':
        b = b.slice(0, at);
        break;
      case 'repeat': {
        const part = b.slice(at, at + e.len);
        const o = new Uint8Array(n + part.length);
        o.set(b.subarray(0, at + part.length));
        o.set(part, at + part.length);
        o.set(b.subarray(at + part.length), at + 2 * part.length);
        b = o;
        break;
      }
    }
  }
  return b;
}

const byteEdit: fc.Arbitrary<ByteEdit> = fc.oneof(
  fc.record({ kind: fc.constant('flip' as const), at: fc.nat(), mask: fc.integer({ min: 1, max: 255 }) }),
  fc.record({
    kind: fc.constant('set' as const),
    at: fc.nat(),
    value: fc.constantFrom(0, 0x7f, 0x80, 0xc1, 0xdc, 0xdd, 0xde, 0xdf, 0xff),
  }),
  fc.record({
    kind: fc.constant('insert' as const),
    at: fc.nat(),
    bytes: fc.uint8Array({ minLength: 1, maxLength: 9 }),
  }),
  fc.record({ kind: fc.constant('delete' as const), at: fc.nat(), len: fc.integer({ min: 1, max: 8 }) }),
  fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('repeat' as const), at: fc.nat(), len: fc.integer({ min: 1, max: 16 }) }),
);

/** `base` after one to four random edits (flips, inserts, deletes, cuts, repeats). */
export const mutatedBytes = (base: Uint8Array): fc.Arbitrary<Uint8Array> =>
  fc.array(byteEdit, { minLength: 1, maxLength: 4 }).map((edits) => applyByteEdits(base, edits));

/** Every strict prefix of `base` (a frame cut anywhere). */
export const truncatedBytes = (base: Uint8Array): fc.Arbitrary<Uint8Array> =>
  fc.nat({ max: Math.max(0, base.length - 1) }).map((n) => base.slice(0, n));

/**
 * A decoded wire value (what msgpack or JSON can carry: maps, arrays, strings, integers of every
 * width including u64/i64 bigints, floats, booleans, null, bytes).
 */
export const wireValue = (): fc.Arbitrary<unknown> =>
  fc.letrec<{ v: unknown }>((tie) => ({
    v: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      fc.constantFrom(null, true, false, 0, -1, 1, 0.5, Number.NaN, 2 ** 32, 2 ** 53, -(2 ** 63)),
      fc.integer(),
      fc.bigInt({ min: -(1n << 63n), max: (1n << 64n) - 1n }),
      fc.double(),
      fc.string({ maxLength: 12 }),
      // Any UTF-16 code units: non-ASCII, astral characters, lone surrogates.
      fc.string({ unit: 'binary', maxLength: 8 }),
      fc.uint8Array({ maxLength: 12 }),
      fc.array(tie('v'), { maxLength: 5 }),
      fc.dictionary(fc.string({ maxLength: 8 }), tie('v'), { maxKeys: 5 }),
    ),
  })).v;

/**
 * `tree` with one node (chosen by `path`, numbers picking a child at each level) replaced by `value`:
 * a message that is right everywhere but one field.
 */
export function replaceAt(tree: unknown, path: readonly number[], value: unknown): unknown {
  if (path.length === 0 || tree === null || typeof tree !== 'object' || tree instanceof Uint8Array)
    return value;
  const [i, ...rest] = path as [number, ...number[]];
  if (Array.isArray(tree)) {
    if (tree.length === 0) return value;
    const k = i % (tree.length + 1);
    if (k === tree.length) return value; // stop here: replace this array
    const out = tree.slice();
    out[k] = replaceAt(tree[k], rest, value);
    return out;
  }
  const keys = Object.keys(tree);
  if (keys.length === 0) return value;
  const k = i % (keys.length + 1);
  if (k === keys.length) return value;
  const key = keys[k]!;
  return {
    ...(tree as Record<string, unknown>),
    [key]: replaceAt((tree as Record<string, unknown>)[key], rest, value),
  };
}

const oneEdit = fc.tuple(
  fc.array(fc.nat({ max: 64 }), { maxLength: 8 }),
  fc.oneof(wireValue(), fc.constant(undefined)),
);

/** `tree` with one to three fields replaced by random wire values, or deleted (undefined). */
export const mutatedTree = (tree: unknown): fc.Arbitrary<unknown> =>
  fc
    .array(oneEdit, { minLength: 1, maxLength: 3 })
    .map((edits) => edits.reduce((t, [path, v]) => replaceAt(t, path, v), tree));
