/**
 * Memory layout of the block table: every offset is a named constant here, so the single-threaded
 * index and the shared-memory index (./pool) read the same words.
 *
 * The table is open addressing with linear probing over one Int32Array (optionally backed by a
 * SharedArrayBuffer). Capacities are any integer (not powers of two): the home entry of a key is
 * `fastrange(mix(key), capacity)`, so the table can grow by ~1.23x instead of doubling. One entry
 * per distinct block identity (router sequence hash):
 *
 *   word  0             META      state in the low 3 bits (EMPTY | TOMBSTONE | CLAIMED | LIVE_ROOT |
 *                                 LIVE_CHILD); for LIVE_CHILD the upper 29 bits hold the parent's
 *                                 sequence-hash low word with its low 3 bits cleared (a dump hint:
 *                                 dumps find the parent among the slot's held blocks with that hint
 *                                 and confirm it by re-chaining, chain(parent, LOCAL) == KEY)
 *   words 1..2          KEY       sequence hash (lo, hi) — the block identity (PROTOCOL §7.2)
 *   words 3..3+hw-1     HOLDERS   bitset over worker slots, hw = holderWords(maxSlots)
 *   words 3+hw..4+hw    LOCAL     local block hash (lo, hi) — tokens_hash, read by dumps only
 *
 * The words a query reads (META, KEY, HOLDERS) come first and are contiguous. With up to 64 slots
 * an entry is 7 words (28 bytes).
 *
 * u64 words are stored as `value | 0` (Int32Array) so Atomics can operate on them; compare with `| 0`.
 */
export const META = 0;
export const KEY_LO = 1;
export const KEY_HI = 2;
export const HOLDERS = 3;
/** Words besides the holder bitset: META, KEY (2), LOCAL (2). */
export const FIXED_WORDS = 5;
/** Offset of LOCAL_LO in an entry (LOCAL_HI follows). */
export const localLo = (hw: number): number => HOLDERS + hw;

export const META_STATE = 7;
/** The parent hint occupies the META bits above the state. */
export const META_HINT = ~META_STATE;
export const META_EMPTY = 0;
export const META_TOMBSTONE = 1;
/** Reserved for writers of the shared table: an entry being filled in, not yet readable. */
export const META_CLAIMED = 2;
/** Live states are the largest values, so `(meta & META_STATE) >= META_LIVE_ROOT` means "readable". */
export const META_LIVE_ROOT = 3;
export const META_LIVE_CHILD = 4;

/** Words per entry for a given number of worker slots (a multiple of 32). */
export const holderWords = (maxSlots: number): number => Math.max(1, Math.ceil(maxSlots / 32));
export const entryWords = (maxSlots: number): number => FIXED_WORDS + holderWords(maxSlots);

/**
 * Grow when occupied entries exceed this fraction of capacity (linear probing: an insert scans
 * ~13 entries at 0.8, ~4 cache lines, mostly sequential).
 */
export const MAX_LOAD = 0.8;
/**
 * Load right after a growth: capacity x1.23, so the load cycles between 0.65 and 0.8 (an entry
 * costs at most 28 / 0.65 = 43 bytes with 64 slots; x1.23 costs ~5 copies per entry while
 * filling from empty, against 4 at x1.33 and 2 when doubling).
 */
export const GROW_LOAD = 0.65;
/** A shared table refuses inserts past this load (the pool grows it well before). */
export const HARD_LOAD = 0.95;
/** Smallest table or external map. */
export const MIN_CAPACITY = 16;

/**
 * Shared counters beside a shared table (Int32Array words). Each writer adds its inserts once per
 * task, so writers do not bounce one cache line per insert.
 */
export const CTRL_ENTRIES = 0; // occupied entries (claimed + live + empty-held)
export const CTRL_WORDS = 16;

/**
 * Per-slot block counts (|Held[w]|) live `TREE_SIZE_STRIDE` words apart: slots of different writer
 * threads never share a cache line (each count changes with every block the slot stores).
 */
export const TREE_SIZE_STRIDE = 16;

/**
 * External-hash map (private to whoever applies a worker's events): one table per slot, key
 * (ext lo, ext hi) -> sequence hash (lo, hi). Robin Hood linear probing with backward-shift
 * deletion. (0, 0) marks an empty entry; the key 0 itself lives in one extra entry past the end.
 */
export const EXT_LO = 0;
export const EXT_HI = 1;
export const EXT_SEQ_LO = 2;
export const EXT_SEQ_HI = 3;
export const EXT_WORDS = 4;
/** Robin Hood keeps probe lengths short, so the private maps run fuller than the shared table. */
export const EXT_MAX_LOAD = 0.9;
export const EXT_GROW_LOAD = 0.68;
/**
 * Maps below this capacity double instead (a fresh slot's map reaches working size in a few
 * rehashes; their memory is small next to the big maps, which grow by ~1.32x).
 */
export const EXT_DOUBLE_BELOW = 1024;
