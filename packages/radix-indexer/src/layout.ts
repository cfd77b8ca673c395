/**
 * Memory layout of the block table: every offset is a named constant here, so the single-threaded
 * index and the shared-memory index (./pool) read the same words.
 *
 * The table is open addressing with linear probing over one Int32Array (optionally backed by a
 * SharedArrayBuffer). One entry per distinct block identity (router sequence hash):
 *
 *   word  0      META      EMPTY | TOMBSTONE | LIVE_ROOT | LIVE_CHILD (| CLAIMED in the pool)
 *   words 1..2   KEY       sequence hash (lo, hi) — the block identity (PROTOCOL §7.2)
 *   words 3..4   LOCAL     local block hash (lo, hi) — tokens_hash, kept for dumps
 *   word  5      PARENT_LO low word of the parent's sequence hash (META = LIVE_CHILD only). Dumps
 *                          find the parent among the slot's held blocks with that low word and
 *                          confirm it by re-chaining: chain(parent, LOCAL) must equal KEY.
 *   words 6..    HOLDERS   bitset over worker slots, HOLDER_WORDS(maxSlots) words
 *
 * With up to 64 slots an entry is 8 words: 32 bytes, two entries per cache line.
 *
 * u64 words are stored as `value | 0` (Int32Array) so Atomics can operate on them; compare with `| 0`.
 */
export const META = 0;
export const KEY_LO = 1;
export const KEY_HI = 2;
export const LOCAL_LO = 3;
export const LOCAL_HI = 4;
export const PARENT_LO = 5;
export const HOLDERS = 6;
export const FIXED_WORDS = 6;

export const META_EMPTY = 0;
export const META_TOMBSTONE = 1;
/** Reserved for writers of the shared table: an entry being filled in, not yet readable. */
export const META_CLAIMED = 2;
/** Live states are the largest values, so `meta >= META_LIVE_ROOT` means "readable". */
export const META_LIVE_ROOT = 3;
export const META_LIVE_CHILD = 4;

/** Words per entry for a given number of worker slots (a multiple of 32). */
export const holderWords = (maxSlots: number): number => Math.max(1, Math.ceil(maxSlots / 32));
export const entryWords = (maxSlots: number): number => FIXED_WORDS + holderWords(maxSlots);

/** Grow when occupied entries exceed this fraction of capacity. */
export const MAX_LOAD = 0.75;
/** A shared table refuses inserts past this load (the pool grows it well before). */
export const HARD_LOAD = 0.95;

/** Shared counters beside a shared table (Int32Array words). */
export const CTRL_ENTRIES = 0; // occupied entries (claimed + live + empty-held)
export const CTRL_WORDS = 4;

/**
 * External-hash map (private to whoever applies a worker's events): key (slot, ext lo, ext hi) ->
 * sequence hash (lo, hi). Entry words:
 */
/** Slot + 1; 0 marks an empty entry (backward-shift deletion, so no tombstones). */
export const EXT_SLOT1 = 0;
export const EXT_LO = 1;
export const EXT_HI = 2;
export const EXT_SEQ_LO = 3;
export const EXT_SEQ_HI = 4;
export const EXT_WORDS = 5;
